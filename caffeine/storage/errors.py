"""Storage errors (see the tree in ``caffeine.errors``).

Layer: storage. ``OutcomeUnknown`` never leaves the storage layer: the row transaction resolves
it by re-reading the row.
"""

from caffeine.errors import CaffeineError


class StorageError(CaffeineError):
    """Something went wrong talking to the store."""


class TableNotFound(StorageError):
    def __init__(self, table: str):
        super().__init__(f"table {table!r} does not exist (create it with `caffeine tables create`)")
        self.table = table


class TableExists(StorageError):
    def __init__(self, table: str):
        super().__init__(f"table {table!r} already exists")
        self.table = table


class StorageUnavailable(StorageError):
    """A server did not answer within the bounded retries; says which one and why."""


class RowTransactionAborted(StorageError):
    """A row transaction lost its compare-and-set on every one of its bounded attempts."""

    def __init__(self, table: str, row: bytes, attempts: int):
        super().__init__(
            f"row transaction on {table!r} row {row!r} lost its compare-and-set "
            f"{attempts} times in a row; the row is too contended"
        )
        self.table, self.row, self.attempts = table, row, attempts


class OutcomeUnknown(StorageError):
    """A conditional write was sent but its outcome is unknown: the answer never came
    (timeout, dropped connection), or the server answered with an error that may have come
    after the write applied."""


class ServerStepsUnavailable(StorageError):
    """The store has no server-side row steps (no coprocessor loaded on this HBase, or a
    store that cannot run them): use the compare-and-set path instead."""
