"""Garbage collection: drop versions no running or future transaction can read.

Layer: percolator internals (storage I/O). ``caffeine gc`` runs it.

The horizon is the oldest start_ts any live client still has open (from the owner registry's
heartbeats), and at most a fresh timestamp less a safety margin: every transaction that may
still read starts at or above it. For each cell, let K be the newest committed write record (PUT or
DELETE) at or below the horizon. Every read at or above the horizon resolves to K or to
something newer, so everything *older* than K is unreadable:

- write records (committed and rollback) below K's commit_ts are deleted;
- data versions below K's start_ts are deleted.

Kept on purpose: K itself (even a DELETE: it is what makes a late prewrite from below the
horizon conflict), every rollback record above K (it fences a transaction that a slow client
might still try to commit), and cells with a lock (their fate is not settled; the next reader
or GC run settles them first). Notify and ack cells belong to the observers and are kept.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable, Iterable

from caffeine.oracle.timestamps import compose, physical_ms
from caffeine.percolator.layout import LOCK, RESERVED_TABLES, WRITE, data_family
from caffeine.percolator.records import Write
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

    def summary(self) -> str:
        return (
            f"horizon {self.horizon_ts}: scanned {self.rows_scanned} rows in {len(self.tables)} tables; "
            f"collected {self.cells_collected} cells ({self.write_versions_deleted} old write records "
            f"and their data); skipped {self.locked_cells_skipped} locked cells"
        )


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


def collect_garbage(
    store: Store,
    horizon_ts: int,
    tables: Iterable[str] | None = None,
    *,
    dry_run: bool = False,
    progress: Callable[[str, int], None] | None = None,
) -> GcReport:
    report = GcReport(horizon_ts)
    names = sorted(tables) if tables is not None else [t for t in store.list_tables() if t not in RESERVED_TABLES]
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
    return horizon if oldest is None else min(oldest, horizon)


__all__ = ["GcReport", "collect_garbage", "gc_horizon", "plan_row"]
