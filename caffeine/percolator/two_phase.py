"""The two-phase commit of one transaction, driven by this client (the paper's Figure 6).

Layer: percolator. Internal. ``Transaction.commit`` runs the steps in order; tests stop a
commit between them through ``caffeine.percolator.testing``:

    prewrite()             lock every written cell: the primary's row first, then the other
                           rows (refreshing the primary's lock time meanwhile, once it is half
                           its TTL old, so a long prewrite is never taken for an abandoned one)
    commit_primary()       commit_ts from the oracle; committing the primary is the commit
                           point (atomic: one row step)
    commit_secondaries()   the other rows; a crash here is harmless, readers roll the
                           remaining locks forward

Which rows, in which order, and what each answer means is decided here; how a row step
reaches HBase is the ``Committer``'s business (``committer.py``; the backends in
``backends/``: compare-and-set from the client, or the coprocessor). Contract on faults: once the primary's commit may have been
sent, the outcome is ``UNDETERMINED`` until the primary is read back; a secondary is never
rolled back unless the primary was rolled back first.
"""

from __future__ import annotations

import enum
import logging
import time
from concurrent.futures import Future, wait as wait_futures
from typing import Callable

from caffeine.percolator import steps
from caffeine.percolator.errors import CommitConflict, CommitUnknown, TransactionClosed, TransactionRolledBack
from caffeine.percolator.host import TransactionHost
from caffeine.percolator.layout import LOCK, NOTIFY, qualifier
from caffeine.percolator.records import CellRef, Committed, Lock, Locked, RolledBack, encode_notify
from caffeine.percolator.write_buffer import RowKey, WriteBuffer
from caffeine.storage import Decision, DeleteUpTo, Put, ReadSpec, Row

log = logging.getLogger(__name__)

_PREWRITE_LOCK_RETRIES = 5


class State(enum.Enum):
    ACTIVE = "active"
    PREWRITTEN = "prewritten"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    # The primary's commit may have been applied and reading it back failed: committed or
    # rolled back, not known here. Never rolled back from this state without the primary
    # proven rolled back first.
    UNDETERMINED = "undetermined"


