"""Storage: one interface over HBase, used by the protocol and nothing else above it.

Layer: storage. Imports ``caffeine.config`` and ``caffeine.errors``; the Thrift2 IDL ships
in ``caffeine/storage/thrift``, see ``caffeine.storage.idl``. See ``caffeine.storage.base`` for the contract.
"""

from caffeine.config import Settings, load_settings
from caffeine.storage.base import Store
from caffeine.storage.errors import (
    OutcomeUnknown,
    ServerStepsUnavailable,
    RowTransactionAborted,
    StorageError,
    StorageUnavailable,
    TableExists,
    TableNotFound,
)
from caffeine.storage.common_cells import MAX_COMMON_ROWS, CommonCells
from caffeine.storage.model import (
    MAX_TS,
    Cell,
    CheckedWrite,
    Decision,
    Delete,
    DeleteUpTo,
    FamilySpec,
    Mutation,
    Put,
    PutFields,
    ReadSpec,
    Refusal,
    Row,
    StoreStats,
    as_bytes,
)
from caffeine.storage.row_prefix import MAX_PREFIX, RowPrefix
from caffeine.storage.shards import Shard, in_shard
from caffeine.storage.regions import Region

__all__ = [
    "MAX_COMMON_ROWS", "MAX_PREFIX", "MAX_TS", "Cell", "CheckedWrite", "CommonCells", "Decision", "Delete", "DeleteUpTo", "FamilySpec", "Mutation", "Put",
    "PutFields", "ReadSpec", "Refusal", "Region", "Row", "RowPrefix", "Shard", "Store", "StoreStats", "as_bytes", "in_shard", "open_store",
    "OutcomeUnknown", "RowTransactionAborted", "ServerStepsUnavailable", "StorageError", "StorageUnavailable",
    "TableExists", "TableNotFound",
]


def open_store(settings: Settings | None = None) -> Store:
    """The HBase store for ``settings`` (environment by default), combining the calls of
    concurrent callers unless ``settings.batching`` is off. Never the in-memory one."""
    from caffeine.storage.batching import BatchingStore
    from caffeine.storage.hbase import HBaseStore

    settings = settings or load_settings()
    store = HBaseStore(settings)
    if not settings.batching:
        return store
    return BatchingStore(store, linger_ms=settings.batch_linger_ms, lockstep_ms=settings.batch_lockstep_ms,
                         in_flight=settings.batch_calls_in_flight)
