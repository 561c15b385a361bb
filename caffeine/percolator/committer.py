"""How a transaction's row steps reach the store: two backends behind one interface.

Layer: percolator. Internal. ``TwoPhaseCommit`` (``two_phase.py``) drives the commit (which
rows, in which order, what to do with each answer); a ``Committer`` performs its row steps:

- ``thrift-cas`` (``CasCommitter``): no server code. Each step is a storage row transaction:
  read the row (prewrites of several rows read them in one batch first), decide with the pure
  step, compare-and-set against the row guard. Works on any HBase, managed ones included.
- ``coprocessor`` (``CoprocessorCommitter``): each step is a *checked write* that the
  RegionObserver in ``coprocessor/`` checks and applies under the row lock: no read before a
  prewrite, the secondaries of a table prewritten in one batched call, the primary committed
  in one, the secondaries of a table committed in one (puts only on the wire: the deletes a
  step needs travel with its puts, ``steps.server``). Conflicts, locks and rollback records come back as answers
  (``steps.server``); ambiguous outcomes are settled by reading the row guard back, never
  guessed (``Store.apply_checked``).

Both return the pure steps' result types, so the driver does not know which one ran.
``choose_committer`` picks one by the ``committer`` setting: ``auto`` (the coprocessor when
the storage layer's row-step probe, ``caffeine.storage.probe``, finds it loaded),
``coprocessor`` (fail if it is not), ``thrift-cas``.
"""

from __future__ import annotations

import abc
import logging
from typing import Callable, Iterable, Mapping, Protocol

from caffeine.percolator import steps
from caffeine.percolator.history import committed_at
from caffeine.percolator.layout import LOCK, WRITE, qualifier
from caffeine.percolator.records import CellRef, Committed, Kind, RolledBack, Write
from caffeine.percolator.steps import server
from caffeine.storage import Decision, Delete, Mutation, Put, Row, Store
from caffeine.storage.probe import probe_row_steps

log = logging.getLogger(__name__)

RowKey = tuple[str, bytes]

BACKENDS = ("auto", "coprocessor", "thrift-cas")


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


class CoprocessorMissing(Exception):
    """The ``coprocessor`` backend was asked for but the cluster does not run it."""


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


class CasCommitter(Committer):
    name = "thrift-cas"
    reads_before_prewrite = True

    def prewrite(self, txn, keys, guesses, *, keepalive=None):
        results = {}

        def one(key):
            results[key] = self._prewrite_row(txn, key, guesses.get(key))

        txn.in_parallel(one, keys, keepalive=keepalive)
        return results

    @staticmethod
    def _prewrite_row(txn, key, guess):
        table, row = key
        writes = txn.buffer.rows[key]
        cluster = txn.host
        settings = cluster.settings
        txn.attempted.add(key)
        result, guard = cluster.store.row_transaction(
            table, row, steps.prewrite_spec(writes),
            lambda snapshot: steps.prewrite(
                snapshot, writes, primary=txn.buffer.primary, start_ts=txn.start_ts,
                ttl_ms=settings.lock_ttl_ms, owner=cluster.owners.owner,
                written_ms=txn.started_ms,
            ),
            with_guard=True,
            guess=guess,
        )
        if isinstance(result, steps.Prewritten):
            txn.prewritten[key] = (guard, txn.lock_values(key))
        return result

    def commit_row(self, txn, key, commit_ts, extra):
        table, row = key
        columns = list(txn.buffer.rows[key])
        store = txn.host.store
        guard, locks = txn.prewritten[key]
        guess = steps.predicted_locked_row(row, columns, txn.start_ts, locks, guard)

        def decide(snapshot):
            decision = steps.commit(snapshot, columns, start_ts=txn.start_ts, commit_ts=commit_ts)
            if not decision.mutations:  # nothing to commit here (or done already): nothing else
                return Decision((), (decision.result, False))
            return Decision([*decision.mutations, *extra], (decision.result, bool(extra)))

        result, applied = store.row_transaction(table, row, steps.commit_spec(columns, txn.start_ts), decide, guess=guess)
        if isinstance(result, steps.Inconclusive):
            commit_ts = committed_at(store, CellRef(table, row, result.column), txn.start_ts)
            return (RolledBack() if commit_ts is None else Committed(commit_ts)), False
        return result, applied

    def rollback_row(self, txn, key):
        table, row = key
        columns = list(txn.buffer.rows[key])
        return txn.host.store.row_transaction(
            table, row, steps.rollback_spec(columns, txn.start_ts),
            lambda snapshot: steps.rollback(snapshot, columns, start_ts=txn.start_ts),
        )

    def commit_secondaries(self, txn, table, rows, commit_ts):
        """Blind, two round trips: every row's write records in one ``put_rows``, then the lock
        deletes in one ``delete_rows`` (Thrift2 has no multi-row atomic write; a crash between
        the two leaves locks that readers roll forward to the records already there)."""
        records, unlocks = {}, {}
        for row in rows:
            writes = txn.buffer.rows[(table, row)]
            records[row] = [
                Put(WRITE, qualifier(c), commit_ts, Write(Kind.of_value(v), txn.start_ts).encode()) for c, v in writes.items()
            ]
            unlocks[row] = [Delete(LOCK, qualifier(c), txn.start_ts) for c in writes]
        store = txn.host.store
        store.put_rows(table, records)
        store.delete_rows(table, unlocks)


