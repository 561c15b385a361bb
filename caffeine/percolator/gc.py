"""Garbage collection: drop versions no running or future transaction can read.

Layer: percolator. Internal (storage I/O). ``caffeine gc`` runs it.

The horizon is the oldest start_ts any live client still has open (from the owner registry's
heartbeats), and at most a fresh timestamp less a safety margin: every transaction that may
still read starts at or above it. For each cell, let K be the newest committed write record (PUT or
DELETE) at or below the horizon. Every read at or above the horizon resolves to K or to
something newer, so everything *older* than K is unreadable:

- write records (committed and rollback) below K's commit_ts are deleted;
- data versions below K's start_ts are deleted.

Kept on purpose: K itself (even a DELETE: it is what makes a late prewrite from below the
horizon conflict), every rollback record above K (it fences a transaction that a slow client
might still try to commit), and cells with a lock (their fate is not settled). Notify and
ack cells belong to the observers and are kept.

A run has three phases, in this order (as TiKV's GC: resolve locks, then the safe point,
then delete):

1. **Resolve every lock at or below the horizon, in every Percolator table**, through its
   primary (roll forward if the primary committed, back if not), whichever tables the run
   collects. Without this, a committed transaction whose committer died after the commit
   point (primary committed, a secondary still locked) is split by the deletes: once a later
   write to the primary's cell makes its commit record "older than K", the record goes, and
   the secondary's lock outlives every trace of the commit. A transaction's cells may be in
   any tables, and the safe point is the deployment's: a run limited to some tables
   (``tables``, ``caffeine gc --table``) limits only what it deletes, never what it settles.
2. **Publish the horizon as the safe point** (``OwnerRegistry.advance_safe_point``), then
   wait until every process's copy of it is fresh: from then on a transaction with a
   start_ts below it fails with ``SnapshotTooOld`` on its next read or commit instead of
   reading versions about to be deleted (or missing a conflict whose record was deleted).
   This covers a process paused past its owner grace, which has dropped out of the
   horizon while it still holds an old snapshot.
3. **Delete** what no reader at or above the horizon can see.

Locks written after phase 1 with a start_ts at or below the horizon can only come from a
transaction that was open when the horizon was computed, which the horizon excludes, or from
a process that was paused past its grace between its safe-point check and its prewrite
(longer than phase 2's wait): the one residual window, shared with every design that checks
the safe point at the client rather than in the storage server. Such a transaction cannot
commit (its commit checks the safe point again), so whoever meets its lock once its primary
is gone rolls it back (``LockResolver.resolve``, docs/FAULTS.md).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from caffeine.errors import CaffeineError
from caffeine.oracle.timestamps import compose, physical_ms
from caffeine.percolator.layout import LOCK, RESERVED_TABLES, WRITE, column_name, data_family, is_percolator_table
from caffeine.percolator.records import CellRef, Lock, Locked, Write
from caffeine.storage import DeleteUpTo, ReadSpec, Store

log = logging.getLogger(__name__)

# Write versions read per cell in one scan; a cell with more is collected in several runs.
VERSIONS_PER_PASS = 10_000


@dataclass
class GcReport:
    horizon_ts: int
    tables: list[str] = field(default_factory=list)
    rows_scanned: int = 0
    cells_collected: int = 0
    write_versions_deleted: int = 0
    locked_cells_skipped: int = 0
    locks_resolved: int = 0
    # Every Percolator table under the prefix: phase 1 settles old locks in all of them.
    resolved_tables: list[str] = field(default_factory=list)
    # Tables under the prefix that are not Percolator tables (serving tables, the batch
    # job's): GC has nothing to collect there and leaves them alone.
    skipped: list[str] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"horizon {self.horizon_ts}: resolved {self.locks_resolved} locks at or below it "
            f"in {len(self.resolved_tables)} tables; "
            f"scanned {self.rows_scanned} rows in {len(self.tables)} tables; "
            f"collected {self.cells_collected} cells ({self.write_versions_deleted} old write records "
            f"and their data); skipped {self.locked_cells_skipped} locked cells"
        )
        if self.skipped:
            text += (f"; skipped {len(self.skipped)} table{'s' if len(self.skipped) != 1 else ''} "
                     f"that are not Percolator tables: {', '.join(self.skipped)}")
        return text


def plan_row(row, horizon_ts: int) -> tuple[list, int, int]:
    """The deletes for one row (pure). Returns (mutations, write versions deleted, locked cells)."""
    mutations = []
    deleted = 0
    locked = 0
    for q, versions in row.family(WRITE).items():
        if row.latest(LOCK, q) is not None:
            locked += 1
            continue
        keep = None
        for cell in versions:  # newest first
            if cell.ts > horizon_ts:
                continue
            write = Write.decode(cell.value)
            if not write.is_rollback:
                keep = (cell.ts, write)
                break
        if keep is None:
            continue
        commit_ts, write = keep
        older = [c for c in versions if c.ts < commit_ts]
        if not older:
            continue
        mutations.append(DeleteUpTo(WRITE, q, commit_ts - 1))
        mutations.append(DeleteUpTo(data_family(q), q, write.start_ts - 1))
        deleted += len(older)
    return mutations, deleted, locked


class GcBlocked(CaffeineError):
    """A live transaction holds a lock at or below the horizon; GC deleted nothing."""


def resolve_old_locks(cluster, table: str, horizon_ts: int, report: GcReport, *, dry_run: bool = False) -> None:
    """Phase 1 on one table: settle every lock with a start_ts at or below the horizon."""
    spec = ReadSpec(families=(LOCK,), max_ts=horizon_ts)
    for row in cluster.store.scan(table, spec=spec, batch_size=256):
        for q, versions in row.family(LOCK).items():
            lock = Lock.decode(versions[0].ts, versions[0].value)
            report.locks_resolved += 1
            if dry_run:
                continue
            cell = CellRef(table, row.key, column_name(q))
            deadline = time.monotonic() + cluster.settings.lock_wait_timeout_s
            while isinstance(cluster.resolver.resolve(cell, lock), Locked):
                # Only a live owner's unexpired lock: the horizon excludes open transactions,
                # so this is a rare straggler; its TTL or its commit ends it.
                if time.monotonic() > deadline:
                    raise GcBlocked(
                        f"{cell}: a live transaction ({lock.start_ts}) still holds a lock at or below "
                        f"the horizon {horizon_ts}; nothing was deleted, run gc again later"
                    )
                time.sleep(0.1)


def collect_garbage(
    cluster,
    horizon_ts: int,
    tables: Iterable[str] | None = None,
    *,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
    publish_wait_s: float | None = None,
) -> GcReport:
    """Resolve old locks, publish the safe point, then delete (see the module docstring).

    ``publish_wait_s``: how long to wait between publishing the safe point and deleting
    (default: longer than a process keeps its copy of it). ``tables``: the tables to collect,
    default every table under the prefix; either way only Percolator tables are collected,
    the others are named in ``GcReport.skipped``. Old locks are settled in every Percolator
    table whatever ``tables`` says (``GcReport.resolved_tables``)."""
    store: Store = cluster.store
    report = GcReport(horizon_ts)
    every = [t for t in store.list_tables() if t not in RESERVED_TABLES]
    percolator = {t for t in every if is_percolator_table(store, t)}
    names = []
    for table in (sorted(tables) if tables is not None else every):
        if table not in every and is_percolator_table(store, table):  # created since the listing
            percolator.add(table)
        (names if table in percolator else report.skipped).append(table)
    report.resolved_tables = sorted(percolator)
    for table in report.resolved_tables:
        resolve_old_locks(cluster, table, horizon_ts, report, dry_run=dry_run)
    if dry_run:
        log.info("gc (dry run): %d locks at or below the horizon would be resolved first", report.locks_resolved)
    else:
        cluster.owners.advance_safe_point(horizon_ts)
        if publish_wait_s is None:
            publish_wait_s = cluster.owners.safe_point_max_age_ms / 1000 + 1.0
        time.sleep(publish_wait_s)
    spec = ReadSpec(families=(WRITE, LOCK), versions=VERSIONS_PER_PASS)
    for table in names:
        report.tables.append(table)
        for row in store.scan(table, spec=spec, batch_size=128):
            report.rows_scanned += 1
            mutations, deleted, locked = plan_row(row, horizon_ts)
            report.locked_cells_skipped += locked
            if mutations:
                report.cells_collected += len(mutations) // 2
                report.write_versions_deleted += deleted
                if not dry_run:
                    store.mutate_row(table, row.key, mutations)
            if progress and report.rows_scanned % 1000 == 0:
                progress(table, report.rows_scanned)
    log.info("gc: %s", report.summary())
    return report


def gc_horizon(cluster, *, margin_ms: int | None = None) -> int:
    """The oldest start_ts a live client has open, and never newer than ``margin_ms`` ago.

    The margin covers transactions that began after their process's last heartbeat (which
    is what carries "oldest open start_ts" to the registry): default five heartbeat
    intervals, at least 10 s.
    """
    if margin_ms is None:
        margin_ms = max(10_000, 5 * cluster.settings.heartbeat_interval_ms)
    fresh = cluster.oracle.get_timestamp()
    horizon = compose(max(0, physical_ms(fresh) - margin_ms))
    oldest = cluster.owners.oldest_open_start_ts()
    # Strictly below the oldest open transaction: its locks are never "at or below".
    return horizon if oldest is None else min(oldest - 1, horizon)


__all__ = ["GcBlocked", "GcReport", "collect_garbage", "gc_horizon", "plan_row", "resolve_old_locks"]
