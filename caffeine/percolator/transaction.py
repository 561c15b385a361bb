"""A snapshot-isolated, cross-row transaction, coordinated by this client.

Layer: percolator. Public class ``Transaction``; built by ``Cluster.begin``. Three parts,
one module each:

- reads at ``start_ts`` with the transaction's own writes overlaid: ``snapshot.py``
  (``SnapshotReader``; the same reads without writes are the public ``Snapshot``);
- the buffered writes, the first one the primary: ``write_buffer.py``;
- the two-phase commit that makes them visible atomically: ``two_phase.py``, whose row steps
  reach HBase through a ``Committer`` (``committer.py``).

Reads see the snapshot at start_ts plus this transaction's own buffered writes. A read that
meets a lock at or below start_ts resolves it (``LockResolver``) or waits for its live owner.
Writes are buffered until commit. ``with cluster.begin() as txn:`` commits on a normal exit
and rolls back on an exception. The commit's steps one at a time are for tests only
(``caffeine.percolator.testing``).

Isolation is snapshot isolation, not serializability: two transactions that read overlapping
data and write disjoint cells can both commit (write skew, G2-item). Everything stronger is
ruled out; ``tests/protocol/test_isolation.py`` names each anomaly.
"""

from __future__ import annotations

import weakref

from caffeine.percolator.errors import TransactionClosed
from caffeine.percolator.host import TransactionHost
from caffeine.percolator.records import CellRef
from caffeine.percolator.snapshot import SnapshotReader, SnapshotReads
from caffeine.percolator.two_phase import State, TwoPhaseCommit
from caffeine.percolator.write_buffer import DELETED, WriteBuffer
from caffeine.storage import as_bytes

__all__ = ["State", "Transaction"]


class Transaction(SnapshotReads):
    """Reads (``get``, ``get_row``, ``get_rows``, ``get_all``, ``get_all_rows``,
    ``present_columns``, ``scan``, ``committed_write``: see ``SnapshotReads``), buffered
    writes (``set``, ``delete``, ``notify``), and ``commit``/``rollback``.

    ``cluster`` is the connection it runs in (observers reach serving tables through it);
    ``read_only`` refuses writes (an observer's redo runs in such a transaction)."""

    def __init__(self, cluster: TransactionHost, start_ts: int, *, read_only: bool = False) -> None:
        self.cluster = cluster
        self.start_ts = start_ts
        self.read_only = read_only
        self._buffer = WriteBuffer()
        self._reader = SnapshotReader(cluster, start_ts, self._buffer)
        me = weakref.ref(self)  # the commit must not keep the transaction alive (GC's horizon)
        self._commit = TwoPhaseCommit(cluster, start_ts, self._buffer, lambda: _release(cluster, me))
        self._on_commit: list = []

    # -- state -------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        return self._commit.state

    @property
    def commit_ts(self) -> int | None:
        """The commit timestamp once committed (None before, and for read-only commits)."""
        return self._commit.commit_ts

    @property
    def primary(self) -> CellRef | None:
        return self._buffer.primary

    @property
    def written_cells(self) -> list[CellRef]:
        return self._buffer.cells()

    # -- writing -------------------------------------------------------------------------------
    def set(self, table: str, row: bytes | str, column: str, value: bytes | str) -> None:
        """Buffer a write; it becomes visible to others when the transaction commits."""
        self._write(table, as_bytes(row), column, as_bytes(value))

    def delete(self, table: str, row: bytes | str, column: str) -> None:
        self._write(table, as_bytes(row), column, DELETED)

    def _write(self, table: str, row: bytes, column: str, value: bytes | None) -> None:
        self._check_open()
        if self.read_only:
            raise TransactionClosed(f"transaction {self.start_ts} is a read-only snapshot")
        self._buffer.put(table, row, column, value)

    def notify(self, table: str, row: bytes | str, column: str) -> None:
        """Set a weak notification on (table, row, column) without writing data there.

        For hot spots: many transactions can notify one cell without conflicting, because
        nothing is locked. The notification is written at commit_ts before the commit point
        (and names this transaction), so a worker runs the column's observers once the
        commit is visible; if this transaction rolls back, the worker drops the notification.
        """
        self._check_open()
        self._buffer.notify(table, as_bytes(row), column)

    def on_commit(self, callback) -> None:
        """Run ``callback()`` after this transaction has committed (never if it did not).

        For side effects outside the transaction, such as idempotent writes to a serving
        table. A callback that raises fails ``commit()`` after the commit point: the data is
        committed and the caller (an observer worker) retries the side effect.
        """
        self._on_commit.append(callback)

    # -- committing ----------------------------------------------------------------------------
    def commit(self) -> int | None:
        """Prewrite, commit the primary, commit the secondaries; returns commit_ts.

        A transaction without data writes commits trivially and returns None. Raises
        CommitConflict (after cleaning up its own locks) when it loses a write-write
        conflict, TransactionRolledBack when a cleaner rolled it back before its commit
        point, and CommitUnknown when the commit's outcome could not be read back.
        """
        commit = self._commit
        if commit.state is State.ACTIVE:
            if not self._buffer:
                commit.commit_unlocked()
                self._run_on_commit()
                return None
            self._check_open()
            commit.prewrite()
        commit_ts = commit.commit_primary()
        commit.commit_secondaries()
        self._run_on_commit()
        return commit_ts

    def _run_on_commit(self) -> None:
        callbacks, self._on_commit = self._on_commit, []
        for callback in callbacks:
            callback()

    def rollback(self) -> None:
        """Abandon the transaction: nothing it wrote becomes visible. Idempotent.

        Of a transaction whose commit raised ``CommitUnknown`` it settles the fate at the
        primary first: rolled back only if the primary is; if the primary turns out
        committed, the transaction stays committed and ``state`` says so; if the primary
        still cannot be read, nothing is touched and readers settle it later. A rollback
        never undoes a commit."""
        self._commit.rollback()

    # -- plumbing ------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._commit.state is not State.ACTIVE:
            raise TransactionClosed(f"transaction {self.start_ts} is {self._commit.state.value}")
        # GC may have collected what this snapshot would read (a process paused past its
        # owner grace drops out of GC's horizon): fail loudly rather than read wrong data.
        self.cluster.check_snapshot(self.start_ts)

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            if self.state in (State.ACTIVE, State.PREWRITTEN):
                self.commit()
        elif self.state is not State.COMMITTED:
            self.rollback()

    def __repr__(self) -> str:
        return f"<Transaction start_ts={self.start_ts} {self.state.value} cells={len(self.written_cells)}>"


