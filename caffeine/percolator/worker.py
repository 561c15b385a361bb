"""Workers: find notified cells and run their observers, each run in its own transaction.

Layer: percolator. Internal (``caffeine worker`` runs one; tests run them in-process).

- **Finding work** scans only the notify family of each observed table (HBase skips rows
  without notify cells) and runs what it lists oldest change first (by the notification's
  version, its writer's commit_ts): a page waits behind older work only, at every stage of a
  chain, instead of behind whatever rows follow the scan's starting point. A pass submits the
  oldest quarter of its listing (at least ``WAVES_PER_PASS`` waves' worth), then rescans, so
  a listing is never older than a quarter of the backlog's drain time (or a few waves) and
  each run costs at most ~4 listed cells of scanning. Busy workers rescan at once; idle ones
  back off (10 ms doubling to 200 ms, which bounds the added latency at low load). A table
  whose every observer settles is listed at most ``SETTLE_LISTINGS`` times per settle period:
  its listings walk every notification still settling.
- **Waves**: the notifications a pass takes are run a column at a time, up to ``threads``
  together, one wave at a time in the process (``_run_wave``). Runs of one observer started
  together make the same calls in the same order, and as members of the store's lockstep
  gang (``caffeine.storage.lockstep``) each round of their calls (first reads, prewrites,
  commits) goes as one multi-row call per kind and table: the paper's "delay and combine".
- **Splitting the table**: worker processes register and heartbeat in the ``workers`` table
  (``workers_table.py``: registrations, ``Membership``, and failure records).
  Each owns the rows whose CRC-32 falls in its slot among the live workers (its shard), and
  lists only those notifications (``Store.scan(shard=...)``: on HBase the coprocessor
  selects them where they are, so N workers do not each walk and ship every notification);
  when a worker stops heartbeating its slot is re-dealt after the grace period. During a change of
  membership two workers may briefly run the same cell: harmless, since the ack makes at most
  one of them commit (strong) and weak observers are idempotent.
- **One row, one run at a time**: a worker does not start an observer run on a row while
  another of its runs on that row is in flight (two observers of a row changed by one
  transaction would race on the row's cells, and one would lose and retry); the notification
  waits for the next pass. Rows are dealt to workers whole, so this holds across workers too,
  outside a change of membership.
- **Settling**: an observer's ``settle_s`` holds its notifications that long (from the
  change's commit, or from when this worker first saw the notification, whichever is earlier)
  so that a burst of changes to a hot row is handled by one run.
- **One notification, one task**: a notify cell names the writer's primary and start_ts,
  and its version is the writer's commit_ts, written before the writer's commit point. A
  strong observer runs only if the column's newest visible committed write is newer than its
  ack; it then writes the ack (that change's commit_ts) in the same transaction. The notify
  cell is deleted (versions up to the one seen, so a newer one survives) only after the runs
  committed, their ``on_commit`` work included, and only if the change behind it was visible
  to them; otherwise the next pass retries it. Deleting every version up to the one seen
  is safe because versions are commit timestamps: a run whose snapshot is above a version
  sees every change announced at or below it, or meets that change's lock and waits for it. The deletion goes with the run's commit when
  it can, else in a batch (``clearer``: one round trip per table for many cells). A
  notification found while the observer's ack already covers the column's newest change
  makes the worker call the observer's ``redo`` (its post-commit work again) rather than run
  a second transaction for the change, whatever the notification's version (a backfill's is
  newer than the change; so is a rolled-back writer's).
- **Failures**: an observer that raises is rolled back, retried with exponential backoff
  (never dropped, never blocking other cells), and recorded in the ``workers`` table with its
  row, column, error and attempts until it succeeds (``caffeine status`` lists them).
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, wait as wait_futures
from dataclasses import dataclass, field

from caffeine.oracle.timestamps import physical_ms
from caffeine.percolator.clearer import NotificationClearer
from caffeine.percolator.errors import CommitConflict, LockWaitTimeout
from caffeine.percolator.layout import NOTIFY, column_name, qualifier
from caffeine.percolator.observer import Application, Observer
from caffeine.percolator.records import Committed, RolledBack, ack_covers, decode_notify, encode_ack, encode_inline_ack
from caffeine.percolator.workers_table import Membership, clear_failure, ensure_workers_table, record_failure
from caffeine.storage import DeleteUpTo, ReadSpec, Store, in_shard

log = logging.getLogger(__name__)

IDLE_MIN_S, IDLE_MAX_S = 0.01, 0.2
READ_AHEAD_MAX = 16
# A pass takes at least this many waves' worth of its listing. Each listing walks every
# notification and delete marker the notify family holds (a few thousand at most once the
# coprocessor compacts it on its own: FamilySpec.churn), so listing again after every wave
# cost a third of HBase's CPU under a paced crawl.
WAVES_PER_PASS = 4
# A table whose every observer settles (``Observer.settle_s``) is listed at most this many
# times per settle period (its observers' shortest). Each listing walks every notification
# still settling, and under a steady crawl some become due all the time: listing again as
# soon as a pass found work walked each settling notification dozens of times before it ran.
# The cost: a notification may wait up to settle_s / SETTLE_LISTINGS beyond its settle time.
SETTLE_LISTINGS = 10
# How long a scan thread waits for a wave of runs before it goes on (a run held up by a lock
# or a slow call keeps its thread; the next wave does not wait for it longer than this).
WAVE_WAIT_S = 2.0


class _RowCycle(Exception):
    """An inline run wrote a column whose inline observers had already run in the same
    transaction: the run is redone without inline runs."""


@dataclass
class Metrics:
    """Counters of one worker process (published with its heartbeat)."""

    runs: int = 0
    inline: int = 0           # runs inside another run's transaction (Observer.inline; not in runs)
    commits: int = 0
    conflicts: int = 0
    retries: int = 0
    failures: int = 0
    stale: int = 0
    redos: int = 0
    cleared: int = 0
    passes: int = 0           # notify listings (scan passes), every table
    listed: int = 0           # notify cells those listings walked, settling ones included
    listed_settling: int = 0  # of which still settling (not yet due)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Called with (observer name, outcome, seconds) after each observer run's transaction:
    # how exporters (caffeine.metrics) time runs without the worker knowing them.
    _run_listeners: list = field(default_factory=list, repr=False)

    def bump(self, name: str, n: int = 1) -> None:
        self.bump_many(**{name: n})

    def bump_many(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def on_run(self, listener) -> None:
        """Call ``listener(observer, outcome, seconds)`` after every observer run; outcome is
        "done" (committed, or nothing to do), "conflict" (retried) or "failed" (it raised)."""
        self._run_listeners.append(listener)

    def run_ended(self, observer: str, outcome: str, seconds: float) -> None:
        for listener in self._run_listeners:
            listener(observer, outcome, seconds)

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class Worker:
    """Runs an application's observers on a thread pool until stopped."""

    def __init__(
        self, cluster, app: Application, *, threads: int = 4, worker_id: str | None = None,
        clearer: NotificationClearer | None = None,
    ) -> None:
        """``clearer``: what deletes handled notifications (default: a batching
        ``NotificationClearer``); a deterministic caller passes one that deletes at once."""
        self.cluster = cluster
        self.app = app
        self.store: Store = cluster.store
        self.threads = threads
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}-{os.urandom(3).hex()}"
        self.metrics = Metrics()
        self._stop = threading.Event()
        self._slots = threading.Semaphore(threads * 2)
        self._in_flight: set[tuple[str, bytes, str]] = set()
        # (table, row) -> runs in flight on it (one at a time when found by a scan pass)
        self._rows_busy: dict[tuple[str, bytes], int] = {}
        # table -> {(table, row, column): monotonic time this worker first saw it pending},
        # for the observers with a settle time; dropped once submitted or no longer listed.
        # Per table: each is only touched by its table's scan thread.
        self._first_seen: dict[str, dict[tuple[str, bytes, str], float]] = {
            table: {} for table in app.observed_tables}
        self._in_flight_lock = threading.Lock()
        self._wave_lock = threading.Lock()  # one wave of runs at a time (``_run_wave``)
        # (table, row, column) -> (notify_ts handled and cleared, monotonic time then): a scan
        # pass that began before the clear may still list that version; it is not work. An
        # entry is dropped once a pass of its table that began after it has ended.
        self._handled: dict[tuple[str, bytes, str], tuple[int, float]] = {}
        # (table, row, column) -> (attempts, monotonic time before which not to retry)
        self._backoff: dict[tuple[str, bytes, str], tuple[int, float]] = {}
        # observer name -> columns of the notified row its runs read beyond their declared
        # ``reads`` (learned from past runs): fetched with each run's first read (read-ahead).
        self._read_ahead: dict[str, tuple[str, ...]] = {}
        # The tables with inline observers: a run elsewhere skips the inline pass (no copy of
        # its writes, no lookup per written column).
        self._inline_tables = {o.table for o in app.observers if o.inline}
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="caffeine-observer")
        self._clearer = clearer if clearer is not None else NotificationClearer(self.store)
        self._threads: list[threading.Thread] = []
        app.install(cluster)
        ensure_workers_table(self.store)
        self.membership = Membership(
            self.store, self.worker_id, grace_ms=cluster.settings.owner_grace_ms, describe=self._describe
        )

    def _describe(self) -> dict:
        return {
            "worker": self.worker_id, "pid": os.getpid(), "host": socket.gethostname(),
            "app": self.app.name, "threads": self.threads, "metrics": self.metrics.as_dict(),
            "storage": self.cluster.stats.as_dict(),
        }

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "Worker":
        self.membership.beat()
        beat = threading.Thread(target=self._heartbeat_loop, name="caffeine-worker-beat", daemon=True)
        self._threads.append(beat)
        for table in self.app.observed_tables:
            scan = threading.Thread(target=self._scan_loop, args=(table,), name=f"caffeine-scan-{table}", daemon=True)
            self._threads.append(scan)
        for thread in self._threads:
            thread.start()
        log.info("worker %s started: %d threads, tables %s", self.worker_id, self.threads, self.app.observed_tables)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=10)
        self._pool.shutdown(wait=True)
        self._clearer.close()
        try:
            self.membership.beat(alive=False)  # our slot is re-dealt at once
        except Exception as exc:
            log.warning("could not deregister worker %s: %s", self.worker_id, exc)

    def __enter__(self) -> "Worker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _heartbeat_loop(self) -> None:
        interval = self.cluster.settings.heartbeat_interval_ms / 1000
        while not self._stop.wait(interval):
            try:
                self.membership.beat()
            except Exception as exc:
                log.warning("worker heartbeat failed: %s", exc)

    # -- finding work ------------------------------------------------------------------------
    def _scan_loop(self, table: str) -> None:
        idle = IDLE_MIN_S
        spacing = self._listing_spacing(table)
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                found = self._scan_pass(table)
            except Exception as exc:
                log.warning("notification scan of %s failed: %s", table, exc)
                found = 0
            # Busy: list again at once; idle: back off. Never sooner than ``spacing`` after
            # this listing began.
            pause = 0.0 if found else idle
            idle = IDLE_MIN_S if found else min(idle * 2, IDLE_MAX_S)
            pause = max(pause, began + spacing - time.monotonic())
            if pause > 0:
                self._stop.wait(pause)

    def _listing_spacing(self, table: str) -> float:
        """The least time between two listings of ``table``: its observers' shortest settle
        time / ``SETTLE_LISTINGS`` when every one of them settles, else 0."""
        settles = [o.settle_s for o in self.app.observers if o.table == table]
        return min(settles) / SETTLE_LISTINGS if settles and min(settles) > 0 else 0.0

    def _scan_pass(self, table: str) -> int:
        """One pass: list the table's notify cells this worker owns, then submit the oldest
        (at least ``threads``, at most a quarter of the listing); returns the number of tasks
        submitted."""
        began = time.monotonic()
        listed: list[tuple[int, bytes, str, object, list[Observer]]] = []
        settling: set[tuple[str, bytes, str]] = set()
        # The store lists only this worker's shard where it can; a store may return every
        # row, so the pass checks the same shard itself (a membership change meanwhile shows
        # at the next pass; two workers running one cell briefly is harmless, see above).
        shard = self.membership.shard()
        for row in self.store.scan(table, b"", None, ReadSpec(families=(NOTIFY,)), batch_size=512, shard=shard):
            if self._stop.is_set():
                return 0
            if shard is not None and not in_shard(row.key, shard):
                continue
            for q, versions in row.family(NOTIFY).items():
                column = column_name(q)
                observers = self.app.observers_of(table, column)
                if not observers:
                    continue
                settle_s = max(o.settle_s for o in observers)
                if settle_s and not self._settled((table, row.key, column), versions[0].ts, settle_s):
                    settling.add((table, row.key, column))
                    continue
                listed.append((versions[0].ts, row.key, column, versions[0], observers))
        self.metrics.bump_many(passes=1, listed=len(listed) + len(settling), listed_settling=len(settling))
        listed.sort(key=lambda item: item[0])
        quota = max(WAVES_PER_PASS * self.threads, len(listed) // 4)
        submitted = 0
        waves: dict[str, list] = {}  # column -> claimed notifications, oldest first
        for _, key, column, cell, observers in listed:
            if self._stop.is_set() or submitted >= quota:
                break
            if self._claim(table, key, column, cell):
                submitted += 1
                wave = waves.setdefault(column, [])
                wave.append((key, column, cell, observers))
                if len(wave) >= self.threads:
                    self._run_wave(table, waves.pop(column))
        for wave in waves.values():
            self._run_wave(table, wave)
        self._forget_handled(table, began)
        first_seen = self._first_seen[table]
        for key in [k for k in first_seen if k not in settling]:
            del first_seen[key]
        return submitted

    def _settled(self, key, notify_ts: int, settle_s: float) -> bool:
        """Whether a notification has waited its observers' settle time: since the commit of
        the change it announces (the version's physical time, wall-clock ms), or since this
        worker first saw it pending, whichever is longer (a row changed without pause)."""
        now = time.monotonic()
        first = self._first_seen[key[0]].setdefault(key, now)
        return now - first >= settle_s or time.time() - physical_ms(notify_ts) / 1000 >= settle_s

    def _claim(self, table: str, row: bytes, column: str, cell) -> bool:
        """Take a listed notification for a run (in flight from now on), unless it was handled
        already, is backing off, or its row has a run in flight."""
        key = (table, row, column)
        backoff = self._backoff.get(key)
        with self._in_flight_lock:
            handled = self._handled.get(key)
        if handled is not None and cell.ts <= handled[0]:
            return False  # listed before its clear landed: handled already
        if backoff and backoff[1] > time.monotonic():
            return False
        with self._in_flight_lock:
            if key in self._in_flight or (table, row) in self._rows_busy:
                return False
            self._in_flight.add(key)
            self._rows_busy[(table, row)] = 1
        self._first_seen[table].pop(key, None)
        return True

    def _run_wave(self, table: str, wave: list) -> None:
        """Run claimed notifications of one column together, one thread each, and wait for
        them (at most ``WAVE_WAIT_S``; a straggler finishes on its own). Runs of one observer
        started together make the same calls in the same order, so with the store's lockstep
        each round of their calls goes as one multi-row call per kind and table; waves run
        one at a time in a process for the same reason."""
        with self._wave_lock:
            for _ in wave:
                self._slots.acquire()  # bounded: a busy worker's scanner waits here, not in sleep
            self.store.lockstep.enlist(len(wave))  # members from now: their first calls are awaited
            futures = []
            try:
                for key, column, cell, observers in wave:
                    futures.append(self._pool.submit(self._task, (table, key, column), cell.ts, cell.value,
                                                     observers, enlisted=True))
            finally:
                # (the pool refuses tasks once stopping: those members never start)
                self.store.lockstep.discharge(len(wave) - len(futures))
            wait_futures(futures, timeout=WAVE_WAIT_S)

    # -- running observers -------------------------------------------------------------------
    def handle(self, table: str, row: bytes, column: str, cell, observers: list[Observer]) -> None:
        """Handle one notify ``cell`` now, in the calling thread: exactly the task a scan pass
        submits to the pool (run the observers, then clear the notification or back off).
        For deterministic callers (the fault simulation), which also pass a ``clearer`` that
        deletes at once; errors are handled as in the pool, not raised."""
        key = (table, row, column)
        with self._in_flight_lock:
            self._in_flight.add(key)
            self._rows_busy[(table, row)] = self._rows_busy.get((table, row), 0) + 1
        self._slots.acquire()
        self._task(key, cell.ts, cell.value, observers)

    def _task(self, key, notify_ts: int, notify_value: bytes, observers: list[Observer], *,
              enlisted: bool = False) -> None:
        # A member of the store's gang: the runs of this process's threads send their calls
        # of a round together (caffeine.storage.lockstep).
        with self.store.lockstep.member(enlisted=enlisted):
            self._run_task(key, notify_ts, notify_value, observers)

    def _run_task(self, key, notify_ts: int, notify_value: bytes, observers: list[Observer]) -> None:
        table, row, column = key
        clearing = False  # the clearer then ends the cell's time in flight
        try:
            # Only a lone observer may clear the notification with its own commit; with
            # several, one run's success is not the others'.
            may_clear = len(observers) == 1
            # Inline runs on a first attempt only: a retry after a conflict or a failure runs
            # the observers one transaction each, so one that keeps failing holds up only itself.
            inline = table in self._inline_tables and key not in self._backoff
            covered, cleared, kept = True, False, []
            for observer in observers:
                ok, cleared, kept_now = self._timed_run(observer, table, row, column, notify_ts, notify_value,
                                                        may_clear=may_clear, inline=inline)
                covered &= ok
                kept += kept_now
            for kept_column, commit_ts in kept:
                self._clear_kept(table, row, kept_column, commit_ts)
            if covered and cleared:
                self.metrics.bump("cleared")
                self._remember_handled(key, notify_ts)
            elif covered:
                self._clearer.clear(table, row, DeleteUpTo(NOTIFY, qualifier(column), notify_ts),
                                    lambda ok: self._cleared(key, ok, notify_ts))
                clearing = True
            if key in self._backoff:
                self._clear_failure(key)
        except (CommitConflict, LockWaitTimeout) as exc:
            self.metrics.bump("conflicts")
            self.metrics.bump("retries")
            log.debug("observer run on %s lost a conflict: %s", key, exc)
            self._backoff[key] = (0, time.monotonic() + random.uniform(0.005, 0.05))
        except Exception as exc:
            self.metrics.bump("failures")
            self.metrics.bump("retries")
            self._record_failure(key, observers, exc)
        finally:
            if not clearing:
                self._done_with(key)
            self._slots.release()

    def _clear_kept(self, table: str, row: bytes, column: str, commit_ts: int) -> None:
        """Delete the notification an inline run with work after the commit left on its
        column (``_run_inline``), now that the work is done; in flight until then."""
        key = (table, row, column)
        with self._in_flight_lock:
            self._in_flight.add(key)
            self._rows_busy[(table, row)] = self._rows_busy.get((table, row), 0) + 1
        self._clearer.clear(table, row, DeleteUpTo(NOTIFY, qualifier(column), commit_ts),
                            lambda ok: self._cleared(key, ok, commit_ts))

    def _cleared(self, key, ok: bool, notify_ts: int) -> None:
        if ok:
            self.metrics.bump("cleared")
            self._remember_handled(key, notify_ts)
        self._done_with(key)

    def _remember_handled(self, key, notify_ts: int) -> None:
        with self._in_flight_lock:
            old = self._handled.get(key)
            if old is None or notify_ts > old[0]:
                self._handled[key] = (notify_ts, time.monotonic())

    def _forget_handled(self, table: str, pass_began: float) -> None:
        """Entries of ``table`` recorded before a pass that has now ended: any later pass
        reads the table after their clears landed, so it cannot list those versions."""
        with self._in_flight_lock:
            for key in [k for k, (_, at) in self._handled.items() if k[0] == table and at < pass_began]:
                del self._handled[key]

    def _done_with(self, key) -> None:
        with self._in_flight_lock:
            self._in_flight.discard(key)
            busy = key[:2]
            if self._rows_busy.get(busy, 0) > 1:
                self._rows_busy[busy] -= 1
            else:
                self._rows_busy.pop(busy, None)

    def _timed_run(self, observer: Observer, *args, **kwargs) -> tuple[bool, bool, list[tuple[str, int]]]:
        """``_run``, its wall time and how it ended reported to ``metrics.run_ended``."""
        started, outcome = time.monotonic(), "failed"
        try:
            result = self._run(observer, *args, **kwargs)
            outcome = "done"
            return result
        except (CommitConflict, LockWaitTimeout):
            outcome = "conflict"
            raise
        finally:
            self.metrics.run_ended(observer.name, outcome, time.monotonic() - started)

    def _run(self, observer: Observer, table: str, row: bytes, column: str, notify_ts: int,
             notify_value: bytes, *, may_clear: bool, inline: bool = False) -> tuple[bool, bool, list[tuple[str, int]]]:
        """One observer run in its own transaction, followed there by the inline runs its
        writes make due when ``inline`` (``_run_inline``). Returns (covered, cleared, kept):
        whether the change behind the notification was visible to it (so the notification
        may go), whether the run's commit already deleted it, and the (column, commit_ts) of
        the notifications inline runs left for the worker to delete."""
        txn = self.cluster._begin_observer_run()
        kept: list[str] = []
        try:
            if observer.notification == "strong":
                reads = [observer.ack_column, *observer.reads, *self._read_ahead.get(observer.name, ())]
                change, values = txn.change_and_values(table, row, column, reads)
                ack = values[observer.ack_column]
                # The notification is at its writer's commit_ts (before format 2: at its
                # start_ts, which this also covers): a newest change at or above it is the
                # writer's own, or one the writer can no longer commit after.
                covered = change is not None and change[0] >= notify_ts
                if change is not None and not ack_covers(ack, change):
                    self.metrics.bump("runs")
                    # The ack first: it becomes the primary, in the observed row, so the
                    # commit point can also delete the notification (one write, not two).
                    txn.set(table, row, observer.ack_column, encode_ack(change[0]))
                    observer.run(txn, row, column)
                    if txn.writes_only(table, row, observer.ack_column):
                        # Nothing to do for this change: the ack alone would cost a prewrite
                        # and a commit, to spare a later notification of the same change a
                        # run that would find nothing to do either. Commit nothing.
                        txn.rollback()
                    else:
                        kept = self._run_inline(txn, table, row, observer) if inline else []
                        # Not with work left for after the commit: until that is done, the
                        # notification is what makes a failed run's work get redone (an
                        # inline run's work, its failure recorded under this notification).
                        if covered and may_clear and not txn.has_post_commit_work:
                            txn.clear_notification_at_commit(table, row, column, notify_ts)
                        self._commit(txn)
                elif change is not None and observer.redo is not None:
                    # Acked, yet notified: the run for this change committed, but its work
                    # after the commit may not have been done. Redo that work, committing
                    # nothing (at most one transaction commits per change). Whatever the
                    # notification's version: a backfill's is newer than the change it
                    # re-ran for, and so is a rolled-back writer's that replaced the one
                    # left by a run whose work after the commit failed.
                    self.metrics.bump("redos")
                    txn.read_only = True
                    observer.redo(txn, row, column)
                    txn.commit()
                else:
                    self.metrics.bump("stale")
                    txn.rollback()
                if covered:
                    return True, txn.notification_cleared, [(c, txn.commit_ts) for c in kept]
            else:
                self.metrics.bump("runs")
                observer.run(txn, row, column)
                kept = self._run_inline(txn, table, row, observer) if inline else []
                self._commit(txn)
            return self._visible(notify_ts, notify_value, txn.start_ts), False, [(c, txn.commit_ts) for c in kept]
        except _RowCycle:
            # Not fusable: run the observers of this change one transaction each.
            txn.rollback()
            return self._run(observer, table, row, column, notify_ts, notify_value, may_clear=may_clear)
        except BaseException:
            if txn.state.value in ("active", "prewritten"):
                txn.rollback()
            raise
        finally:
            self._learn_reads(observer, txn.fetched_later(table, row))

    def _run_inline(self, txn, table: str, row: bytes, first: Observer) -> list[str]:
        """Run in ``txn`` every inline observer (``Observer.inline``) of the columns of
        ``(table, row)`` it wrote, and of those their runs write, each once, in the order the
        columns were first written; each acks the change with ``encode_inline_ack``. Returns
        the columns whose inline observers left work for after the commit: their
        notifications stay until the worker deletes them once that work is done (``redo``
        covers a crash meanwhile). Every other column whose observers all ran here is
        committed without its notification. Raises ``_RowCycle`` when a column is written
        again after its observers ran: they did not see the value that commits."""
        ran: set[str] = set()
        ran_on: dict[str, bytes | None] = {}  # column -> the value its inline observers ran on
        keep: set[str] = set()
        while True:
            written = txn.written_columns(table, row)
            due = [(c, o) for c in written for o in self.app.observers_of(table, c)
                   if o.inline and o.name != first.name and o.name not in ran]
            if not due:
                break
            for c, o in due:
                ran.add(o.name)
                # The value it runs on (an earlier run of this round may have changed it).
                ran_on.setdefault(c, txn.written_columns(table, row)[c])
                work_before = txn.post_commit_work
                txn.set(table, row, o.ack_column, encode_inline_ack(txn.start_ts))
                try:
                    o.run(txn, row, c)
                except Exception as exc:
                    exc.add_note(f"(in observer {o.name}'s inline run, after {first.name}'s)")
                    raise
                self.metrics.bump("inline")
                if txn.post_commit_work > work_before:
                    keep.add(c)
        written = txn.written_columns(table, row)
        if any(written[c] != value for c, value in ran_on.items()):
            raise _RowCycle()
        for c in ran_on:
            if c not in keep and all(o.name in ran for o in self.app.observers_of(table, c)):
                txn.skip_notification(table, row, c)
        return sorted(keep)

    def _learn_reads(self, observer: Observer, columns: set[str]) -> None:
        """Remember the notified row's columns a run read on its own (read-ahead), at most
        ``READ_AHEAD_MAX`` per observer."""
        known = self._read_ahead.get(observer.name, ())
        new = sorted(columns - set(known) - set(observer.reads))
        if new:
            self._read_ahead[observer.name] = (*known, *new)[:READ_AHEAD_MAX]

    def _commit(self, txn) -> None:
        """``txn.commit()``, counted as a commit once past the commit point, also when its
        post-commit work then fails."""
        try:
            txn.commit()
        finally:
            if txn.commit_ts is not None:
                self.metrics.bump("commits")

    def _visible(self, notify_ts: int, notify_value: bytes, snapshot_ts: int) -> bool:
        """Whether the change that set the notification is settled and visible at snapshot_ts
        (rolled back counts: there is nothing more to see)."""
        writer = decode_notify(notify_value, notify_ts)
        if writer is None:
            return notify_ts < snapshot_ts
        if writer[1] < self.cluster.owners.safe_point() <= snapshot_ts:
            # GC settled every transaction below its safe point before publishing it, and may
            # have collected this one's records since: asking its primary would find nothing
            # and fence it off as if it never committed.
            return True
        status = self.cluster.resolver.status_of(*writer)
        if isinstance(status, Committed):
            return status.commit_ts <= snapshot_ts
        return isinstance(status, RolledBack)

    # -- failures ----------------------------------------------------------------------------
    def _record_failure(self, key, observers: list[Observer], exc: BaseException) -> None:
        table, row, column = key
        attempts = self._backoff.get(key, (0, 0.0))[0] + 1
        delay = min(60.0, 0.25 * 2 ** (attempts - 1)) * random.uniform(0.8, 1.2)
        self._backoff[key] = (attempts, time.monotonic() + delay)
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        log.warning("observer %s failed on %s/%r/%s (attempt %d, retry in %.1fs): %s",
                    ",".join(o.name for o in observers), table, row, column, attempts, delay, error)
        record = {
            "table": table, "row": row.decode("utf-8", "replace"), "column": column,
            "observers": [o.name for o in observers], "error": error[:2000], "attempts": attempts,
            "updated_ms": int(time.time() * 1000), "worker": self.worker_id,
        }
        try:
            record_failure(self.store, table, row, column, record)
        except Exception as store_exc:
            log.warning("could not record failure of %s: %s", key, store_exc)

    def _clear_failure(self, key) -> None:
        attempts, _ = self._backoff.pop(key)
        if attempts:
            clear_failure(self.store, *key)


__all__ = ["Worker", "Metrics"]
