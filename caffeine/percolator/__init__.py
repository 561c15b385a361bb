"""Caffeine's public transaction API: Percolator's cross-row, snapshot-isolated transactions.

Layer: percolator. Public. Observers, the crawler, the API and tests import only these
names; everything else in the package is internal and may change.

    from caffeine.percolator import connect, CommitConflict
    cluster = connect()
    with cluster.begin() as txn:                       # commits on exit, rolls back on error
        canonical = txn.get("dups", h, "canonical-url")
        txn.set("dups", h, "canonical-url", url)
    cluster.run(lambda txn: ...)                        # retried on CommitConflict
    with cluster.snapshot() as snap:                   # read-only, at one timestamp
        snap.get("dups", h, "canonical-url")

Observers (code run when a column changes) are declared with ``Observer`` and wired in one
``Application``; ``caffeine worker`` runs them.

Rows and values are bytes (str accepted and encoded as UTF-8); tables and columns are str.
"""

from caffeine.oracle.errors import OracleUnavailable
from caffeine.percolator.cluster import Cluster, connect
from caffeine.percolator.errors import (
    CommitConflict,
    CommitUnknown,
    LockWaitTimeout,
    SnapshotTooOld,
    TransactionClosed,
    TransactionError,
    TransactionRolledBack,
)
from caffeine.percolator.observer import Application, Observer
from caffeine.percolator.serving import ServingTable
from caffeine.percolator.snapshot import Snapshot
from caffeine.percolator.transaction import Transaction

__all__ = [
    "connect",
    "Cluster",
    "Transaction",
    "Snapshot",
    "TransactionError",
    "CommitConflict",
    "TransactionRolledBack",
    "CommitUnknown",
    "SnapshotTooOld",
    "LockWaitTimeout",
    "TransactionClosed",
    "OracleUnavailable",
    "Observer",
    "Application",
    "ServingTable",
]
