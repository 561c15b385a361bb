"""The row steps as the server runs them: the wire format, and the Python model of the check.

Layer: percolator steps (pure: no I/O). The coprocessor backend (``caffeine.percolator.committer``)
sends prewrite, commit and rollback as *checked writes*: the row's mutations, computed for the
state the client expects, plus attributes that name the step. Inside HBase, the RegionObserver
``org.caffeine.hbase.PercolatorRowSteps`` (``coprocessor/``) reads the row under the region's
row lock and lets the mutations through or refuses them with an answer, so a step costs one
round trip and no read. ``check`` below is the same decision in Python: the in-memory store
runs it (``MemoryStore(row_step=check)``), and ``tests/test_coprocessor_steps.py`` runs the
same scenarios against it and against the Java class on the real HBase.

Attributes (all values bytes):

- ``caffeine.step``: ``prewrite`` | ``commit`` | ``rollback`` | ``probe``
- ``caffeine.start_ts``, ``caffeine.commit_ts``: 8 bytes, big-endian
- ``caffeine.columns``: the user columns the step covers, each a 4-byte big-endian length + bytes

The check, per column in order, first refusal wins (the decisions of ``steps.prewrite``,
``steps.commit`` and ``steps.rollback``, over every write version at or above start_ts, so it
is never ``Inconclusive``):

- prewrite: a ROLLBACK record at start_ts -> ``ROLLED_BACK``; any commit record at or above
  start_ts -> ``CONFLICT col ts``; another transaction's lock -> ``LOCKED col ts lock``; our
  own lock (a re-send) passes.
- commit: our lock passes; else our commit record -> ``COMMITTED ts``; else ``ROLLED_BACK``.
- rollback: our commit record -> ``COMMITTED ts``; else it passes.
- probe: always ``PROBE version`` (a client learns the coprocessor is there; without it, the
  probe's put simply applies).

Arguments are lower-case hex (columns, lock values) or decimal (timestamps).
"""

from __future__ import annotations

import struct
from typing import Iterable, Mapping

from caffeine.percolator.layout import LOCK, WRITE, column_name, data_family, qualifier
from caffeine.percolator.records import Committed, Kind, Lock, RolledBack, Write
from caffeine.percolator.steps.prewrite import KeyLocked, Prewritten, WriteConflict
from caffeine.storage import CheckedWrite, Delete, Mutation, Put, Refusal, Row

STEP = b"caffeine.step"
START_TS = b"caffeine.start_ts"
COMMIT_TS = b"caffeine.commit_ts"
COLUMNS = b"caffeine.columns"

PREWRITE = b"prewrite"
COMMIT = b"commit"
ROLLBACK = b"rollback"
PROBE = b"probe"

PROTOCOL_VERSION = "1"

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")


class BadAnswer(Exception):
    """The server answered something this client does not understand (a version mismatch)."""


def encode_columns(columns: Iterable[str]) -> bytes:
    return b"".join(_U32.pack(len(q)) + q for q in map(qualifier, columns))


