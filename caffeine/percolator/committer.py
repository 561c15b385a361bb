"""What a commit backend is: how a transaction's row steps reach the store.

Layer: percolator. Internal. ``TwoPhaseCommit`` (``two_phase.py``) drives the commit (which
rows, in which order, what to do with each answer); a ``Committer`` performs its row steps.
Every backend returns the pure steps' result types, so the driver does not know which one
ran. A ``Backend`` is one entry of the registry (``caffeine.percolator.backends``, which lists
them all and picks one by the ``committer`` setting): its ``Committer``, the server-side row
step it needs (whose Python model the in-memory store runs for tests and the simulation), and
the probe that finds that server side on a cluster.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol

from caffeine.percolator.records import CellRef
from caffeine.storage import Mutation, Row, Store
from caffeine.storage.model import RowStepCheck

if TYPE_CHECKING:
    from caffeine.storage.memory import MemoryStore

RowKey = tuple[str, bytes]


class CommitInProgress(Protocol):
    """What a committer sees of the commit it serves (``two_phase.TwoPhaseCommit``)."""

    start_ts: int
    started_ms: int
    buffer: "WriteBufferView"
    attempted: set[RowKey]
    prewritten: dict[RowKey, tuple[bytes, dict[str, bytes]]]
    host: "HostView"

    def lock_values(self, key: RowKey) -> dict[str, bytes]: ...

    def in_parallel(self, fn: Callable, keys: Iterable, *, keepalive=None) -> None: ...


class WriteBufferView(Protocol):
    rows: dict[RowKey, dict[str, bytes | None]]
    primary: CellRef | None


class HostView(Protocol):
    store: Store
    settings: object
    owners: object


class BackendUnavailable(Exception):
    """The backend asked for cannot run on this cluster (its server side is missing, or
    speaks a protocol this client does not); the message says what to do."""


class Committer(abc.ABC):
    """The row steps of a transaction's commit. Methods are called by ``TwoPhaseCommit`` only."""

    name: str
    # Whether the driver should read the rows to prewrite in one batch first and pass them
    # as ``guesses`` (the compare-and-set backend decides each row on such a snapshot).
    reads_before_prewrite: bool = False

    @abc.abstractmethod
    def prewrite(self, txn: CommitInProgress, keys: list[RowKey], guesses: Mapping[RowKey, Row], *, keepalive=None) -> dict:
        """Prewrite each row; returns per row a ``PrewriteResult`` (``Prewritten``,
        ``WriteConflict``, ``KeyLocked``, ``RolledBack``). Every row is added to
        ``txn.attempted`` before its write may be sent, and each prewritten one to
        ``txn.prewritten``. ``keepalive()`` is called periodically while it runs."""

    @abc.abstractmethod
    def commit_row(self, txn: CommitInProgress, key: RowKey, commit_ts: int, extra: list[Mutation]):
        """Commit the row (the primary's: the commit point), with ``extra`` mutations in the
        same atomic write; returns (``Committed`` | ``RolledBack``, whether ``extra`` applied)."""

    @abc.abstractmethod
    def rollback_row(self, txn: CommitInProgress, key: RowKey):
        """Roll the row back; returns ``RolledBack`` or ``Committed`` (it was committed)."""

    @abc.abstractmethod
    def commit_secondaries(self, txn: CommitInProgress, table: str, rows: list[bytes], commit_ts: int) -> None:
        """Commit these secondary rows of ``table`` (the primary is committed at ``commit_ts``):
        write records in, locks at start_ts out. Raises on a failure the caller logs (readers
        roll what is left forward); never decides anything, since nobody may do anything to
        these locks but roll them forward to exactly these records."""


@dataclass(frozen=True)
class Backend:
    """One commit backend, as the registry lists it."""

    committer: type[Committer]
    # The server-side row step the backend needs (``Store.apply_checked``), as its Python
    # model: what the in-memory store runs for it. None: it needs nothing on the server.
    row_step: RowStepCheck | None = None
    # Whether a store's server runs what the backend needs, asked on a table (a system table
    # the caller has created); raises ``BackendUnavailable`` when it runs something this
    # client cannot use. None: nothing to look for, the backend runs on any store.
    probe: Callable[[Store, str], bool] | None = None
    # Why the backend cannot run where its probe found nothing, and what to do instead.
    missing: str = ""

    @property
    def name(self) -> str:
        """The ``committer`` setting that asks for it (``CAFFEINE_COMMITTER``, ``--committer``)."""
        return self.committer.name

    def memory_store(self) -> MemoryStore:
        """An in-memory store that runs what this backend needs on the server (tests, the
        simulation; imported only then)."""
        from caffeine.storage.memory import MemoryStore

        return MemoryStore(row_step=self.row_step)


__all__ = ["Backend", "BackendUnavailable", "CommitInProgress", "Committer", "HostView", "RowKey", "WriteBufferView"]
