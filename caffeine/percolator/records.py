"""The protocol's small value types and their byte encodings.

Layer: percolator. Internal (imports nothing but the standard library). Each type's encoding
sits next to it; ``tests/unit/test_percolator_records.py`` pins the bytes and the round trips.

- ``CellRef``: a Percolator cell, (table, row, column).
- ``Lock``: the lock cell's value, written at the transaction's start_ts. Secondaries name the
  primary; every lock carries a TTL and the owner (the client process) for lazy cleanup.
- ``Write``: the write cell's value, at commit_ts (PUT/DELETE: points at the data written at
  ``start_ts``) or at start_ts itself (ROLLBACK: the transaction can never commit).
- Acks (``encode_ack``, ``encode_inline_ack``, ``ack_covers``): the change an observer's run
  last covered, by the change's commit_ts or, from a run inside the changing transaction, by its start_ts.
- Transaction states are values (``Committed``, ``RolledBack``, ``Locked``), not exceptions.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")

LOCK_FORMAT = 1


@dataclass(frozen=True, slots=True, order=True)
class CellRef:
    table: str
    row: bytes
    column: str

    def __str__(self) -> str:
        return f"{self.table}/{self.row!r}/{self.column}"


class Kind(enum.IntEnum):
    PUT = 1
    DELETE = 2
    ROLLBACK = 3

    @classmethod
    def of_value(cls, value: bytes | None) -> "Kind":
        """What writing ``value`` records: a DELETE for None, else a PUT."""
        return cls.DELETE if value is None else cls.PUT


def _pack_bytes(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def _unpack_bytes(buf: bytes, at: int) -> tuple[bytes, int]:
    (n,) = _U32.unpack_from(buf, at)
    at += 4
    if at + n > len(buf):
        raise ValueError("truncated record")
    return buf[at:at + n], at + n


@dataclass(frozen=True, slots=True)
class Lock:
    """A prewrite's lock on one cell.

    ``kind``: PUT or DELETE (what commit will record). ``primary``: the transaction's
    primary cell (itself, for the primary lock). ``ttl_ms``: how long after the physical part
    of ``start_ts`` (or after ``refreshed_ms``, when a long commit refreshed it) the lock may
    be considered abandoned. ``owner``: the client process that holds it; cleanup asks the
    owner registry whether that process still heartbeats.
    """

    start_ts: int
    kind: Kind
    primary: CellRef
    ttl_ms: int
    owner: bytes
    refreshed_ms: int = 0

    def encode(self) -> bytes:
        return b"".join((
            bytes((LOCK_FORMAT, int(self.kind))),
            _U32.pack(self.ttl_ms),
            _U64.pack(self.refreshed_ms),
            _pack_bytes(self.owner),
            _pack_bytes(self.primary.table.encode()),
            _pack_bytes(self.primary.row),
            _pack_bytes(self.primary.column.encode()),
        ))

    @classmethod
    def decode(cls, start_ts: int, data: bytes) -> "Lock":
        if len(data) < 14 or data[0] != LOCK_FORMAT:
            raise ValueError(f"not a lock record: {data[:16]!r}")
        kind = Kind(data[1])
        (ttl_ms,) = _U32.unpack_from(data, 2)
        (refreshed_ms,) = _U64.unpack_from(data, 6)
        owner, at = _unpack_bytes(data, 14)
        table, at = _unpack_bytes(data, at)
        row, at = _unpack_bytes(data, at)
        column, at = _unpack_bytes(data, at)
        if at != len(data):
            raise ValueError("trailing bytes after lock record")
        return cls(start_ts, kind, CellRef(table.decode(), row, column.decode()), ttl_ms, owner, refreshed_ms)


@dataclass(frozen=True, slots=True)
class Write:
    """A write record: at ``commit_ts`` for PUT/DELETE, at ``start_ts`` for ROLLBACK."""

    kind: Kind
    start_ts: int

    def encode(self) -> bytes:
        return bytes((int(self.kind),)) + _U64.pack(self.start_ts)

    @classmethod
    def decode(cls, data: bytes) -> "Write":
        if len(data) != 9:
            raise ValueError(f"not a write record: {data!r}")
        return cls(Kind(data[0]), _U64.unpack_from(data, 1)[0])

    @property
    def is_rollback(self) -> bool:
        return self.kind is Kind.ROLLBACK


NOTIFY_FORMAT = 2


def encode_notify(primary: CellRef, start_ts: int) -> bytes:
    """A notify cell's value: the writing transaction's primary and start_ts, so a worker can
    ask whether the change behind a notification committed. (The cell's own timestamp is
    the writer's commit_ts: see ``TwoPhaseCommit.commit_primary``.)"""
    return b"".join((
        bytes((NOTIFY_FORMAT,)),
        _U64.pack(start_ts),
        _pack_bytes(primary.table.encode()),
        _pack_bytes(primary.row),
        _pack_bytes(primary.column.encode()),
    ))


def decode_notify(data: bytes, cell_ts: int) -> tuple[CellRef, int] | None:
    """(primary, start_ts) of the transaction named by a notify cell written at ``cell_ts``,
    or None for a value naming none (a notification without a commit point, or in no
    known format). Format 1, written at the writer's start_ts, carried no start_ts."""
    if not data or data[0] not in (1, NOTIFY_FORMAT):
        return None
    try:
        if data[0] == 1:
            start_ts, at = cell_ts, 1
        else:
            (start_ts,) = _U64.unpack_from(data, 1)
            at = 9
        table, at = _unpack_bytes(data, at)
        row, at = _unpack_bytes(data, at)
        column, at = _unpack_bytes(data, at)
    except (ValueError, struct.error):
        return None
    return (CellRef(table.decode(), row, column.decode()), start_ts) if at == len(data) else None


# -- acks: the change an observer last ran for ------------------------------------------------
def encode_ack(commit_ts: int) -> bytes:
    """An ack written by a run for the change committed at ``commit_ts``: it covers that
    change and every earlier one of the column."""
    return str(commit_ts).encode()


def encode_inline_ack(start_ts: int) -> bytes:
    """An ack written by a run *inside* the transaction that made the change (an inline run,
    ``Observer.inline``): its commit_ts is not known while it writes, so it names the
    transaction's start_ts, ``=<start_ts>``. It covers that transaction's change of the column
    and every earlier one: two committed writes of one cell never overlap in time (snapshot
    isolation's write-write rule), so the column's changes are ordered alike by start_ts and
    by commit_ts."""
    return b"=%d" % start_ts


def ack_covers(ack: bytes | None, change: tuple[int, int]) -> bool:
    """Whether an ack covers ``change``, a (commit_ts, start_ts) committed write of the
    observed column. No ack covers nothing."""
    if not ack:
        return False
    if ack[:1] == b"=":
        return change[1] <= int(ack[1:])
    return change[0] <= int(ack)


# -- transaction states: values, not exceptions -----------------------------------------------
@dataclass(frozen=True, slots=True)
class Committed:
    commit_ts: int


@dataclass(frozen=True, slots=True)
class RolledBack:
    pass


@dataclass(frozen=True, slots=True)
class Locked:
    """Still locked by a live transaction: wait for it."""

    lock: Lock


@dataclass(frozen=True, slots=True)
class Collected:
    """Settled before the GC safe point, its records since collected: committed or rolled
    back, no longer knowable, and no longer needed (GC resolved all of its locks first)."""


TxnStatus = Committed | RolledBack | Locked | Collected
