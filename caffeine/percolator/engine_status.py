"""Pending notifications, quiescence, and the observer engine's status.

Layer: percolator. Internal (storage reads; the oracle's status call).

*Quiescent* means: a full scan of every observed table found no notification, and no
timestamp was handed out while it ran (the oracle's "next timestamp" was the same before and
after). Any observer run still in flight keeps its own notification until it has committed,
so an empty scan cannot miss work in progress; the unchanged oracle proves no transaction
started or committed meanwhile. ``caffeine wait`` is meant for after the feeding stopped: a
writer that keeps feeding keeps the system from being quiescent, by definition.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Iterable

from caffeine.errors import CaffeineError
from caffeine.oracle.timestamps import physical_ms
from caffeine.percolator.layout import NOTIFY
from caffeine.percolator.workers_table import WORKERS_TABLE, list_failures, live_workers
from caffeine.storage import ReadSpec, Store, TableNotFound


class NotQuiescent(CaffeineError):
    """``wait_until_quiescent`` ran out of time; says how much work is left and what fails."""


@dataclass
class Pending:
    count: int
    oldest_ts: int | None
    rows: int = 0  # rows with at least one notify cell

    def oldest_age_s(self, now_ms: float | None = None) -> float | None:
        if self.oldest_ts is None:
            return None
        now_ms = time.time() * 1000 if now_ms is None else now_ms
        return max(0.0, (now_ms - physical_ms(self.oldest_ts)) / 1000)


def pending_notifications(store: Store, tables: Iterable[str]) -> Pending:
    """Notify cells in the tables (values not transferred), and the oldest one's timestamp."""
    count, oldest, notified = 0, None, 0
    for table in tables:
        try:
            rows = store.scan(table, spec=ReadSpec(families=(NOTIFY,)), key_only=True, batch_size=1024)
            for row in rows:
                notified += 1
                for cell in row:
                    count += 1
                    oldest = cell.ts if oldest is None else min(oldest, cell.ts)
        except TableNotFound:
            continue
    return Pending(count, oldest, notified)


def has_notifications(store: Store, tables: Iterable[str]) -> bool:
    """Whether any of the tables holds a notify cell: a scan that stops at the first one.

    Cheap while work is pending (the first live notification is near wherever the scan
    starts); a full pass over the notify family only when there is none, which is exactly
    what proving "none" takes.
    """
    for table in tables:
        try:
            if next(iter(store.scan(table, spec=ReadSpec(families=(NOTIFY,)), key_only=True, limit=1)), None):
                return True
        except TableNotFound:
            continue
    return False


def wait_until_quiescent(
    cluster,
    tables: Iterable[str],
    *,
    timeout_s: float | None = None,
    poll_s: float = 0.2,
    progress: Callable[[Pending], None] | None = None,
    count_every_s: float = 5.0,
) -> float:
    """Block until quiescent; returns the seconds waited. Raises NotQuiescent on timeout.

    Each poll asks only whether any notification is left (``has_notifications``). Counting
    them all reads every pending notification, which at a backlog of 10,000 takes the better
    part of a second of the servers' CPU, taken from the workers being waited for; so the
    count that ``progress`` receives is refreshed at most every ``count_every_s``, and never
    more often than nine times its own duration (the count's share of the wait stays under
    10%). ``progress`` is called after every poll that found work, with the latest count.
    """
    tables = list(tables)
    started = time.monotonic()
    pending: Pending | None = None
    next_count = started
    while True:
        before = cluster.oracle.status()
        busy = has_notifications(cluster.store, tables)
        after = cluster.oracle.status()
        if not busy and before == after:
            return time.monotonic() - started
        now = time.monotonic()
        if busy and progress is not None:
            if pending is None or now >= next_count:
                pending = pending_notifications(cluster.store, tables)
                next_count = now + max(count_every_s, 10 * (time.monotonic() - now))
            progress(pending)
        if timeout_s is not None and now - started > timeout_s:
            left = pending_notifications(cluster.store, tables)
            failures = list_failures(cluster.store)
            detail = f"; {len(failures)} failing observer cells, e.g. {failures[0]}" if failures else ""
            raise NotQuiescent(
                f"not quiescent after {timeout_s:.0f}s: {left.count} notifications pending{detail}"
            )
        time.sleep(poll_s)