class ObserverRun(Transaction):
    """The transaction of one observer run (``worker.py``): a ``Transaction`` plus the hooks
    only the worker uses. Not part of the public API."""

    def change_and_values(
        self, table: str, row: bytes, column: str, columns: list[str]
    ) -> tuple[tuple[int, int] | None, dict[str, bytes | None]]:
        """``committed_write(column)`` and ``get_row(columns)`` of one row in one read when
        nothing is locked (the common case). The worker needs the observed change and the
        observer's ack before every run, and fetches the columns the observer declared it
        reads with them (later ``get_row`` calls of these columns are answered from this read)."""
        self._check_open()
        return self._reader.change_and_values(table, row, column, columns)

    def clear_notification_at_commit(self, table: str, row: bytes, column: str, notify_ts: int) -> None:
        """Delete the notify cell versions up to ``notify_ts`` in the same atomic row write as
        this transaction's commit point, when the primary is in that row (the worker makes
        it so by writing the ack first); ``notification_cleared`` then says it happened.
        Saves the worker a round trip per run; the deletion happens if and only if the
        transaction commits."""
        self._commit.clear_notification_at_commit(table, as_bytes(row), column, notify_ts)

    def fetched_later(self, table: str, row: bytes) -> set[str]:
        """The columns of the row this run read with reads of their own, after its first
        read (``change_and_values``): the worker prefetches them next time."""
        return set(self._reader.fetched.get((table, as_bytes(row)), ()))

    @property
    def notification_cleared(self) -> bool:
        return self._commit.notification_cleared

    def writes_only(self, table: str, row: bytes | str, column: str) -> bool:
        """Whether committing would write that one cell and nothing else: no other data write,
        no notification, no work after the commit."""
        return (not self._buffer.notifies and not self._on_commit
                and self._buffer.cells() == [CellRef(table, as_bytes(row), column)])

    def written_columns(self, table: str, row: bytes) -> dict[str, bytes | None]:
        """A copy of this run's buffered writes to one row, in first-write order (None: a
        delete): the worker finds the columns whose inline observers are due in it."""
        return dict(self._buffer.of_row(table, as_bytes(row)))

    def skip_notification(self, table: str, row: bytes, column: str) -> None:
        """Commit without the notification of ``column`` (its observers ran in this run)."""
        self._commit.skip_notification(table, as_bytes(row), column)

    @property
    def post_commit_work(self) -> int:
        """How many ``on_commit`` callbacks are waiting for the commit."""
        return len(self._on_commit)

    @property
    def has_post_commit_work(self) -> bool:
        """Whether ``on_commit`` callbacks are waiting for the commit."""
        return bool(self._on_commit)


def _release(cluster: TransactionHost, ref: "weakref.ref[Transaction]") -> None:
    txn = ref()
    if txn is not None:
        cluster.release(txn)
