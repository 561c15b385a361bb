"""Pending notifications, quiescence, and the observer engine's status.

Layer: percolator internals (storage reads; the oracle's status call).

*Quiescent* means: a full scan of every observed table found no notification, and no
timestamp was handed out while it ran (the oracle's "next timestamp" was the same before and
after). Any observer run still in flight keeps its own notification until it has committed,
so an empty scan cannot miss work in progress; the unchanged oracle proves no transaction
started or committed meanwhile. ``caffeine wait`` is meant for after the feeding stopped: a
writer that keeps feeding keeps the system from being quiescent, by definition.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable

from caffeine.errors import CaffeineError
from caffeine.oracle.timestamps import physical_ms
from caffeine.percolator.layout import NOTIFY
from caffeine.storage import ReadSpec, Store, TableNotFound


class NotQuiescent(CaffeineError):
    """``wait_until_quiescent`` ran out of time; says how much work is left and what fails."""


@dataclass
class Pending:
    count: int
    oldest_ts: int | None

    def oldest_age_s(self, now_ms: float | None = None) -> float | None:
        if self.oldest_ts is None:
            return None
        now_ms = time.time() * 1000 if now_ms is None else now_ms
        return max(0.0, (now_ms - physical_ms(self.oldest_ts)) / 1000)


def pending_notifications(store: Store, tables: Iterable[str]) -> Pending:
    """Notify cells in the tables (values not transferred), and the oldest one's timestamp."""
    count, oldest = 0, None
    for table in tables:
        try:
            rows = store.scan(table, spec=ReadSpec(families=(NOTIFY,)), key_only=True, batch_size=1024)
            for row in rows:
                for cell in row:
                    count += 1
                    oldest = cell.ts if oldest is None else min(oldest, cell.ts)
        except TableNotFound:
            continue
    return Pending(count, oldest)


def wait_until_quiescent(
    cluster,
    tables: Iterable[str],
    *,
    timeout_s: float | None = None,
    poll_s: float = 0.2,
    progress: Callable[[Pending], None] | None = None,
) -> float:
    """Block until quiescent; returns the seconds waited. Raises NotQuiescent on timeout."""
    tables = list(tables)
    started = time.monotonic()
    while True:
        before = cluster.oracle.status()
        pending = pending_notifications(cluster.store, tables)
        after = cluster.oracle.status()
        if pending.count == 0 and before == after:
            return time.monotonic() - started
        if progress:
            progress(pending)
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            from caffeine.percolator.worker import list_failures

            failures = list_failures(cluster.store)
            detail = f"; {len(failures)} failing observer cells, e.g. {failures[0]}" if failures else ""
            raise NotQuiescent(
                f"not quiescent after {timeout_s:.0f}s: {pending.count} notifications pending{detail}"
            )
        time.sleep(poll_s)