def pending_printer(stream, every_s: float = 2.0) -> Callable[[Pending], None]:
    """A ``progress`` for ``wait_until_quiescent`` that prints the pending count to
    ``stream``, at most every ``every_s`` and each count once (the wait passes the same
    ``Pending`` again until it recounts)."""
    last: list = [0.0, None]

    def progress(pending: Pending) -> None:
        if pending is not last[1] and time.monotonic() - last[0] >= every_s:
            last[0], last[1] = time.monotonic(), pending
            print(f"  {pending.count} notifications pending", file=stream, flush=True)

    return progress


def worker_totals(cluster) -> dict[str, int]:
    """The live observer workers' counters summed (runs, commits, notifications cleared, ...:
    each worker publishes its own with its heartbeat), ``workers``: how many there are, and
    ``threads``: how many observer runs they take on at once."""
    store = cluster.store
    workers = (live_workers(store, time.time() * 1000, cluster.settings.owner_grace_ms)
               if WORKERS_TABLE in store.list_tables() else [])
    totals: dict[str, int] = {"workers": len(workers), "threads": sum(w.get("threads", 0) for w in workers)}
    for worker in workers:
        for key, value in worker.get("metrics", {}).items():
            totals[key] = totals.get(key, 0) + value
    return totals


def engine_report(cluster, tables: Iterable[str]) -> dict:
    """What ``caffeine status`` shows of the observer engine: live workers and their metrics,
    notifications pending and the oldest one's age, failing observer cells."""
    store = cluster.store
    if WORKERS_TABLE not in store.list_tables():
        workers, failures = [], []
    else:
        workers = live_workers(store, time.time() * 1000, cluster.settings.owner_grace_ms)
        failures = list_failures(store)
    pending = pending_notifications(store, tables)
    totals: dict[str, int] = {}
    for worker in workers:
        for key, value in worker.get("metrics", {}).items():
            totals[key] = totals.get(key, 0) + value
        for key in ("lock_waits", "cas_conflicts", "txn_retries"):
            totals[key] = totals.get(key, 0) + worker.get("storage", {}).get(key, 0)
    age = pending.oldest_age_s()
    return {
        "workers": [{k: w.get(k) for k in ("worker", "pid", "host", "app", "threads")} for w in workers],
        "metrics": totals,
        "pending_notifications": pending.count,
        "oldest_pending_age_s": None if age is None else round(age, 3),
        "failures": failures,
    }


def format_engine_report(report: dict) -> str:
    lines = [f"observer workers: {len(report['workers'])} live"]
    for w in report["workers"]:
        lines.append(f"  {w['worker']}  pid {w['pid']} on {w['host']}  app {w['app']}  {w['threads']} threads")
    m = report["metrics"]
    if m:
        lines.append(
            "  runs {runs}, commits {commits}, conflicts {conflicts}, retries {retries}, failures {failures}, "
            "stale {stale}, redos {redos}, notifications cleared {cleared}, lock waits {lock_waits}".format_map(
                defaultdict(int, m)  # a counter an older worker does not publish reads 0
            )
        )
    age = report["oldest_pending_age_s"]
    lines.append(
        f"notifications pending: {report['pending_notifications']}"
        + ("" if age is None else f" (oldest {age:.1f}s old)")
    )
    failures = report["failures"]
    lines.append(f"failing observer cells: {len(failures)}")
    for f in failures[:20]:
        lines.append(f"  {f['table']}/{f['row']}/{f['column']} [{', '.join(f['observers'])}] "
                     f"attempt {f['attempts']}: {f['error'].splitlines()[-1][:200]}")
    if len(failures) > 20:
        lines.append(f"  ... and {len(failures) - 20} more")
    return "\n".join(lines)
