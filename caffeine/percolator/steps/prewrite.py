"""Prewrite: lock every cell a transaction writes in one row, or report why it cannot.

Layer: percolator. Protocol steps (pure). The paper's Figure 6 ``Prewrite``, one row at a time.

Reads (``spec``): the lock and the newest write versions of each column written.
Decides, per column, in this order:

1. a rollback record at exactly ``start_ts``: this transaction was rolled back by a
   cleaner; it can never commit -> ``RolledBack()``;
2. a committed write at or after ``start_ts`` -> ``WriteConflict`` (first committer wins);
3. a lock by another transaction, at any timestamp -> ``KeyLocked`` (the caller checks
   whether its owner is gone, cleans it up and retries, or aborts);
4. our own lock already there -> nothing to do for that column (a retried prewrite);
5. otherwise: data at start_ts (none for a delete) and the lock.

Notify cells are not written here: they are written at commit_ts, before the commit point
(``TwoPhaseCommit.commit_primary``), so that their versions are ordered like the commits.

All-or-nothing per row: any problem means no mutation at all. Idempotent: after it applied,
deciding again finds its own locks (case 4) and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from caffeine.percolator.layout import LOCK, WRITE, data_family, qualifier
from caffeine.percolator.records import CellRef, Kind, Lock, RolledBack
from caffeine.percolator.steps.common import WRITE_VERSIONS_SCANNED, lock_of, writes_of
from caffeine.storage import Decision, Put, ReadSpec, Row


@dataclass(frozen=True, slots=True)
class Prewritten:
    pass


@dataclass(frozen=True, slots=True)
class WriteConflict:
    column: str
    commit_ts: int


@dataclass(frozen=True, slots=True)
class KeyLocked:
    column: str
    lock: Lock


PrewriteResult = Prewritten | WriteConflict | KeyLocked | RolledBack


def prewrite_spec(columns: Iterable[str]) -> ReadSpec:
    cols = []
    for column in columns:
        q = qualifier(column)
        cols += [(LOCK, q), (WRITE, q)]
    return ReadSpec(columns=tuple(cols), versions=WRITE_VERSIONS_SCANNED)


def prewrite(
    row: Row,
    writes: Mapping[str, bytes | None],
    *,
    primary: CellRef,
    start_ts: int,
    ttl_ms: int,
    owner: bytes,
    written_ms: int = 0,
) -> Decision:
    """``writes``: column -> value, or None to delete. Result: a ``PrewriteResult``.

    ``written_ms``: the wall-clock time of this prewrite, stored in each lock, so a lock's TTL
    runs from when it was written, not from start_ts (a transaction may read for a long time
    before it writes)."""
    mutations = []
    for column, value in writes.items():
        q = qualifier(column)
        versions = writes_of(row, q)
        for ts, write in versions:
            if ts < start_ts:
                break
            if write.is_rollback and ts == start_ts:
                return Decision((), RolledBack())
            if not write.is_rollback:
                return Decision((), WriteConflict(column, ts))
        else:
            if len(versions) >= WRITE_VERSIONS_SCANNED:
                # Dozens of rollbacks above start_ts hide whether a commit lies among them;
                # losing is the safe answer, and the retry gets a newer start_ts.
                return Decision((), WriteConflict(column, versions[-1][0]))
        lock = lock_of(row, q)
        if lock is not None:
            if lock.start_ts == start_ts:
                continue
            return Decision((), KeyLocked(column, lock))
        kind = Kind.of_value(value)
        if value is not None:
            mutations.append(Put(data_family(q), q, start_ts, value))
        mutations.append(Put(LOCK, q, start_ts, Lock(start_ts, kind, primary, ttl_ms, owner, written_ms).encode()))
    return Decision(mutations, Prewritten())


__all__ = ["prewrite", "prewrite_spec", "Prewritten", "WriteConflict", "KeyLocked", "PrewriteResult"]
