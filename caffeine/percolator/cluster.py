"""A client's handle on Caffeine: storage, timestamp oracle, owner and observer registries,
lock resolver.

Layer: percolator. Public: ``connect``, ``Cluster``. One ``Cluster`` per process is the
intended use; it is safe for many threads, and its transactions share its connection pools,
its batched oracle client and its thread pool for parallel prewrites and commits.
"""

from __future__ import annotations

import random
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, Iterator, TypeVar

from caffeine.config import Settings, load_settings
from caffeine.percolator import backends, layout
from caffeine.percolator.errors import CommitConflict, CommitUnknown, SnapshotTooOld
from caffeine.percolator.committer import Committer
from caffeine.percolator.owners import TABLE as owners_table, OwnerRegistry
from caffeine.percolator.registry import AppConfig, ObservedView, ObserverRegistry
from caffeine.percolator.resolver import LockResolver
from caffeine.percolator.serving import ServingTable
from caffeine.percolator.host import TimestampSource
from caffeine.percolator.snapshot import Snapshot
from caffeine.percolator.transaction import ObserverRun, State, Transaction
from caffeine.storage import ReadSpec, Store, StoreStats

T = TypeVar("T")


class Cluster:
    """Build with ``connect()``; tests may pass their own store and oracle."""

    def __init__(
        self, store: Store, oracle: TimestampSource, settings: Settings | None = None, *, committer: Committer | None = None
    ) -> None:
        self.settings = settings or load_settings()
        self.store = store
        self.oracle = oracle
        self.stats: StoreStats = store.stats
        self._open: dict[int, int] = {}  # start_ts -> count of open transactions
        self._open_lock = threading.Lock()
        # The (table, column) pairs observers watch: writes to them also set notify cells.
        # A leased copy, renewed with every beat (see caffeine.percolator.registry).
        self.observer_registry = ObserverRegistry(store, max_age_ms=2 * self.settings.heartbeat_interval_ms)
        self.owners = OwnerRegistry(
            store,
            heartbeat_interval_ms=self.settings.heartbeat_interval_ms,
            owner_grace_ms=self.settings.owner_grace_ms,
            oldest_open_start_ts=self.oldest_open_start_ts,
            on_beat=self.observer_registry.refresh,
            registry_version=self.observer_registry.version,
        )
        self.observer_registry.attach(self.owners)
        self.observer_registry.refresh(self.owners.start())
        # After the owner registry: the probe writes to its table, which it has created.
        self.committer: Committer = committer or backends.choose(self.settings.committer, store, owners_table)
        self.resolver = LockResolver(store, self.owners, stats=self.stats)
        self.executor = ThreadPoolExecutor(self.settings.commit_threads, thread_name_prefix="caffeine-commit")
        self._serving: dict[tuple[str, tuple[str, ...]], ServingTable] = {}

    # -- transactions ------------------------------------------------------------------------
    def begin(self) -> Transaction:
        """A new transaction reading the snapshot at a fresh start_ts."""
        return self._register(Transaction(self, self.oracle.get_timestamp()))

    def snapshot(self, start_ts: int | None = None) -> Snapshot:
        """A read-only ``Snapshot`` at ``start_ts``: a timestamp this deployment's oracle
        issued earlier (typically another process's ``txn.start_ts``), or a fresh one.

        This is how several processes (the partitions of a Spark job) read one consistent
        snapshot: every commit not yet visible at ``start_ts`` gets a later commit_ts from
        the oracle, so the snapshot cannot change under them. It holds GC's horizon until
        ``close()`` (or the end of its ``with`` block).
        """
        ts = self.oracle.get_timestamp() if start_ts is None else start_ts
        return self._register(Snapshot(self, ts))

    def _begin_observer_run(self) -> ObserverRun:
        """``begin()`` for the worker: the transaction with the worker's hooks."""
        return self._register(ObserverRun(self, self.oracle.get_timestamp()))

    def _register(self, handle):
        """Count the transaction or snapshot as open (GC's horizon) until it finishes."""
        with self._open_lock:
            self._open[handle.start_ts] = self._open.get(handle.start_ts, 0) + 1
        # One dropped without commit, rollback or close must not pin GC's horizon forever.
        handle._open_token = weakref.finalize(handle, self._forget, handle.start_ts)
        return handle

    def release(self, handle) -> None:
        """Called once by a transaction or snapshot when it finishes."""
        if handle._open_token.detach() is not None:
            self._forget(handle.start_ts)

    def _forget(self, start_ts: int) -> None:
        with self._open_lock:
            count = self._open.get(start_ts, 0)
            if count <= 1:
                self._open.pop(start_ts, None)
            else:
                self._open[start_ts] = count - 1

    def check_snapshot(self, start_ts: int) -> None:
        """Raise SnapshotTooOld if ``start_ts`` is below the GC safe point."""
        safe_point = self.owners.safe_point()
        if start_ts < safe_point:
            raise SnapshotTooOld(
                f"transaction {start_ts} is below the GC safe point {safe_point}: versions it "
                f"would read may have been collected; begin a new transaction"
            )

    def oldest_open_start_ts(self) -> int | None:
        with self._open_lock:
            return min(self._open) if self._open else None

    def run(
        self,
        fn: Callable[[Transaction], T],
        *,
        max_attempts: int = 20,
        backoff_s: float = 0.005,
        max_backoff_s: float = 1.0,
    ) -> T:
        """Run ``fn(txn)`` in a transaction and commit; on CommitConflict run it again in a
        fresh transaction, with jittered exponential backoff, up to ``max_attempts`` times.

        Never runs ``fn`` again once a commit may have applied: ``CommitUnknown`` (the
        commit's outcome could not be read back) is raised to the caller as it is."""
        delay = backoff_s
        for attempt in range(1, max_attempts + 1):
            txn = self.begin()
            try:
                result = fn(txn)
                if txn.state in (State.ACTIVE, State.PREWRITTEN):
                    txn.commit()
                return result
            except CommitUnknown:
                # The commit may have applied: running the body again could apply it twice.
                raise
            except CommitConflict:
                if txn.state is not State.COMMITTED:
                    txn.rollback()
                if attempt == max_attempts:
                    raise
                self.stats.bump("txn_retries")
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, max_backoff_s)
            except BaseException:
                if txn.state is not State.COMMITTED:
                    txn.rollback()
                raise
        raise AssertionError("unreachable")

    # -- tables and observers ----------------------------------------------------------------
    def create_table(self, name: str, *, exist_ok: bool = True, split_policy: layout.SplitPolicy | None = None) -> bool:
        """Create a Percolator-managed table; True if it was created now. ``split_policy``: where
        to cut it into this deployment's ``Settings.regions_per_table`` regions
        (``layout.split_keys``); a table that exists keeps its regions."""
        keys = layout.split_keys(split_policy, name, self.settings)
        return layout.create_table(self.store, name, exist_ok=exist_ok, split_keys=keys)

    def row_keys(self, table: str, column: str, start_ts: int, *, batch_size: int = 4096) -> Iterator[bytes]:
        """Keys, in order, of the rows where ``column`` has a write committed at or before
        ``start_ts`` (a snapshot's; a DELETE counts, so a row whose value was deleted is
        named too).

        A key-only scan of one small cell per row, for cutting a table into key ranges (the
        batch job's partitions). It reads no values and waits on no lock, so a write still
        being committed below ``start_ts`` may be missed: read the rows themselves through a
        snapshot.
        """
        spec = ReadSpec(columns=((layout.WRITE, layout.qualifier(column)),), max_ts=start_ts)
        for row in self.store.scan(table, spec=spec, key_only=True, batch_size=batch_size):
            yield row.key

    def serving(self, name: str, families: Iterable[str], *, create: bool = True,
                counted: Iterable[str] = (), split_policy: layout.SplitPolicy | None = None) -> ServingTable:
        """A non-transactional serving table (see ``caffeine.percolator.serving``); ``counted``:
        the families whose live cells the store counts, ``split_policy`` where to cut it into
        regions (as ``create_table``), if this call creates the table."""
        key = (name, tuple(families), tuple(counted))
        table = self._serving.get(key)
        if table is None:
            table = ServingTable(self.store, name, key[1], counted=key[2],
                                 split_keys=layout.split_keys(split_policy, name, self.settings))
            if create:
                table.create()
            self._serving[key] = table
        return table

    def install_observers(self, application: str, observed: Iterable[tuple[str, str]], tables: Iterable[str]) -> bool:
        """Record in the deployment that ``application`` observes the (table, column) pairs
        ``observed`` and needs ``tables`` (``Application.install`` calls this): from now on
        writes to them set notify cells in this process, and in every other one once this
        returns (``caffeine.percolator.registry``). Replaces what the application's last
        install recorded; True if that changed."""
        return self.observer_registry.install(application, AppConfig.of(observed, tables))

    def observe_column(self, table: str, column: str) -> None:
        """Make this process's writes to (table, column) set notify cells, without recording
        it in the deployment (tests; a repository table of another name than the default)."""
        self.observer_registry.observe(table, column)

    def notify_columns(self, table: str, columns: Iterable[str]) -> list[str]:
        """The columns among ``columns`` that observers watch in ``table``."""
        return self.observer_registry.view().columns(table, columns)

    def observed_view(self) -> ObservedView:
        """The observed columns, and until when the copy they come from may be used (a
        commit point sent later needs a renewed one: ``two_phase.commit_primary``)."""
        return self.observer_registry.view()

    def observed_tables(self) -> list[str]:
        """The tables with observed columns (the ones workers scan for notifications), as
        the installed applications recorded them, plus this process's own."""
        return sorted({table for table, _ in self.observer_registry.observed()})

    def close(self) -> None:
        self.executor.shutdown(wait=True)
        self.owners.close()
        closer = getattr(self.oracle, "close", None)
        if closer:
            closer()
        self.store.close()

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def connect(settings: Settings | None = None, **overrides) -> Cluster:
    """Connect to HBase and the timestamp oracle named by settings (local ones by default).

    ``overrides`` are Settings fields (``connect(table_prefix="demo_")``); anything not
    given comes from ``CAFFEINE_*`` environment variables, then the defaults.
    """
    from caffeine.oracle.client import OracleClient
    from caffeine.storage import open_store

    settings = settings or load_settings(**overrides)
    return Cluster(open_store(settings), OracleClient(settings), settings)
