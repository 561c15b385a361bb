"""Check a transaction's status at its primary, rolling it back if it was abandoned.

Layer: percolator. Protocol steps (pure). The primary decides a transaction's fate (the paper's
Section 2.2): whoever meets a lock asks the primary.

- primary locked by the transaction, owner gone or TTL run out -> roll the primary back
  (the rollback step's mutations) -> ``RolledBack()``;
- primary locked, owner alive and TTL not run out -> ``Locked(lock)``: wait;
- a commit record for start_ts -> ``Committed(commit_ts)``;
- a rollback record -> ``RolledBack()``;
- neither lock nor record: the primary's prewrite never landed (or is still in flight)
  -> write a rollback record so it can never land -> ``RolledBack()``.

``owner_alive`` is looked up by the caller (I/O) before this pure decision: True, False, or
None when the registry has no word (then the TTL alone decides).
"""

from __future__ import annotations

from caffeine.percolator.layout import qualifier
from caffeine.percolator.records import Locked
from caffeine.percolator.steps.common import lock_expired, lock_of
from caffeine.percolator.steps.rollback import rollback, rollback_spec
from caffeine.storage import Decision, ReadSpec, Row


def check_txn_status_spec(primary_column: str, start_ts: int) -> ReadSpec:
    return rollback_spec([primary_column], start_ts)


def check_txn_status(
    row: Row,
    primary_column: str,
    *,
    start_ts: int,
    now_ms: int,
    owner_alive: bool | None,
    known_uncommitted: bool = False,
) -> Decision:
    lock = lock_of(row, qualifier(primary_column))
    if lock is not None and lock.start_ts == start_ts:
        abandoned = owner_alive is False or lock_expired(lock, now_ms)
        if not abandoned:
            return Decision((), Locked(lock))
    # Our lock is gone or abandoned: rollback's own reading of the row is exactly the rest
    # of the decision (committed -> Committed, else fence off with a rollback record).
    decision = rollback(row, [primary_column], start_ts=start_ts, known_uncommitted=known_uncommitted)
    return decision
