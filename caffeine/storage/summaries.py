"""The coprocessor's summary reads on the wire: what a Thrift2 ``TGet`` asks for, and reading
its answer (coprocessor/README.md; ``RowSummaries`` and ``RowPacks`` in the coprocessor).

Layer: storage. Imports the standard library only; no I/O. ``HBaseStore`` builds its ``read_prefix``,
``read_cells`` and ``read_latest`` requests with these functions and reads their answers
with them.

A Get carrying the attribute ``SUMMARY_ATTRIBUTE`` is answered by the coprocessor instead of
being read:

- ``prefix <n> [<since>]``: the row's first ``n`` live cells (then, with ``since``, its later
  ones written at or after it), each as a cell, then a count cell (``SUMMARY_COUNT_QUALIFIER``).
- ``packed <n> [<since>]``: the same cells and count as ONE packed cell (``PACKED_QUALIFIER``).
- ``cells``: the columns the Get names (newest version of each) as one packed cell.
- ``common <n> <row>[.<size>] ...``: the cells the Get's row and the (hex) rows after it have in
  common, as one packed cell: for the first ``n`` common qualifiers, each row's cells in
  turn (``common_request``, ``split_common``).

Why packed: a Thrift2 answer carries one ``TColumnValue`` per cell, which the region server,
the Thrift server and the client each encode or decode; in Python that is about 4 µs a cell,
most of a 2,048-cell head read. A packed cell is one value, split here with two slices a cell.

A region server without the coprocessor ignores the attribute and sends the Get's cells as
stored (``packed_cells`` then returns None, and the caller summarizes them itself); one with
an older coprocessor refuses ``packed`` and ``cells`` with ``CAFFEINE-READ bad request``
(``refuses_packing``), and the caller asks in the per-cell form from then on.
"""

from __future__ import annotations

import struct
from typing import Sequence

__all__ = ["SUMMARY_ATTRIBUTE", "SUMMARY_COUNT_QUALIFIER", "PACKED_QUALIFIER", "prefix_request", "CELLS_REQUEST",
           "packed_cells", "newest_values", "refuses_packing", "refuses_busy", "unpack", "common_request", "split_common"]

SUMMARY_ATTRIBUTE = b"caffeine.read"
SUMMARY_COUNT_QUALIFIER = b"\x00caffeine.count"
PACKED_QUALIFIER = b"\x00caffeine.packed"
CELLS_REQUEST = b"cells"
# What an older coprocessor answers a request it does not know.
_REFUSAL = "CAFFEINE-READ bad request"
# What a region server answers a ``common`` request while too many of its handlers gather
# rows from other servers (coprocessor RowsCommon).
_BUSY = "CAFFEINE-READ busy"

_HEADER = struct.Struct(">qI")


def prefix_request(limit: int, since: int | None, packed: bool) -> bytes:
    """The attribute's value asking for a row's first ``limit`` live cells (and, with
    ``since``, the later ones written at or after it) and its count."""
    form = b"packed" if packed else b"prefix"
    if since is not None:
        return b"%s %d %d" % (form, limit, since)
    if limit == 0 and not packed:
        return b"count"
    return b"%s %d" % (form, limit)


def common_request(limit: int, rows: Sequence[bytes], sizes: Sequence[int] | None = None) -> bytes:
    """The attribute's value, on a Get of ``rows[0]``, asking for the first ``limit`` cells
    that row and the others have in common; ``sizes``: each row's expected number of cells,
    when known (the server then walks a row rather than seek in it where that costs less)."""
    others = [row.hex().encode() for row in rows[1:]]
    if sizes is not None:
        others = [b"%s.%d" % (row, max(0, size)) for row, size in zip(others, sizes[1:])]
    return b" ".join([b"common", b"%d" % limit, *others])


def split_common(rows: Sequence[bytes], cells: list[tuple[bytes, bytes, bytes]]) -> dict[bytes, dict[bytes, bytes]]:
    """A ``common`` answer's cells as ``{row: {qualifier: value}}``: as many equal runs as
    ``rows``, in their order. ValueError when the cells do not split so."""
    per, left = divmod(len(cells), len(rows))
    if left:
        raise ValueError(f"not a common answer: {len(cells)} cells for {len(rows)} rows")
    return {row: {q: v for _, q, v in cells[i * per:(i + 1) * per]} for i, row in enumerate(rows)}


def unpack(value: bytes) -> tuple[int, list[tuple[bytes, bytes, bytes]]]:
    """A packed cell's value: its count and its ``(family, qualifier, value)`` cells, in the
    order packed. ValueError when the value is not a well-formed pack."""
    try:
        count, k = _HEADER.unpack_from(value, 0)
        lengths = struct.unpack_from(">%dI" % (3 * k), value, _HEADER.size)
    except struct.error as exc:
        raise ValueError(f"not a packed answer: {exc}") from None
    at = _HEADER.size + 12 * k
    if at + sum(lengths) != len(value):
        raise ValueError(f"not a packed answer: {len(value)} bytes, its lengths say {at + sum(lengths)}")
    cells = []
    append = cells.append
    it = iter(lengths)
    for family_length, qualifier_length, value_length in zip(it, it, it):
        f_end = at + family_length
        q_end = f_end + qualifier_length
        end = q_end + value_length
        append((value[at:f_end], value[f_end:q_end], value[q_end:end]))
        at = end
    return count, cells


def packed_cells(column_values: Sequence) -> tuple[int, list[tuple[bytes, bytes, bytes]]] | None:
    """A Thrift2 result's packed answer (``unpack``'s), or None when the result holds the
    cells as stored (a region server without the coprocessor)."""
    if len(column_values) == 1 and column_values[0].qualifier == PACKED_QUALIFIER:
        return unpack(column_values[0].value)
    return None


def newest_values(column_values: Sequence) -> tuple[dict[bytes, bytes], bool]:
    """A Thrift2 result's cells, packed or as stored, as ``{b"family:qualifier": value}``
    (an empty value is a value), and whether they came packed."""
    packed = packed_cells(column_values)
    if packed is not None:
        return {family + b":" + qualifier: value for family, qualifier, value in packed[1]}, True
    return {cv.family + b":" + cv.qualifier: cv.value or b"" for cv in column_values}, False


def refuses_packing(error: BaseException) -> bool:
    """Whether a failed summary read was refused by a coprocessor that predates packing."""
    return _REFUSAL in str(error)


def refuses_busy(error: BaseException) -> bool:
    """Whether a ``common`` read was turned away because its region server was busy gathering."""
    return _BUSY in str(error)
