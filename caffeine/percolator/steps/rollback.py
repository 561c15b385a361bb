"""Rollback: remove a transaction's locks and data in one row and fence it off for good.

Layer: percolator. Protocol steps (pure). Used by a transaction aborting itself and by cleaners that
judged its primary abandoned.

Per column: our lock there -> delete the lock and our data, and write a ROLLBACK record at
start_ts. (Notify cells are left alone: one the transaction wrote before its commit point
names it, and the worker drops it once it sees the transaction rolled back.) Without a lock, a rollback record is still written unless one
is there, so a prewrite of this transaction that arrives late (a slow or paused client)
fails (case 1 of prewrite). A committed record for start_ts means the transaction committed:
``Committed(commit_ts)`` and no mutation at all (rolling back a committed transaction fails).
Idempotent: a second call finds the rollback record and writes nothing.

``only_locked=True`` rolls back only the columns that still hold this transaction's lock and
writes nothing elsewhere (no fence): for a lock met below the GC safe point whose primary is
gone (``LockResolver.resolve``), where the lock in hand may be a stale read and the column
already settled, its record collected since.
"""

from __future__ import annotations

from typing import Iterable

from caffeine.percolator.layout import WRITE, qualifier
from caffeine.percolator.records import Committed, Kind, RolledBack, Write
from caffeine.percolator.steps.common import Inconclusive, lock_of, own_write, unlock_rolled_back
from caffeine.percolator.steps.commit import commit_spec
from caffeine.storage import Decision, Put, ReadSpec

def rollback_spec(columns: Iterable[str], start_ts: int) -> ReadSpec:
    return commit_spec(columns, start_ts)


def rollback(row, columns: Iterable[str], *, start_ts: int, known_uncommitted: bool = False,
             only_locked: bool = False) -> Decision:
    """``known_uncommitted``: the caller looked deeper and found no commit record (after an
    ``Inconclusive``); the step then trusts it instead of the cut-off snapshot.
    ``only_locked``: see the module docstring."""
    mutations = []
    for column in columns:
        q = qualifier(column)
        lock = lock_of(row, q)
        if lock is not None and lock.start_ts == start_ts:
            mutations += unlock_rolled_back(q, start_ts)
            mutations.append(Put(WRITE, q, start_ts, Write(Kind.ROLLBACK, start_ts).encode()))
            continue
        if only_locked:
            continue
        found = None if known_uncommitted else own_write(row, q, start_ts)
        if isinstance(found, Inconclusive):
            return Decision((), found)
        if found is not None:
            if not found[1].is_rollback:
                return Decision((), Committed(found[0]))
            continue
        mutations.append(Put(WRITE, q, start_ts, Write(Kind.ROLLBACK, start_ts).encode()))
    return Decision(mutations, RolledBack())
