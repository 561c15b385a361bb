"""The ``coprocessor`` commit backend: checked writes, checked inside HBase.

Layer: percolator. Internal: one backend of ``caffeine.percolator.backends``. Each step is a
*checked write* that the RegionObserver in ``coprocessor/`` checks and applies under the row
lock: no read before a prewrite, the secondaries of a table prewritten in one batched call,
the primary committed in one, the secondaries of a table committed in one (puts only on the
wire: the deletes a step needs travel with its puts, ``steps.server``). Conflicts, locks and
rollback records come back as answers (``steps.server``); ambiguous outcomes are settled by
reading the row guard back, never guessed (``Store.apply_checked``).

On a cluster, ``runs_on`` finds the coprocessor with the storage layer's row-step probe
(``caffeine.storage.probe``) and refuses one that speaks another protocol than
``steps.server.PROTOCOL_VERSION``; the in-memory store runs the row steps' Python model
(``steps.server.row_step``).
"""

from __future__ import annotations

import logging

from caffeine.percolator import steps
from caffeine.percolator.committer import Backend, BackendUnavailable, Committer
from caffeine.percolator.records import Committed, Kind
from caffeine.percolator.steps import server
from caffeine.storage import Store
from caffeine.storage.probe import probe_row_steps

log = logging.getLogger(__name__)


class CoprocessorCommitter(Committer):
    """Each row step a checked write (see the module docstring)."""

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


def runs_on(store: Store, table: str) -> bool:
    """Whether ``store``'s server runs this client's row steps (probed on ``table``, a system
    table); raises ``BackendUnavailable`` when it runs another protocol."""
    version = probe_row_steps(store, table)
    if version is None:
        return False
    if version != server.PROTOCOL_VERSION:
        raise BackendUnavailable(_version_mismatch(version))
    log.info("committer: coprocessor (row-step protocol %s found on %s)", version, table)
    return True


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


BACKEND = Backend(
    CoprocessorCommitter,
    row_step=server.row_step,
    probe=runs_on,
    missing=(
        "CAFFEINE_COMMITTER=coprocessor, but the cluster does not run Caffeine's coprocessor "
        "(org.caffeine.hbase.PercolatorRowSteps): install it (docs/SCALING.md, \"Caffeine's "
        "coprocessor on an existing cluster\") or set CAFFEINE_COMMITTER=auto"
    ),
)

__all__ = ["BACKEND", "CoprocessorCommitter", "runs_on"]
