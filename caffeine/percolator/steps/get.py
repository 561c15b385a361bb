"""Snapshot read of one cell: the paper's Figure 6 ``Get``, as a decision over one row read.

Layer: percolator. Protocol steps (pure).

``get_spec`` reads, in one Get of the row, the newest lock, write and data versions at or
below start_ts of the columns asked for. ``read_cell`` then says:

- ``Blocked(lock)``: a lock at or below start_ts; the transaction holding it may commit
  below our start_ts, so the caller must resolve it (or wait) and read again;
- ``Value(bytes | None)``: the newest write at or below start_ts points at this data
  (None: no write, or a DELETE);
- ``NeedData(data_ts)``: the newest data version read is not the one the write points at
  (a later transaction's data); the caller reads data at exactly ``data_ts``;
- ``NeedOlderWrite()``: the newest write record below start_ts is a ROLLBACK, which hides
  the committed write beneath; the caller reads the newest committed record below it from
  the cell's write history and asks ``points_at`` what it means.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from caffeine.percolator.layout import ACK, DATA, LOCK, WRITE, data_family, qualifier
from caffeine.percolator.records import Kind, Lock, Write
from caffeine.percolator.steps.common import lock_of
from caffeine.storage import ReadSpec, Row


@dataclass(frozen=True, slots=True)
class Value:
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Blocked:
    lock: Lock


@dataclass(frozen=True, slots=True)
class NeedData:
    data_ts: int


@dataclass(frozen=True, slots=True)
class NeedOlderWrite:
    pass


ReadResult = Value | Blocked | NeedData | NeedOlderWrite


def get_spec(columns: Iterable[str] | None, start_ts: int) -> ReadSpec:
    """Newest lock/write/data at or below start_ts; ``None`` columns: every column."""
    if columns is None:
        return ReadSpec(families=(LOCK, WRITE, DATA, ACK), max_ts=start_ts)
    cols = []
    for column in columns:
        q = qualifier(column)
        cols += [(LOCK, q), (WRITE, q), (data_family(q), q)]
    return ReadSpec(columns=tuple(cols), max_ts=start_ts)


def read_cell(row: Row, column: str | bytes, start_ts: int) -> ReadResult:
    q = qualifier(column)
    lock = lock_of(row, q)
    if lock is not None and lock.start_ts <= start_ts:
        return Blocked(lock)
    return resolve_write(row, q, start_ts)


def resolve_write(row: Row, q: bytes, start_ts: int, *, all_versions_read: bool = False) -> ReadResult:
    """The value the newest write record at or below ``start_ts`` points at.

    ``all_versions_read``: the row holds every write version at or below start_ts, so
    running out of them below a rollback record means "no value", not "read more".
    """
    write_cell = next((c for c in row.versions(WRITE, q) if c.ts <= start_ts), None)
    if write_cell is None:
        return Value(None)
    write = Write.decode(write_cell.value)
    if write.kind is Kind.ROLLBACK:
        rest = [c for c in row.versions(WRITE, q) if c.ts < write_cell.ts]
        if not rest:
            return Value(None) if all_versions_read else NeedOlderWrite()
        return resolve_write(
            Row(row.key, [*rest, *row.versions(data_family(q), q)]), q, rest[0].ts, all_versions_read=all_versions_read
        )
    if write.kind is Kind.DELETE:
        return Value(None)
    data = next((c for c in row.versions(data_family(q), q) if c.ts == write.start_ts), None)
    if data is None:
        return NeedData(write.start_ts)
    return Value(data.value)


def points_at(write: Write | None) -> Value | NeedData:
    """What a committed write record found without its data means: ``Value(None)`` for no
    record or a DELETE, else ``NeedData`` at the writer's start_ts. (A rollback record
    points at nothing: the caller skips those.)"""
    if write is not None and write.is_rollback:
        raise ValueError("a rollback record points at no data")
    if write is None or write.kind is Kind.DELETE:
        return Value(None)
    return NeedData(write.start_ts)


def presence_spec(start_ts: int) -> ReadSpec:
    """Every column's lock and newest write at or below start_ts, no data: enough to tell
    which columns have a value (``presence``) without reading the values."""
    return ReadSpec(families=(LOCK, WRITE), max_ts=start_ts)


def presence(row: Row, q: bytes, start_ts: int) -> bool | None:
    """Whether the column has a value at start_ts, from a ``presence_spec`` read; None when
    that read cannot tell (a lock at or below start_ts, or a rollback record on top): read
    the cell itself then."""
    result = read_cell(row, q, start_ts)
    if isinstance(result, NeedData):  # a committed put; its data was not read
        return True
    if isinstance(result, Value):  # a delete, or no write at all
        return result.value is not None
    return None


def columns_in(row: Row) -> list[bytes]:
    """Qualifiers of every column that has a lock or write in the row read."""
    quals = set(row.family(LOCK)) | set(row.family(WRITE))
    return sorted(quals)
