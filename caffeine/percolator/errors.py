"""Errors of the transaction layer.

Layer: percolator. Public: re-exported by ``caffeine.percolator``::

    CaffeineError
    └── TransactionError
        ├── CommitConflict           the transaction did not commit; running it again may
        │   │                        (``Cluster.run`` does, with backoff)
        │   └── TransactionRolledBack    a cleaner rolled it back first (it looked abandoned)
        ├── CommitUnknown            the commit point may have been passed, and the
        │                            primary's state could not be read back to tell: the
        │                            transaction is committed or rolled back, never half;
        │                            never run its body again (it may have committed)
        ├── LockWaitTimeout          a read waited too long on a live transaction's lock
        ├── SnapshotTooOld           start_ts is below the GC safe point: versions it would
        │                            read may be gone; begin a new transaction
        └── TransactionClosed        the transaction was already committed or rolled back

States that are outcomes, not failures (committed, rolled back, locked), are values in
``caffeine.percolator.records``.
"""

from caffeine.errors import CaffeineError


class TransactionError(CaffeineError):
    """Base of the transaction layer's errors."""


class CommitConflict(TransactionError):
    """Lost a write-write conflict: a newer committed write, or a live lock, on a cell."""

    def __init__(self, message: str, *, cell=None, reason: str = "conflict"):
        super().__init__(message)
        self.cell = cell
        self.reason = reason


class TransactionRolledBack(CommitConflict):
    """Another client judged this transaction abandoned and rolled it back."""


class CommitUnknown(TransactionError):
    """The commit of the primary may have been applied, and reading the primary back to
    settle it failed too (the store unreachable). The transaction is atomic either way:
    readers settle it through its primary. ``start_ts`` and ``primary`` name it."""

    def __init__(self, message: str, *, start_ts: int, primary=None):
        super().__init__(message)
        self.start_ts = start_ts
        self.primary = primary


class SnapshotTooOld(TransactionError):
    """The transaction's start_ts is below the GC safe point: what it would read may have
    been collected, so it may neither read nor commit."""


class LockWaitTimeout(TransactionError):
    """A read met a lock of a live transaction and it did not go away in time."""


class TransactionClosed(TransactionError):
    """An operation on a transaction that has already committed or rolled back."""