class TwoPhaseCommit:
    """The commit of ``buffer``'s writes for the transaction at ``start_ts``.

    ``on_finished()`` is called once, when the outcome is final (committed or rolled back),
    or when the commit's outcome cannot be settled (``CommitUnknown``)."""

    def __init__(self, host: TransactionHost, start_ts: int, buffer: WriteBuffer, on_finished: Callable[[], None]) -> None:
        self.host = host
        self.start_ts = start_ts
        self.buffer = buffer
        self._on_finished = on_finished
        self.state = State.ACTIVE
        self.commit_ts: int | None = None
        # (table, row) -> the row's guard right after our prewrite, and our lock values:
        # lets commit skip its read when nothing touched the row since.
        self.prewritten: dict[RowKey, tuple[bytes, dict[str, bytes]]] = {}
        # Rows whose prewrite was sent: on abort all of them are rolled back, since a prewrite
        # that failed with an error (not a conflict) may still have landed.
        self.attempted: set[RowKey] = set()
        # Once the primary's commit may have been sent, only the primary's state (read back)
        # tells whether this transaction committed.
        self._commit_sent = False
        self.started_ms = 0        # when prewrite began: the locks' wall time
        self._primary_fresh_ms = 0  # when the primary lock's TTL clock last (re)started
        self._clear_at_commit: tuple[str, bytes, DeleteUpTo] | None = None
        self.notification_cleared = False
        # (table, row) -> columns whose notifications this commit does not write: observers
        # that ran inside this transaction (``skip_notification``).
        self._skipped_notes: dict[RowKey, set[str]] = {}

    @property
    def primary(self) -> CellRef | None:
        return self.buffer.primary

    def _finished(self) -> None:
        callback, self._on_finished = self._on_finished, None
        if callback is not None:
            callback()

    # -- a transaction without locks ------------------------------------------------------------
    def commit_unlocked(self) -> None:
        """Commit a transaction that wrote no data: its notifications alone are written,
        without a commit point (a worker finds no primary named in them and simply runs the
        observers), at a fresh timestamp: newer than any observer run that started before."""
        if self.buffer.notifies:
            self._put_notifications(self.buffer.notifies, self.host.oracle.get_timestamp(), b"")
        self.state = State.COMMITTED
        self._finished()

    # -- phase one -----------------------------------------------------------------------------
    def prewrite(self) -> None:
        if self.state is not State.ACTIVE:
            raise TransactionClosed(f"transaction {self.start_ts} is {self.state.value}")
        if not self.buffer:
            raise TransactionClosed("nothing to prewrite")
        self.started_ms = self._primary_fresh_ms = time.time_ns() // 1_000_000
        primary_key = self.buffer.primary_key
        try:
            # The primary's row first: if it conflicts we abort before locking anything else.
            # (The compare-and-set backend reads every row in one batch first, so each row's
            # prewrite needs only its compare-and-set.)
            rows = self.buffer.rows
            guesses = (
                self._read_for_prewrite(list(rows))
                if len(rows) > 1 and self.host.committer.reads_before_prewrite else {}
            )
            self.prewrite_rows([primary_key], guesses)
            others = [key for key in rows if key != primary_key]
            # The primary lock is refreshed while the others are written, once it is half its
            # TTL old (the paper's "workers periodically update this wall time while
            # committing"): locking thousands of rows on a busy machine outlives the TTL, and
            # cleaners would otherwise roll back a live transaction each time it retried.
            if others:
                self.prewrite_rows(others, guesses, keepalive=self._keep_primary_alive)
        except BaseException:
            self.rollback_prewritten()
            raise
        self.state = State.PREWRITTEN

    def _read_for_prewrite(self, keys: list[RowKey]) -> dict[RowKey, Row]:
        """One batched read per table of the rows about to be prewritten: each row's
        prewrite then decides on its snapshot and needs only its compare-and-set."""
        by_table: dict[str, dict[bytes, ReadSpec]] = {}
        for table, row in keys:
            by_table.setdefault(table, {})[row] = steps.prewrite_spec(self.buffer.rows[(table, row)])
        out = {}
        for table, specs in by_table.items():
            for row, snapshot in self.host.store.read_rows_guarded(table, specs).items():
                out[(table, row)] = snapshot
        return out

    def lock_values(self, key: RowKey) -> dict[str, bytes]:
        """The encoded lock of each column this transaction writes in the row."""
        return self.buffer.lock_values(
            key, self.start_ts, self.host.settings.lock_ttl_ms, self.host.owners.owner, self.started_ms
        )

    def prewrite_rows(self, keys: list[RowKey], guesses=None, *, keepalive=None) -> None:
        """Prewrite the rows through the committer, settling other transactions' locks met
        on the way (and trying those rows again); raises on a conflict or a rollback."""
        host = self.host
        guesses = guesses or {}
        if not self.started_ms:
            self.started_ms = self._primary_fresh_ms = time.time_ns() // 1_000_000
        for _ in range(_PREWRITE_LOCK_RETRIES):
            results = host.committer.prewrite(self, keys, guesses, keepalive=keepalive)
            guesses = {}
            retry = []
            for (table, row), result in sorted(results.items()):
                if isinstance(result, steps.Prewritten):
                    continue
                if isinstance(result, steps.WriteConflict):
                    host.stats.bump("write_conflicts")
                    raise CommitConflict(
                        f"{table}/{row!r}/{result.column}: written by a transaction that committed at "
                        f"{result.commit_ts}, after this one started at {self.start_ts}",
                        cell=CellRef(table, row, result.column), reason="write after start",
                    )
                if isinstance(result, RolledBack):
                    raise TransactionRolledBack(
                        f"transaction {self.start_ts} was rolled back by a cleaner before it prewrote {table}/{row!r}",
                        reason="rolled back",
                    )
                # KeyLocked: settle the other transaction; wait for nobody (the paper aborts
                # on a live lock: retrying later is cheaper than a distributed wait).
                cell = CellRef(table, row, result.column)
                host.check_snapshot(self.start_ts)
                status = host.resolver.resolve(cell, result.lock)
                if isinstance(status, Locked):
                    host.stats.bump("lock_conflicts")
                    raise CommitConflict(
                        f"{cell}: locked by live transaction {result.lock.start_ts}",
                        cell=cell, reason="locked",
                    )
                retry.append((table, row))
            if not retry:
                return
            keys = retry
        raise CommitConflict(f"{keys[0][0]}/{keys[0][1]!r}: kept meeting fresh locks", reason="locked")

    # -- phase two -----------------------------------------------------------------------------
    def commit_primary(self) -> int:
        """The commit point. Returns commit_ts; raises TransactionRolledBack if too late."""
        if self.state is not State.PREWRITTEN:
            raise TransactionClosed(f"commit_primary needs a prewritten transaction, not {self.state.value}")
        host = self.host
        # Prewrite's conflict checks were against write records GC keeps only at or above
        # the safe point; a transaction that fell below it must not commit.
        host.check_snapshot(self.start_ts)
        self._refresh_primary_if_old()
        commit_ts = host.oracle.get_timestamp()
        primary = self.buffer.primary
        key = self.buffer.primary_key
        # Notifications at commit_ts, before the commit point: the primary's row's ride with
        # the commit itself, the others go just before it. So a notify cell's versions are
        # ordered like the commits they announce, and a worker run whose snapshot is at or
        # above a version sees every change announced at or below it (or meets its lock and
        # waits): clearing "up to the version handled" can then never drop an unobserved
        # change, and no crash between the commit point and a later write can lose one.
        value = encode_notify(primary, self.start_ts)
        primary_notes = self._leased_notifications(key, commit_ts, value)
        notify_puts = [Put(NOTIFY, qualifier(c), commit_ts, value) for c in sorted(primary_notes)]
        self._commit_sent = True
        try:
            result = self.commit_row(key, commit_ts, notify_puts)
        except BaseException as exc:
            # The commit may have applied (a lost reply that could not be re-read, an error
            # after apply, an interrupt): settle it at the primary before anything else.
            self.state = State.UNDETERMINED
            result = self._settle_or_raise(exc)
        if isinstance(result, Committed):
            self.commit_ts = result.commit_ts
            self.state = State.COMMITTED
            self._finished()
            return self.commit_ts
        # The primary is rolled back (a cleaner did it, or our settling did): so may the rest.
        self.rollback_prewritten()
        raise TransactionRolledBack(
            f"transaction {self.start_ts} was rolled back before its commit point",
            cell=primary, reason="rolled back",
        )

    def _leased_notifications(self, key: RowKey, commit_ts: int, value: bytes) -> set[str]:
        """Write the notifications of every row but the primary's and return the primary
        row's, all from a copy of the observer registry whose lease still holds once those
        are written: the commit point is then sent within the lease, so an install that has
        returned is never missed (``caffeine.percolator.registry``). A copy that ran out
        meanwhile is renewed, and what the renewed one adds is written too."""
        written: dict[RowKey, set[str]] = {}
        primary_notes: set[str] = set()
        while True:
            view = self.host.observed_view()
            notes = self.buffer.notifications(view.columns)
            for k, skipped in self._skipped_notes.items():
                if k in notes:
                    notes[k] -= skipped
            primary_notes |= notes.pop(key, set())
            missing = {k: cols - written.get(k, set()) for k, cols in notes.items()}
            missing = {k: cols for k, cols in missing.items() if cols}
            if missing:
                self._put_notifications(missing, commit_ts, value)
                for k, cols in missing.items():
                    written.setdefault(k, set()).update(cols)
            if time.monotonic() < view.valid_until:
                return primary_notes

    def _settle_or_raise(self, cause: BaseException) -> Committed | RolledBack:
        """The transaction's fate read back at its primary (rolling the primary back if it
        is not committed); ``CommitUnknown`` if even that fails. The secondaries are left as
        they are until the primary is settled: readers settle them through it."""
        primary = self.buffer.primary
        try:
            return self.host.resolver.settle(primary, self.start_ts)
        except Exception as exc:
            self.host.stats.bump("commits_unknown")
            self._finished()
            raise CommitUnknown(
                f"transaction {self.start_ts}: the commit of its primary {primary} may have "
                f"applied ({type(cause).__name__}: {cause}), and reading it back failed "
                f"({type(exc).__name__}: {exc}); it is committed or rolled back as a whole, and "
                f"readers will settle it: do not run it again",
                start_ts=self.start_ts, primary=primary,
            ) from exc

    def commit_secondaries(self) -> None:
        """Commit the other rows, one call of the committer per table; failures are logged,
        since readers roll them forward.

        Once the primary is committed, the only thing anyone may do to our secondary locks is
        roll them forward to exactly this write record, so committing them is idempotent and
        needs no decision here: the committer sends them blind (compare-and-set backend) or
        as checked commit steps (coprocessor), whichever costs it fewer round trips.
        """
        if self.state is not State.COMMITTED or self.commit_ts is None:
            raise TransactionClosed("commit_secondaries needs a committed primary")
        primary_key = self.buffer.primary_key
        by_table: dict[str, list[bytes]] = {}
        for table, row in self.buffer.rows:
            if (table, row) != primary_key:
                by_table.setdefault(table, []).append(row)
        for table, rows in by_table.items():
            try:
                self.host.committer.commit_secondaries(self, table, rows, self.commit_ts)
            except Exception as exc:  # committed already; readers will roll the rest forward
                log.warning("secondaries in %s of committed transaction %d not all committed (%s); "
                            "readers will roll them forward", table, self.start_ts, exc)

    def clear_notification_at_commit(self, table: str, row: bytes, column: str, notify_ts: int) -> None:
        """Delete the notify cell versions up to ``notify_ts`` in the same atomic row write as
        the commit point, if the primary is in that row (``notification_cleared`` then says
        it happened)."""
        self._clear_at_commit = (table, row, DeleteUpTo(NOTIFY, qualifier(column), notify_ts))

    def skip_notification(self, table: str, row: bytes, column: str) -> None:
        """Do not write the notification of ``column`` this transaction's write would set: its
        observers ran inside this transaction. The same as writing it and deleting it at the
        commit point: a run at this snapshot saw every change of the column committed before,
        and none can commit between this start_ts and this commit_ts (it would conflict)."""
        self._skipped_notes.setdefault((table, row), set()).add(column)

    def commit_row(self, key: RowKey, commit_ts: int, notify_puts: list[Put] = ()):
        """Commit one row at ``commit_ts`` (the primary's: the commit point) through the
        committer; returns ``Committed`` or ``RolledBack``."""
        extra = self._clear_at_commit
        piggyback = extra is not None and (extra[0], extra[1]) == key
        mutations = [*notify_puts, extra[2]] if piggyback else list(notify_puts)
        result, applied = self.host.committer.commit_row(self, key, commit_ts, mutations)
        if piggyback and applied:
            self.notification_cleared = True
        return result

    def _put_notifications(self, notes: dict[RowKey, set[str]], ts: int, value: bytes) -> None:
        """One put_rows per table; idempotent (explicit timestamps), so safe to resend."""
        by_table: dict[str, dict[bytes, list[Put]]] = {}
        for (table, row), columns in notes.items():
            by_table.setdefault(table, {})[row] = [Put(NOTIFY, qualifier(c), ts, value) for c in sorted(columns)]
        for table, rows in by_table.items():
            self.host.store.put_rows(table, rows)

    def _refresh_primary_if_old(self) -> bool:
        """Once the primary lock is half its TTL old, refresh it, so cleaners that judge by
        TTL keep waiting for this live transaction. False: the lock is gone (a cleaner
        rolled the transaction back)."""
        now_ms = time.time_ns() // 1_000_000
        ttl = self.host.settings.lock_ttl_ms
        if now_ms - self._primary_fresh_ms < ttl // 2:
            return True
        p = self.buffer.primary
        q = qualifier(p.column)

        def refresh(snapshot):
            lock = steps.common.lock_of(snapshot, q)
            if lock is None or lock.start_ts != self.start_ts:
                return Decision((), False)
            fresh = Lock(lock.start_ts, lock.kind, lock.primary, lock.ttl_ms, lock.owner, refreshed_ms=now_ms)
            return Decision([Put(LOCK, q, self.start_ts, fresh.encode())], True)

        refreshed = self.host.store.row_transaction(
            p.table, p.row, steps.commit_spec([p.column], self.start_ts), refresh
        )
        # Our guessed snapshot of the primary row is stale now; commit will read.
        key = (p.table, p.row)
        guard, locks = self.prewritten[key]
        self.prewritten[key] = (b"", locks)
        if refreshed:
            self._primary_fresh_ms = now_ms
        return refreshed

    def _keep_primary_alive(self) -> None:
        if not self._refresh_primary_if_old():
            raise TransactionRolledBack(
                f"transaction {self.start_ts} was rolled back by a cleaner while it prewrote",
                cell=self.buffer.primary, reason="rolled back",
            )

    # -- rolling back ----------------------------------------------------------------------------
    def rollback(self) -> None:
        """Abandon the transaction: nothing it wrote becomes visible. Idempotent.

        Of an ``UNDETERMINED`` transaction it settles the fate at the primary first: rolled
        back only if the primary is; if the primary turns out committed, the transaction
        stays committed (its secondaries are committed too) and ``state`` says so; if the
        primary still cannot be read, nothing is touched and readers settle it later. A
        rollback never undoes a commit."""
        if self.state is State.COMMITTED:
            raise TransactionClosed("cannot roll back a committed transaction")
        if self.state is State.ROLLED_BACK:
            return
        if self.state is State.UNDETERMINED:
            try:
                status = self.host.resolver.settle(self.buffer.primary, self.start_ts)
            except Exception as exc:
                log.warning("transaction %d is still undetermined (%s); readers will settle it", self.start_ts, exc)
                return
            if isinstance(status, Committed):
                self.commit_ts, self.state = status.commit_ts, State.COMMITTED
                self.commit_secondaries()
                return
        self.rollback_prewritten()

    def rollback_prewritten(self) -> None:
        """Roll back every row whose prewrite was sent: the primary first, and the others
        only once the primary is proven rolled back (a secondary rolled back under a
        committed primary would split the transaction)."""
        self.state = State.ROLLED_BACK
        self._finished()
        if not self.attempted:
            return
        primary = self.buffer.primary
        primary_key = self.buffer.primary_key
        if primary_key in self.attempted:
            try:
                status = self.host.resolver.settle(primary, self.start_ts)
            except Exception as exc:  # our locks stay; cleaners settle them via the primary
                log.warning("rolling back the primary %s of transaction %d failed: %s; "
                            "its locks are left to cleaners", primary, self.start_ts, exc)
                return
            if isinstance(status, Committed):
                # Only reachable once our commit was sent: it applied after all.
                if not self._commit_sent:
                    raise AssertionError(f"transaction {self.start_ts} committed without a commit")
                self.commit_ts, self.state = status.commit_ts, State.COMMITTED
                self.commit_secondaries()
                return

        committer = self.host.committer

        def rollback_row(key):
            table, row = key
            try:
                committer.rollback_row(self, key)
            except Exception as exc:  # our locks stay; cleaners will roll them back
                log.warning("rolling back %s/%r of transaction %d failed: %s", table, row, self.start_ts, exc)

        self.in_parallel(rollback_row, sorted(self.attempted - {primary_key}))
        self.prewritten.clear()
        self.attempted.clear()

    # -- plumbing ----------------------------------------------------------------------------------
    def in_parallel(self, fn, keys, *, keepalive=None) -> None:
        """``fn(key)`` for every key on the commit executor; the first error is raised once
        all are done. ``keepalive()``, if given, is called every quarter lock TTL meanwhile."""
        if len(keys) <= 1 and keepalive is None:
            for key in keys:
                fn(key)
            return
        # The executor's threads work for this caller: in its store's gang while they do
        # (their calls combine with the other members'), the caller waiting meanwhile.
        lockstep = self.host.store.lockstep

        def as_member(key):
            with lockstep.member(enlisted=True):
                return fn(key)

        lockstep.enlist(len(keys))
        futures: list[Future] = [self.host.executor.submit(as_member, key) for key in keys]
        if keepalive is not None:
            pending = set(futures)
            tick = self.host.settings.lock_ttl_ms / 4000
            while pending:
                with lockstep.waiting():
                    _, pending = wait_futures(pending, timeout=tick)
                if pending:
                    try:
                        keepalive()
                    except BaseException:
                        lockstep.discharge(sum(f.cancel() for f in pending))
                        wait_futures(pending)
                        raise
        else:
            with lockstep.waiting():
                wait_futures(futures)
        errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error