def decode_columns(data: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(data):
        (n,) = _U32.unpack_from(data, at)
        at += 4
        if at + n > len(data):
            raise ValueError("truncated column list")
        out.append(data[at:at + n])
        at += n
    return out


def _attributes(step: bytes, start_ts: int, columns: Iterable[str], commit_ts: int | None = None):
    attrs = [(STEP, step), (START_TS, _U64.pack(start_ts)), (COLUMNS, encode_columns(columns))]
    if commit_ts is not None:
        attrs.append((COMMIT_TS, _U64.pack(commit_ts)))
    return tuple(attrs)


# -- the writes a client sends ----------------------------------------------------------------
def prewrite_write(writes: Mapping[str, bytes | None], locks: Mapping[str, bytes], start_ts: int) -> CheckedWrite:
    """Data at start_ts (none for a delete) and the lock, for every column of the row."""
    mutations: list[Mutation] = []
    for column, value in writes.items():
        q = qualifier(column)
        if value is not None:
            mutations.append(Put(data_family(q), q, start_ts, value))
        mutations.append(Put(LOCK, q, start_ts, locks[column]))
    return CheckedWrite(_attributes(PREWRITE, start_ts, writes), tuple(mutations))


def commit_write(
    kinds: Mapping[str, Kind], start_ts: int, commit_ts: int, extra: Iterable[Mutation] = ()
) -> CheckedWrite:
    """Write records at commit_ts, locks removed; ``extra`` rides along (notifications)."""
    mutations: list[Mutation] = []
    for column, kind in kinds.items():
        q = qualifier(column)
        mutations += [Put(WRITE, q, commit_ts, Write(kind, start_ts).encode()), Delete(LOCK, q, start_ts)]
    return CheckedWrite(_attributes(COMMIT, start_ts, kinds, commit_ts), (*mutations, *extra))


def rollback_write(columns: Iterable[str], start_ts: int) -> CheckedWrite:
    """Lock and data removed, a ROLLBACK record at start_ts fences late prewrites."""
    columns = list(columns)
    mutations: list[Mutation] = []
    for column in columns:
        q = qualifier(column)
        mutations += [
            Delete(LOCK, q, start_ts), Delete(data_family(q), q, start_ts),
            Put(WRITE, q, start_ts, Write(Kind.ROLLBACK, start_ts).encode()),
        ]
    return CheckedWrite(_attributes(ROLLBACK, start_ts, columns), tuple(mutations))


def probe_write() -> CheckedWrite:
    return CheckedWrite(((STEP, PROBE),), ())


# -- what an answer means ---------------------------------------------------------------------
def prewrite_result(answer: Refusal | None):
    """``Prewritten``, ``WriteConflict``, ``KeyLocked`` or ``RolledBack``."""
    if answer is None:
        return Prewritten()
    if answer.answer == "CONFLICT":
        column, ts = answer.args
        return WriteConflict(column_name(bytes.fromhex(column)), int(ts))
    if answer.answer == "LOCKED":
        column, ts, value = answer.args
        return KeyLocked(column_name(bytes.fromhex(column)), Lock.decode(int(ts), bytes.fromhex(value)))
    if answer.answer == "ROLLED_BACK":
        return RolledBack()
    raise BadAnswer(f"prewrite answered {answer}")


def commit_result(answer: Refusal | None, commit_ts: int):
    """``Committed`` (at this commit_ts, or the one found) or ``RolledBack``."""
    if answer is None:
        return Committed(commit_ts)
    if answer.answer == "COMMITTED":
        return Committed(int(answer.args[0]))
    if answer.answer == "ROLLED_BACK":
        return RolledBack()
    raise BadAnswer(f"commit answered {answer}")


def rollback_result(answer: Refusal | None):
    """``RolledBack`` or ``Committed`` (rolling back a committed transaction refused)."""
    if answer is None:
        return RolledBack()
    if answer.answer == "COMMITTED":
        return Committed(int(answer.args[0]))
    raise BadAnswer(f"rollback answered {answer}")


# -- the check, as the server makes it ----------------------------------------------------------
def check(attributes: Mapping[bytes, bytes], row: Row) -> Refusal | None:
    """The coprocessor's decision on ``row`` (every version of the row) for a checked write
    with these attributes: None lets its mutations apply."""
    step = attributes.get(STEP)
    if step is None:
        return None
    if step == PROBE:
        return Refusal("PROBE", (PROTOCOL_VERSION,))
    try:
        start_ts = _U64.unpack(attributes[START_TS])[0]
        columns = decode_columns(attributes[COLUMNS])
        if step not in (PREWRITE, COMMIT, ROLLBACK):
            raise ValueError(f"unknown step {step!r}")
    except (KeyError, ValueError, struct.error) as exc:
        return Refusal("BAD_REQUEST", (str(exc).encode().hex(),))
    for q in columns:
        writes = [(c.ts, Write.decode(c.value)) for c in row.versions(WRITE, q) if c.ts >= start_ts]
        lock = row.latest(LOCK, q)
        if step == PREWRITE:
            for ts, write in writes:
                if write.is_rollback:
                    if ts == start_ts:
                        return Refusal("ROLLED_BACK")
                    continue
                return Refusal("CONFLICT", (q.hex(), str(ts)))
            if lock is not None and lock.ts != start_ts:
                return Refusal("LOCKED", (q.hex(), str(lock.ts), lock.value.hex()))
            continue
        own = next(((ts, w) for ts, w in writes if w.start_ts == start_ts and not w.is_rollback), None)
        if step == COMMIT:
            if lock is not None and lock.ts == start_ts:
                continue
            return Refusal("COMMITTED", (str(own[0]),)) if own else Refusal("ROLLED_BACK")
        if own is not None:  # ROLLBACK
            return Refusal("COMMITTED", (str(own[0]),))
    return None


__all__ = [
    "STEP", "START_TS", "COMMIT_TS", "COLUMNS", "PROTOCOL_VERSION", "BadAnswer",
    "prewrite_write", "commit_write", "rollback_write", "probe_write",
    "prewrite_result", "commit_result", "rollback_result", "check", "encode_columns", "decode_columns",
]
