"""The ``thrift-cas`` commit backend: compare-and-set from the client, no server code.

Layer: percolator. Internal: one backend of ``caffeine.percolator.backends``. Each step is a
storage row transaction: read the row (prewrites of several rows read them in one batch
first), decide with the pure step, compare-and-set against the row guard. Works on any HBase,
managed ones included, and on any store: it needs nothing on the server, so nothing is probed.
"""

from __future__ import annotations

from caffeine.percolator import steps
from caffeine.percolator.committer import Backend, Committer
from caffeine.percolator.history import committed_at
from caffeine.percolator.layout import WRITE, qualifier
from caffeine.percolator.records import CellRef, Committed, Kind, RolledBack, Write
from caffeine.percolator.steps.common import unlock_committed
from caffeine.storage import Decision, Put


class CasCommitter(Committer):
    """Each row step a storage row transaction (see the module docstring)."""

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
            unlocks[row] = [unlock_committed(qualifier(c), txn.start_ts) for c in writes]
        store = txn.host.store
        store.put_rows(table, records)
        store.delete_rows(table, unlocks)


BACKEND = Backend(CasCommitter)

__all__ = ["BACKEND", "CasCommitter"]
