"""Lazy lock cleanup: whoever meets a lock asks its primary, then rolls forward or back.

Layer: percolator. Internal (storage I/O + the pure steps). The paper's Section 2.2:

- primary committed  -> roll the met lock forward (commit it at the primary's commit_ts);
- primary rolled back, or abandoned (owner dead or TTL run out) -> the primary is rolled back
  first (with a rollback record, so the owner can never commit it late), then the met lock;
- primary locked by a live owner -> ``Locked``: the caller backs off and reads again.

The order matters: the primary decides, and it is always settled before any secondary is
touched, so a transaction is never half-committed in a way a reader could observe.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from caffeine.percolator import steps
from caffeine.percolator.history import committed_at
from caffeine.percolator.layout import LOCK, qualifier
from caffeine.percolator.owners import OwnerRegistry
from caffeine.percolator.records import CellRef, Collected, Committed, Kind, Lock, Locked, RolledBack, TxnStatus
from caffeine.storage import Decision, Store, StoreStats

log = logging.getLogger(__name__)


class LockResolver:
    def __init__(
        self,
        store: Store,
        owners: OwnerRegistry,
        *,
        stats: StoreStats,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.store = store
        self.owners = owners
        self.stats = stats
        self._now = wall_clock_ms

    def primary_status(self, lock: Lock) -> TxnStatus:
        """Settle the transaction at its primary: Committed, RolledBack, Locked (live), or
        Collected (settled before the GC safe point, its record since deleted)."""
        p = lock.primary
        if lock.start_ts < self.owners.safe_point():
            # GC resolved every lock below its safe point before publishing it, and may have
            # deleted this transaction's record since. Finding neither lock nor record then
            # means "settled long ago", not "never committed": fencing it off with a
            # rollback record would misreport a commit (the lock in hand is a stale read).
            snapshot = self.store.read_row(p.table, p.row, steps.check_txn_status_spec(p.column, lock.start_ts))
            q = qualifier(p.column)
            own_lock = steps.common.lock_of(snapshot, q)
            if (own_lock is None or own_lock.start_ts != lock.start_ts) and steps.common.own_write(snapshot, q, lock.start_ts) is None:
                return Collected()
        alive = self.owners.is_alive(lock.owner)
        now = self._now()
        spec = steps.check_txn_status_spec(p.column, lock.start_ts)

        def decide(row, known_uncommitted=False):
            decision = steps.check_txn_status(
                row, p.column, start_ts=lock.start_ts, now_ms=now, owner_alive=alive,
                known_uncommitted=known_uncommitted,
            )
            if (isinstance(decision.result, RolledBack) and decision.mutations
                    and steps.common.lock_of(row, qualifier(p.column)) is None
                    and lock.start_ts < self.owners.safe_point()):
                # A fence for a transaction GC settled (and collected) while we were
                # reading: the same case as above, met after the check. (The safe point is
                # re-read here only if our copy is older than its max age, i.e. only when
                # this read came after a pause long enough for GC to have collected.)
                return Decision((), Collected())
            return decision

        status = self.store.row_transaction(p.table, p.row, spec, decide)
        if isinstance(status, steps.Inconclusive):
            commit_ts = committed_at(self.store, p, lock.start_ts)
            if commit_ts is not None:
                return Committed(commit_ts)
            status = self.store.row_transaction(
                p.table, p.row, spec, lambda row: decide(row, known_uncommitted=True)
            )
        if isinstance(status, RolledBack):
            self.stats.bump("txn_rolled_back_by_cleanup")
        return status

    def settle(self, primary: CellRef, start_ts: int) -> Committed | RolledBack:
        """Decide the fate of a transaction at its primary, whoever owns it: ``Committed`` if
        the primary has its commit record, else roll the primary back (a rollback record
        fences off a commit still in flight) and ``RolledBack``.

        For the owner itself, when its own commit's outcome is unknown, and before it rolls
        back any secondary: only a primary proven rolled back makes that safe. Storage errors
        propagate (the fate is then still open)."""
        spec = steps.rollback_spec([primary.column], start_ts)

        def decide(row, known_uncommitted=False):
            return steps.rollback(row, [primary.column], start_ts=start_ts, known_uncommitted=known_uncommitted)

        status = self.store.row_transaction(primary.table, primary.row, spec, decide)
        if isinstance(status, steps.Inconclusive):
            commit_ts = committed_at(self.store, primary, start_ts)
            if commit_ts is not None:
                return Committed(commit_ts)
            status = self.store.row_transaction(
                primary.table, primary.row, spec, lambda row: decide(row, known_uncommitted=True)
            )
        return status

    def status_of(self, primary: CellRef, start_ts: int) -> TxnStatus:
        """The status of the transaction with this primary and start_ts (owner unknown: a
        pending one is judged by its lock's own owner and TTL)."""
        q = qualifier(primary.column)
        snapshot = self.store.read_row(primary.table, primary.row, steps.check_txn_status_spec(primary.column, start_ts))
        lock_cell = snapshot.latest(LOCK, q)
        if lock_cell is not None and lock_cell.ts == start_ts:
            return self.primary_status(Lock.decode(lock_cell.ts, lock_cell.value))
        # No lock: usually settled, and the same read shows how (one round trip).
        found = steps.common.own_write(snapshot, q, start_ts)
        if isinstance(found, tuple):
            return RolledBack() if found[1].is_rollback else Committed(found[0])
        # Nothing there (never prewritten, or the read was cut off): the check decides and
        # fences the transaction off if need be.
        return self.primary_status(Lock(start_ts, Kind.PUT, primary, 0, b""))

    def resolve(self, cell: CellRef, lock: Lock) -> TxnStatus:
        """Settle the lock met on ``cell``; returns the owning transaction's status.

        ``Collected`` (the lock is below the GC safe point and its primary holds neither its
        lock nor a record for it): the lock, if it is still there, is rolled back. GC settles
        every lock at or below its horizon, in every table, before it publishes the safe
        point, and a transaction below the safe point can no longer commit; so a lock that
        outlived both belongs to a transaction that never committed: a prewrite that landed
        after GC's settling (a client paused past its grace between its safe-point check and
        its write). docs/FAULTS.md has the argument, and the one case it cannot cover (a
        deployment whose safe point an older GC published after settling only some tables)."""
        status = self.primary_status(lock)
        if cell == lock.primary or isinstance(status, Locked):
            return status
        spec = steps.commit_spec([cell.column], lock.start_ts)
        if isinstance(status, Collected):
            self._roll_back_orphan(cell, lock, spec)
            return status
        if isinstance(status, Committed):
            self.stats.bump("locks_rolled_forward")
            self.store.row_transaction(
                cell.table, cell.row, spec,
                lambda row: steps.commit(row, [cell.column], start_ts=lock.start_ts, commit_ts=status.commit_ts),
            )
        else:
            self.stats.bump("locks_rolled_back")
            self.store.row_transaction(
                cell.table, cell.row, spec,
                lambda row: steps.rollback(row, [cell.column], start_ts=lock.start_ts),
            )
        return status

    def _roll_back_orphan(self, cell: CellRef, lock: Lock, spec) -> None:
        """Roll back ``lock`` on ``cell`` if it is still there (the one in hand may be a stale
        read of a lock settled since, whose record GC may have collected: then nothing is
        written, not even a fence)."""
        rolled = []

        def decide(row):
            decision = steps.rollback(row, [cell.column], start_ts=lock.start_ts, only_locked=True)
            rolled[:] = [bool(decision.mutations)]
            return decision

        self.store.row_transaction(cell.table, cell.row, spec, decide)
        if rolled and rolled[0]:
            self.stats.bump("orphan_locks_rolled_back")
            log.warning("rolled back %s's lock of transaction %d: below the GC safe point, and its primary %s "
                        "holds neither its lock nor a record of it (docs/FAULTS.md)", cell, lock.start_ts, lock.primary)
