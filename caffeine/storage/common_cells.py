"""The cells several rows have in common (``Store.read_common``): the answer's shape, the
requests no store answers, and the intersection a store computes itself.

Layer: storage. Imports the standard library only; no I/O. The coprocessor computes the same answer
inside HBase (coprocessor/.../RowsCommon.java; ``summaries.common_request``).

Why: an AND of posting lists (a serving table's term rows, a cell per document) needs only
the documents every list has; where the rows are stored that costs a pass over the shortest,
while sending them costs the whole lists.

How, on HBase with the coprocessor: the first row's region server reads that row whole, then
each next row only at the qualifiers still common (a seek each), or walks it whole when the
caller's size for it says that costs less; rows of other regions are read where they are, or
through the region server's connection. The rows may be read a few milliseconds apart. Only
the common cells cross the network, packed in one cell. Without the coprocessor, with one
older than the request, or while the region server is busy gathering rows from other
servers, the rows are read whole and intersected here (``intersect``), or not at all when
the caller asks the server only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from caffeine.storage.row_prefix import MAX_PREFIX

__all__ = ["MAX_COMMON_ROWS", "CommonCells", "check_common_request", "intersect"]

# The most rows one ``Store.read_common`` intersects (the coprocessor's RowsCommon refuses more).
MAX_COMMON_ROWS = 16


@dataclass(frozen=True)
class CommonCells:
    """The cells several rows have in common (``Store.read_common``): per row, its cells
    ``{qualifier: value}`` of the first qualifiers (in qualifier order) whose newest value is
    non-empty in every row, the same qualifiers in each; ``count``: how many qualifiers are
    such in all (``>=`` the qualifiers given; equal when they are all there).
    ``server_side``: whether the server intersected the rows (only these cells crossed the
    network) or the client did, from the whole rows."""

    cells: Mapping[bytes, Mapping[bytes, bytes]]
    count: int
    server_side: bool = False

    @property
    def complete(self) -> bool:
        """Whether every common qualifier is in ``cells``."""
        return all(len(cells) >= self.count for cells in self.cells.values())


def check_common_request(rows: Sequence[bytes], limit: int) -> None:
    """Raise ValueError for a ``read_common`` request no store answers."""
    if not 1 <= len(rows) <= MAX_COMMON_ROWS:
        raise ValueError(f"a common read intersects 1 to {MAX_COMMON_ROWS} rows, got {len(rows)}")
    if not 0 <= limit <= MAX_PREFIX:
        raise ValueError(f"a common read asks for 0 to {MAX_PREFIX:,} qualifiers, got {limit:,}")


def intersect(rows: Mapping[bytes, Mapping[bytes, bytes]], limit: int, *, server_side: bool) -> CommonCells:
    """The ``CommonCells`` of rows given as their newest values ``{qualifier: value}``."""
    common = None
    for cells in rows.values():
        live = {q for q, v in cells.items() if v}
        common = live if common is None else common & live
    ordered = sorted(common or ())
    kept = ordered[:limit]
    return CommonCells({key: {q: cells[q] for q in kept} for key, cells in rows.items()}, len(ordered), server_side)
