"""Value types of the storage layer: cells, rows, read specs and row mutations.

Layer: storage. Imports nothing above ``caffeine.errors``. Everything is ``bytes`` and every
cell carries an explicit timestamp: the layers above use cell timestamps as logical time
(Percolator's start_ts/commit_ts), so nothing here ever lets the server stamp its own clock.

Time ranges are *inclusive* on both ends (``min_ts <= ts <= max_ts``), the way the protocol
talks ("the latest write at or below start_ts"). HBase's ranges are half-open ``[min, max)``;
the HBase store converts, and a contract test pins the conversion.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, Union

# One version of one cell, newest-first lists of these make up a row.
Column = tuple[bytes, bytes]  # (family, qualifier)

MAX_TS = (1 << 63) - 1

# Every table the storage layer creates has this family; it holds one cell per row, the
# *row guard*, which every write replaces with a fresh random token. Row transactions compare
# it (check-and-mutate) to detect any change since their read, ABA included, because a token
# is never reused.
GUARD_FAMILY = b"_g"
GUARD_QUALIFIER = b""
# The guard lives far in the future so that every read with a lower time bound and no upper
# bound (the reads row transactions make) still sees it in the same Get, without a filter.
GUARD_TS = 1 << 62
GUARD_TOKEN_BYTES = 16


def fresh_tokens(n: int) -> list[bytes]:
    """``n`` new guard tokens, random as ``os.urandom`` makes them, from one system call
    (a batch of rows needs one each; a call per row cost a few percent of a worker's CPU)."""
    pool = os.urandom(GUARD_TOKEN_BYTES * n)
    return [pool[i:i + GUARD_TOKEN_BYTES] for i in range(0, len(pool), GUARD_TOKEN_BYTES)]

# A table with a counted family (``FamilySpec.counted``) also has this family: per row, one
# cell per counted family (qualifier = that family's name) holding how many of the row's
# cells of that family are live, in decimal ASCII. The store keeps it (the HBase coprocessor,
# at write time); like the guard family, no reader or writer above the store ever names it.
COUNT_FAMILY = b"_n"
RESERVED_FAMILIES = frozenset((GUARD_FAMILY, COUNT_FAMILY))


def reject_reserved(family: bytes) -> None:
    """ValueError for a family only the store itself may name (the guard's, the counts')."""
    if family in RESERVED_FAMILIES:
        what = "the row guard" if family == GUARD_FAMILY else "the live-cell counts"
        raise ValueError(f"family {family!r} is reserved for {what}")


def count_refusal(family: bytes) -> str:
    """What a store says when refusing a delete in counted ``family`` (the HBase coprocessor
    says the same, coprocessor/.../RowCounts.java)."""
    return (f"CAFFEINE-COUNT family {family.decode('utf-8', 'replace')} is counted and takes no deletes: "
            "write an empty value instead")


@dataclass(frozen=True, slots=True)
class Cell:
    family: bytes
    qualifier: bytes
    ts: int
    value: bytes


@dataclass(frozen=True, slots=True)
class FamilySpec:
    """How HBase keeps one column family.

    ``max_versions``: versions kept (the protocol's own GC trims data and write families, so
    those keep "all"). ``in_memory``: hint to keep the family's blocks cached with priority
    (small, hot families: lock, notify). ``bloom``: 'ROW', 'ROWCOL' or 'NONE'.

    ``churn``: the family's cells are deleted within seconds of being written (Percolator's
    notifications). HBase keeps deleted cells and their delete markers until a major
    compaction and every scan walks them, so an HBase store has a churn family flushed and
    major-compacted on its own whenever its memory holds a few thousand cells (the
    coprocessor's ``ChurnCompactor``; without the coprocessor, schedule ``major_compact``
    of the family). What a read returns is unchanged.

    ``counted``: the store keeps, per row, the number of cells of this family whose newest
    value is non-empty (an empty value is a serving table's tombstone), so ``read_prefix``
    returns the count without walking the row: a summary read then costs what its prefix and
    the recently written cells cost, not what the row's length does. Every write pays for it
    (HBase: one read of the written columns per written row). A counted family takes no
    deletes (a removal is an empty value): the store refuses them with a ``StorageError``
    naming ``CAFFEINE-COUNT``, because a delete can uncover an older version whose liveness
    the write path cannot see cheaply.

    ``encoding``: HBase's data block encoding, None (none) or 'ROW_INDEX_V1' (each block
    carries an index of its rows, so a seek bisects to its row instead of walking the block
    from its start: for families of many rows of one small cell each).
    """

    max_versions: int = 1
    in_memory: bool = False
    bloom: str = "ROW"
    counted: bool = False
    churn: bool = False
    # Bytes per HFile data block (None: HBase's 64 KB). A read by named columns seeks to each
    # one and walks its block from the start, so wide rows read that way want small blocks.
    block_size: int | None = None
    encoding: str | None = None


@dataclass(frozen=True, slots=True)
class ReadSpec:
    """What to read of a row: families and/or single columns, a time range, versions per column.

    Empty ``families`` and ``columns`` mean "every family but the reserved ones" (the guard's,
    the counts'). ``max_ts=None``
    means "no upper bound". ``versions`` is capped by the family's ``max_versions``.
    """

    families: tuple[bytes, ...] = ()
    columns: tuple[Column, ...] = ()
    min_ts: int = 0
    max_ts: int | None = None
    versions: int = 1
    # ``columns`` as a set: ``selects`` runs once per cell read, and a read by many columns
    # (a term's postings of a thousand candidate documents) made a tuple scan quadratic.
    _wanted: frozenset = field(init=False, repr=False, compare=False, default=frozenset())

    def __post_init__(self) -> None:
        object.__setattr__(self, "_wanted", frozenset(self.columns))
        if self.versions < 1:
            raise ValueError("versions must be >= 1")
        if self.min_ts < 0 or (self.max_ts is not None and self.max_ts < self.min_ts):
            raise ValueError(f"bad time range [{self.min_ts}, {self.max_ts}]")

    def selects(self, family: bytes, qualifier: bytes) -> bool:
        """Whether the spec asks for this column (ignoring time)."""
        if not self.families and not self.columns:
            return family not in RESERVED_FAMILIES
        return family in self.families or (family, qualifier) in self._wanted

    def covers(self, ts: int) -> bool:
        """Whether ``ts`` lies in the inclusive time range."""
        return self.min_ts <= ts and (self.max_ts is None or ts <= self.max_ts)


class Row:
    """A snapshot of (part of) one row: per column, versions newest first.

    Built by the stores; the protocol's pure steps read it and never see I/O.
    ``guard`` is the row guard's token when the read asked for it (row transactions do).
    """

    __slots__ = ("key", "_cells", "guard")

    def __init__(self, key: bytes, cells: Iterable[Cell] = (), guard: bytes | None = None):
        self.key = key
        self.guard = guard
        grouped: dict[Column, list[Cell]] = {}
        for cell in cells:
            key = (cell.family, cell.qualifier)
            versions = grouped.get(key)
            if versions is None:
                grouped[key] = [cell]
            else:
                versions.append(cell)
        for versions in grouped.values():
            if len(versions) > 1:
                versions.sort(key=lambda c: c.ts, reverse=True)
        self._cells = grouped

    def versions(self, family: bytes, qualifier: bytes) -> list[Cell]:
        """All versions read of one column, newest first (empty if none)."""
        return self._cells.get((family, qualifier), [])

    def latest(self, family: bytes, qualifier: bytes) -> Cell | None:
        versions = self._cells.get((family, qualifier))
        return versions[0] if versions else None

    def family(self, family: bytes) -> dict[bytes, list[Cell]]:
        """qualifier -> versions newest first, for one family."""
        return {q: v for (f, q), v in self._cells.items() if f == family}

    def columns(self) -> list[Column]:
        return sorted(self._cells)

    def newest_cells(self) -> Iterator[Cell]:
        """The newest version of each column, in no particular order (the fast way through
        a wide row)."""
        for versions in self._cells.values():
            yield versions[0]

    def __iter__(self) -> Iterator[Cell]:
        for column in sorted(self._cells):
            yield from self._cells[column]

    def __bool__(self) -> bool:
        return bool(self._cells)

    def __len__(self) -> int:
        return sum(len(v) for v in self._cells.values())

    def __repr__(self) -> str:
        return f"Row({self.key!r}, {list(self)!r})"


@dataclass(frozen=True, slots=True)
class Put:
    """Write one version of a cell at an explicit timestamp (same timestamp replaces it)."""

    family: bytes
    qualifier: bytes
    ts: int
    value: bytes


@dataclass(frozen=True, slots=True)
class Delete:
    """Remove exactly one version of a cell, the one at ``ts`` (HBase DELETE_COLUMN)."""

    family: bytes
    qualifier: bytes
    ts: int


@dataclass(frozen=True, slots=True)
class DeleteUpTo:
    """Remove every version of a cell at or below ``ts`` (HBase DELETE_COLUMNS).

    HBase keeps the delete marker until a major compaction, so a *later* put at a timestamp
    at or below ``ts`` stays hidden. The protocol never writes below a marker it placed
    (timestamps only grow), and the in-memory store reproduces the quirk faithfully.
    """

    family: bytes
    qualifier: bytes
    ts: int


Mutation = Union[Put, Delete, DeleteUpTo]

# A Put's fields as a plain tuple, ``(family, qualifier, ts, value)``: what ``Store.put_cells``
# takes, since a tuple costs a tenth of a frozen dataclass to build and a serving table's write
# builds hundreds.
PutFields = tuple[bytes, bytes, int, bytes]


def puts_of_cells(rows: Mapping[bytes, Sequence[PutFields]]) -> dict[bytes, list[Put]]:
    """``Store.put_cells``' rows as ``put_rows``' (a ``Put`` per cell), for stores without a
    path of their own for the tuples."""
    return {row: [Put(*cell) for cell in cells] for row, cells in rows.items()}


@dataclass(frozen=True, slots=True)
class Decision:
    """What a row transaction's ``decide`` returns: the mutations to apply and a result.

    Empty ``mutations``: nothing to write; the row transaction returns ``result`` at once.
    """

    mutations: Sequence[Mutation] = ()
    result: Any = None


Decide = Callable[[Row], Decision]


@dataclass(frozen=True, slots=True)
class CheckedWrite:
    """One row's mutations that the server applies only if a *row step* running inside it
    accepts them, atomically with its check (under the row lock).

    ``attributes`` name the step and its parameters; the storage layer carries them to the
    server unread (HBase: the mutation's attributes, read by a RegionObserver coprocessor).
    A checked write must be idempotent at the server: sent again after it applied, it is
    accepted again or refused with an answer that says so. Every checked write also
    replaces the row guard, as every other write does.
    """

    attributes: tuple[tuple[bytes, bytes], ...]
    mutations: tuple[Mutation, ...]


@dataclass(frozen=True, slots=True)
class Refusal:
    """A row step's refusal of a checked write: nothing of it applied. ``answer`` and its
    ``args`` are the step's own words (upper-case answer; lower-case hex or decimal
    arguments, or for ``BAD_REQUEST`` the one token naming what is malformed)."""

    answer: str
    args: tuple[str, ...] = ()


# How a server-side row step phrases a refusal inside an error message (one per refused row;
# HBase aggregates a batch's failures into one message, each refusal followed by a newline and
# a stack trace or ": 1 time"): the row in hex, the answer, then either one token (BAD_REQUEST,
# lower-case letters, digits, "_" and "-") or hex/decimal arguments. The token is taken alone,
# so the wider character set can never run on into the text after it.
_REFUSAL = re.compile(
    r"CAFFEINE-STEP row=(?P<row>[0-9a-f]*) "
    r"(?:BAD_REQUEST (?P<token>[a-z0-9_-]+)|(?P<answer>[A-Z_]+)(?P<args>(?: [0-9a-f]+)*))"
)


def parse_refusals(message: str) -> dict[bytes, Refusal]:
    """Every row step's refusal named in an error message, by row: ``BAD_REQUEST`` with its
    token as the one argument, any other answer with its hex or decimal arguments."""
    return {bytes.fromhex(m["row"]): _refusal_of(m) for m in _REFUSAL.finditer(message)}


def _refusal_of(m: re.Match) -> Refusal:
    """The refusal one ``_REFUSAL`` match names."""
    if m["token"] is not None:
        return Refusal("BAD_REQUEST", (m["token"],))
    return Refusal(m["answer"], tuple(m["args"].split()))


# What a server-side row step does with one checked write: given the write's attributes, the
# row (every version) and the table's families, the Refusal (nothing of the write applies), or
# the mutations it adds to the write (the deletes the write carries; often none), applied
# atomically with the write's own.
RowStepCheck = Callable[[dict, "Row", "dict[bytes, FamilySpec]"], "Refusal | tuple[Mutation, ...]"]


@dataclass
class StoreStats:
    """Counters a store keeps so retries are visible (``caffeine status``, benchmarks)."""

    row_transactions: int = 0
    cas_conflicts: int = 0
    unknown_outcomes: int = 0
    reconnects: int = 0
    retried_calls: int = 0
    extra: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def bump(self, name: str, n: int = 1) -> None:
        """Add ``n`` to a counter (a named field, or an ad-hoc one kept in ``extra``)."""
        with self._lock:
            if name in self.__dataclass_fields__ and name not in ("extra", "_lock"):
                setattr(self, name, getattr(self, name) + n)
            else:
                self.extra[name] = self.extra.get(name, 0) + n

    def as_dict(self) -> dict[str, int]:
        return {
            "row_transactions": self.row_transactions,
            "cas_conflicts": self.cas_conflicts,
            "unknown_outcomes": self.unknown_outcomes,
            "reconnects": self.reconnects,
            "retried_calls": self.retried_calls,
            **self.extra,
        }


def as_bytes(value: bytes | str) -> bytes:
    """The edge convenience: str becomes UTF-8 bytes, bytes pass through."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    raise TypeError(f"expected bytes or str, got {type(value).__name__}")


def check_row(row: bytes) -> None:
    """Refuse anything but a non-empty bytes row key (HBase answers an empty one with an
    opaque internal error; every store says what is wrong instead)."""
    if not isinstance(row, bytes) or not row:
        raise ValueError(f"row key must be non-empty bytes, got {row!r}")
