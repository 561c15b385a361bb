"""A column's write history, read from the store newest first, one page at a time.

Layer: percolator. Internal (storage I/O; imports records, layout and storage). The pure
steps decide from one bounded row read: the newest write at or below a snapshot
(``steps.get_spec``), a few dozen versions at or above a start_ts
(``WRITE_VERSIONS_SCANNED``). When that read is not enough to decide (rollback records hide
the committed write beneath them: ``NeedOlderWrite``; more transactions committed to the
cell since a start_ts than the step read: ``Inconclusive``), the caller walks the history
here instead, reading only as deep as its answer lies.
"""

from __future__ import annotations

from typing import Iterator

from caffeine.percolator.layout import WRITE, qualifier
from caffeine.percolator.records import CellRef, Write
from caffeine.storage import ReadSpec, Store

# Write versions per read below a snapshot: a page of them is rollback records only when
# that many transactions were rolled back in a row, so one page nearly always suffices.
HISTORY_PAGE = 64
# Write versions per read above a start_ts (a transaction's own record): the cell is hot
# (its step's read was cut off), so fewer, larger reads.
OWN_RECORD_PAGE = 256


def write_history(
    store: Store, cell: CellRef, *, min_ts: int = 0, max_ts: int | None = None, page: int = HISTORY_PAGE
) -> Iterator[tuple[int, Write]]:
    """Every write record of ``cell`` with ``min_ts <= ts <= max_ts`` (``None``: no upper
    bound), as ``(ts, record)``, newest first, each exactly once.

    Records are yielded as stored, whatever their kind: PUT and DELETE at their commit_ts (a
    DELETE is a committed write like a PUT: its value is "none"), ROLLBACK records at the
    rolled-back transaction's start_ts. Which of them matters is the caller's choice.

    Lazy: each store read fetches up to ``page`` versions, below the oldest one already
    yielded; the next read happens only when the consumer asks past the last page, and a page
    shorter than ``page`` ends the history. A consumer that stops at its answer reads no
    further. Storage errors propagate from the read that met them."""
    q = qualifier(cell.column)
    upper = max_ts
    while True:
        spec = ReadSpec(columns=((WRITE, q),), min_ts=min_ts, max_ts=upper, versions=page)
        versions = store.read_row(cell.table, cell.row, spec).versions(WRITE, q)
        for version in versions:
            yield version.ts, Write.decode(version.value)
        if len(versions) < page:
            return
        upper = versions[-1].ts - 1


def newest_committed(store: Store, cell: CellRef, at_or_below: int) -> tuple[int, Write] | None:
    """``(commit_ts, record)`` of the newest PUT or DELETE at or below ``at_or_below``,
    skipping rollback records; None if the cell has none (never written, or collected)."""
    return next(((ts, w) for ts, w in write_history(store, cell, max_ts=at_or_below) if not w.is_rollback), None)


def own_record(store: Store, cell: CellRef, start_ts: int) -> tuple[int, Write] | None:
    """``(ts, record)`` of the record the transaction with ``start_ts`` left on ``cell``: its
    commit (at commit_ts) or its rollback record (at start_ts); None if it left neither.
    Read-only: for when a step's bounded read was ``Inconclusive``."""
    records = write_history(store, cell, min_ts=start_ts, page=OWN_RECORD_PAGE)
    return next(((ts, w) for ts, w in records if w.start_ts == start_ts), None)


def committed_at(store: Store, cell: CellRef, start_ts: int) -> int | None:
    """The commit_ts of the transaction with ``start_ts`` on ``cell``, or None if it has no
    commit record there (rolled back, or not committed here yet)."""
    found = own_record(store, cell, start_ts)
    return found[0] if found is not None and not found[1].is_rollback else None
