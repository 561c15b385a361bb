"""What a transaction needs from the cluster it runs in, as an interface.

Layer: percolator. Internal. ``Cluster`` provides it; the snapshot reader, the write buffer's
committer and ``Transaction`` depend on this protocol only, never on ``cluster.py``, so the
cluster can import the transaction without an import circle.
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import Iterable, Protocol

from caffeine.config import Settings
from caffeine.percolator.committer import Committer
from caffeine.percolator.owners import OwnerRegistry
from caffeine.percolator.registry import ObservedView
from caffeine.percolator.resolver import LockResolver
from caffeine.percolator.serving import ServingTable
from caffeine.storage import Store, StoreStats


class TimestampSource(Protocol):
    def get_timestamp(self) -> int: ...


class TransactionHost(Protocol):
    """The services of one connection to a deployment (``Cluster``)."""

    settings: Settings
    store: Store
    oracle: TimestampSource
    stats: StoreStats
    owners: OwnerRegistry
    resolver: LockResolver
    committer: Committer
    executor: Executor

    def check_snapshot(self, start_ts: int) -> None:
        """Raise ``SnapshotTooOld`` if ``start_ts`` is below the GC safe point."""

    def notify_columns(self, table: str, columns: Iterable[str]) -> list[str]:
        """The columns among ``columns`` that observers watch in ``table``."""

    def observed_view(self) -> ObservedView:
        """The observed columns from a leased copy, and until when it may be used."""

    def serving(self, name: str, families: Iterable[str], *, create: bool = True) -> ServingTable:
        """A non-transactional serving table."""

    def release(self, handle: object) -> None:
        """``handle`` (a transaction or snapshot) is finished: it no longer holds GC's horizon."""
