"""Errors of the transaction layer.

Layer: percolator (public: re-exported by ``caffeine.percolator``)::

    CaffeineError
    └── TransactionError
        ├── CommitConflict           the transaction did not commit; running it again may
        │   │                        (``Cluster.run`` does, with backoff)
        │   └── TransactionRolledBack    a cleaner rolled it back first (it looked abandoned)
        ├── LockWaitTimeout          a read waited too long on a live transaction's lock
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


class LockWaitTimeout(TransactionError):
    """A read met a lock of a live transaction and it did not go away in time."""


class TransactionClosed(TransactionError):
    """An operation on a transaction that has already committed or rolled back."""