class CoprocessorCommitter(Committer):
    name = "coprocessor"

    def prewrite(self, txn, keys, guesses, *, keepalive=None):
        by_table: dict[str, list[bytes]] = {}
        for table, row in keys:
            by_table.setdefault(table, []).append(row)
        results = {}

        def one_table(table):
            locks = {row: txn.lock_values((table, row)) for row in by_table[table]}
            writes = {
                row: server.prewrite_write(txn.buffer.rows[(table, row)], locks[row], txn.start_ts)
                for row in by_table[table]
            }
            txn.attempted.update((table, row) for row in writes)
            answers = txn.host.store.apply_checked(table, writes)
            for row, answer in answers.items():
                result = server.prewrite_result(answer)
                if isinstance(result, steps.Prewritten):
                    # No guard to predict from: a commit step never reads anyway.
                    txn.prewritten[(table, row)] = (b"", locks[row])
                results[(table, row)] = result

        txn.in_parallel(one_table, sorted(by_table), keepalive=keepalive)
        return results

    def commit_row(self, txn, key, commit_ts, extra):
        table, row = key
        kinds = {c: Kind.of_value(v) for c, v in txn.buffer.rows[key].items()}
        write = server.commit_write(kinds, txn.start_ts, commit_ts, extra)
        answer = txn.host.store.apply_checked(table, {row: write})[row]
        result = server.commit_result(answer, commit_ts)
        # Committed at *our* commit_ts means our write applied, ``extra`` with it (atomic).
        applied = bool(extra) and isinstance(result, Committed) and result.commit_ts == commit_ts
        return result, applied

    def rollback_row(self, txn, key):
        table, row = key
        write = server.rollback_write(txn.buffer.rows[key], txn.start_ts)
        answer = txn.host.store.apply_checked(table, {row: write})[row]
        return server.rollback_result(answer)

    def commit_secondaries(self, txn, table, rows, commit_ts):
        """Checked commit steps, every row in one ``apply_checked`` (one ``putMultiple``): per
        row, the write records and the lock deletes land together or not at all. A row found
        committed already (a reader rolled it forward, or our own resend) is fine; any other
        answer means the transaction's rows disagree with its committed primary: logged loudly,
        never acted upon here."""
        writes = {
            row: server.commit_write(
                {c: Kind.of_value(v) for c, v in txn.buffer.rows[(table, row)].items()}, txn.start_ts, commit_ts)
            for row in rows
        }
        for row, answer in txn.host.store.apply_checked(table, writes).items():
            result = server.commit_result(answer, commit_ts)
            if not (isinstance(result, Committed) and result.commit_ts == commit_ts):
                log.error("secondary %s/%r of transaction %d committed at %d answered %s",
                          table, row, txn.start_ts, commit_ts, answer)


def _version_mismatch(version: str) -> str:
    """Why this client will not use a coprocessor answering ``version``, and what to do."""
    why = ""
    if version == "1":
        # A protocol-1 coprocessor lets a step's puts through and ignores the deletes carried
        # with them: commits would leave their locks, rollbacks their locks and data.
        why = (" (protocol 1 ignores the deletes a protocol-2 step carries with its puts, so "
               "commits would leave their locks behind)")
    return (f"the cluster's coprocessor speaks row-step protocol {version}, this client "
            f"{server.PROTOCOL_VERSION}{why}: upgrade the jar on the region servers (caffeine up "
            f"rebuilds the local one), or set CAFFEINE_COMMITTER=thrift-cas")


def by_name(name: str) -> Committer:
    """The committer of a backend name, without probing (tests and the simulation)."""
    return {"thrift-cas": CasCommitter, "coprocessor": CoprocessorCommitter}[name]()


def choose_committer(backend: str, store: Store, probe_table: str) -> Committer:
    """The committer for the ``committer`` setting (see the module docstring)."""
    if backend not in BACKENDS:
        raise ValueError(f"committer must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if backend == "thrift-cas":
        return CasCommitter()
    version = probe_row_steps(store, probe_table)
    if version is not None:
        if version != server.PROTOCOL_VERSION:
            raise CoprocessorMissing(_version_mismatch(version))
        log.info("committer: coprocessor (row-step protocol %s found on %s)", version, probe_table)
        return CoprocessorCommitter()
    if backend == "coprocessor":
        raise CoprocessorMissing(
            "CAFFEINE_COMMITTER=coprocessor, but the cluster does not run Caffeine's coprocessor "
            "(org.caffeine.hbase.PercolatorRowSteps): install it (README, Scaling out: \"Caffeine's "
            "coprocessor on an existing cluster\") or set CAFFEINE_COMMITTER=auto"
        )
    log.info("committer: thrift-cas (no coprocessor answered the probe on %s)", probe_table)
    return CasCommitter()


__all__ = [
    "BACKENDS", "Committer", "CasCommitter", "CoprocessorCommitter", "CoprocessorMissing",
    "by_name", "choose_committer",
]
