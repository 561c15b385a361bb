"""Commit: turn a transaction's locks in one row into write records at commit_ts.

Layer: percolator. Protocol steps (pure). The paper's Figure 6 ``Commit``, one row at a time; the
same step commits the primary (the commit point), the secondaries, and rolls a secondary
forward when a reader finds its primary committed.

Reads (``commit_spec``): locks and write versions at or above start_ts. Decides per column:

- our lock is there: write record ``Write(kind, start_ts)`` at commit_ts, lock removed;
- our write record is already there: nothing (idempotent: a retry, or a cleaner rolled
  this cell forward first);
- our rollback record is there, or neither lock nor record: ``RolledBack()`` and no
  mutation for the whole row (committing part of a rolled-back transaction would be a G1a);
- the snapshot does not reach back to start_ts: ``Inconclusive`` (the caller looks deeper).

Result: ``Committed(commit_ts)`` (with this call's commit_ts, or the one found), or the above.
"""

from __future__ import annotations

from typing import Iterable

from caffeine.percolator.layout import LOCK, WRITE, qualifier
from caffeine.percolator.records import Committed, RolledBack, Write
from caffeine.percolator.steps.common import WRITE_VERSIONS_SCANNED, Inconclusive, lock_of, own_write, unlock_committed
from caffeine.storage import Cell, Decision, Put, ReadSpec, Row


def commit_spec(columns: Iterable[str], start_ts: int) -> ReadSpec:
    cols = []
    for column in columns:
        q = qualifier(column)
        cols += [(LOCK, q), (WRITE, q)]
    return ReadSpec(columns=tuple(cols), min_ts=start_ts, versions=WRITE_VERSIONS_SCANNED)


def commit(row: Row, columns: Iterable[str], *, start_ts: int, commit_ts: int) -> Decision:
    mutations = []
    found_commit_ts = None
    for column in columns:
        q = qualifier(column)
        lock = lock_of(row, q)
        if lock is not None and lock.start_ts == start_ts:
            mutations.append(Put(WRITE, q, commit_ts, Write(lock.kind, start_ts).encode()))
            mutations.append(unlock_committed(q, start_ts))
            continue
        found = own_write(row, q, start_ts)
        if isinstance(found, Inconclusive):
            return Decision((), found)
        if found is None or found[1].is_rollback:
            return Decision((), RolledBack())
        found_commit_ts = found[0]
    if not mutations and found_commit_ts is not None:
        return Decision((), Committed(found_commit_ts))
    return Decision(mutations, Committed(commit_ts))


def predicted_locked_row(key: bytes, columns: Iterable[str], start_ts: int, lock_values: dict[str, bytes], guard: bytes) -> Row:
    """The snapshot a row is known to be in right after our prewrite applied there.

    Passed as the commit's ``guess``: if the row's guard is still the one our prewrite set,
    nothing has changed, our locks are there and commit needs no read.
    """
    return Row(key, [Cell(LOCK, qualifier(c), start_ts, lock_values[c]) for c in columns], guard)
