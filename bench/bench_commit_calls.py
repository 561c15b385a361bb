#!/usr/bin/env python3
"""Storage calls and wall time of committing transactions of several rows, with the
coprocessor committer as it is (row-step protocol 2) and as it was (protocol 1's shape).

``after``: the ``CoprocessorCommitter``: a commit or rollback step is puts only, the deletes
it needs carried in its request, so the primary's commit is one checked ``putMultiple`` and
each table's secondaries are another (write record and lock delete atomic per row).

``before``: the same committer sending what it sent before protocol 2, on the same runtime
(protocol 2 still accepts it): commit and rollback steps hold their deletes as delete
mutations, so each goes as one atomic ``mutateRow`` per row, and each table's secondaries
are committed blind in two calls (``putMultiple`` of the write records, then
``deleteMultiple`` of the locks).

Every transaction writes ``--rows`` rows of one table (its own rows: no conflicts), one
after the other on one thread; the modes alternate in ``--rounds`` rounds of
``--transactions`` each, so both see the same machine. Storage calls are counted through a
wrapper around each Thrift pool's ``call`` (the owner registry's heartbeat thread
excluded), oracle round trips by the oracle client. Prints per mode: Thrift calls per
transaction by method, and the median milliseconds per transaction over the rounds.

Usage (needs an HBase running Caffeine's coprocessor and the oracle, ``caffeine up``)::

    python3 bench/bench_commit_calls.py [--transactions 200] [--rows 3] [--rounds 3]

Tables live under a fresh ``bench_cc_<random>_`` prefix and are dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from caffeine.config import load_settings  # noqa: E402
from caffeine.oracle.client import OracleClient  # noqa: E402
from caffeine.percolator.cluster import Cluster  # noqa: E402
from caffeine.percolator.backends.cas import CasCommitter  # noqa: E402
from caffeine.percolator.backends.coprocessor import CoprocessorCommitter  # noqa: E402
from caffeine.percolator.layout import LOCK, WRITE, data_family, qualifier  # noqa: E402
from caffeine.percolator.records import Committed, Kind, Write  # noqa: E402
from caffeine.percolator.steps import server  # noqa: E402
from caffeine.storage import CheckedWrite, Delete, Put  # noqa: E402
from caffeine.storage.hbase import HBaseStore  # noqa: E402

TABLE = "rows"
# The Thrift2 calls a commit makes, named as the store's call lambdas name them.
_METHODS = ("putMultiple", "mutateRow", "deleteMultiple", "checkAndMutate", "getMultiple", "get",
            "getScannerResults", "put")


def _without_carried(write: CheckedWrite) -> CheckedWrite:
    """A protocol-2 step as protocol 1 sent it: its carried deletes as delete mutations."""
    attrs = dict(write.attributes)
    deletes = server.decode_deletes(attrs.pop(server.DELETES, None))
    return CheckedWrite(tuple(attrs.items()), (*write.mutations, *deletes))


class BeforeCommitter(CoprocessorCommitter):
    """The coprocessor committer as it was: deletes as mutations (one mutateRow per step),
    secondaries blind in two calls per table."""

    def commit_row(self, txn, key, commit_ts, extra):
        table, row = key
        kinds = {c: Kind.of_value(v) for c, v in txn.buffer.rows[key].items()}
        write = _without_carried(server.commit_write(kinds, txn.start_ts, commit_ts, extra))
        result = server.commit_result(txn.host.store.apply_checked(table, {row: write})[row], commit_ts)
        return result, bool(extra) and isinstance(result, Committed) and result.commit_ts == commit_ts

    def rollback_row(self, txn, key):
        table, row = key
        write = _without_carried(server.rollback_write(txn.buffer.rows[key], txn.start_ts))
        return server.rollback_result(txn.host.store.apply_checked(table, {row: write})[row])

    commit_secondaries = CasCommitter.commit_secondaries


class CallCounter:
    """Counts the Thrift pools' calls by method name, the heartbeat thread's left out."""

    def __init__(self, store: HBaseStore) -> None:
        self.counts: Counter[str] = Counter()
        self._lock = threading.Lock()
        for label in ("thrift1", "thrift2"):
            pool = getattr(store, label)
            pool.call = self._wrap(label, pool.call)

    def _wrap(self, label, call):
        def counted(fn, *args, **kwargs):
            if threading.current_thread().name != "caffeine-heartbeat":
                method = next((n for n in fn.__code__.co_names if n in _METHODS), "other")
                with self._lock:
                    self.counts[f"{label}.{method}"] += 1
            return call(fn, *args, **kwargs)
        return counted

    def take(self) -> Counter[str]:
        with self._lock:
            out, self.counts = self.counts, Counter()
        return out


def run(cluster: Cluster, n: int, rows: int, tag: str) -> float:
    """Commit ``n`` transactions of ``rows`` rows each; seconds taken."""
    value = os.urandom(64)
    started = time.perf_counter()
    for i in range(n):
        with cluster.begin() as txn:
            for r in range(rows):
                txn.set(TABLE, b"%s-%06d-%d" % (tag.encode(), i, r), "c", value)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--transactions", type=int, default=200)
    parser.add_argument("--rows", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    prefix = f"bench_cc_{uuid.uuid4().hex[:6]}_"
    settings = load_settings(table_prefix=prefix)
    store = HBaseStore(settings)
    oracle = OracleClient(settings)
    clusters = {}
    try:
        clusters["before"] = Cluster(store, oracle, settings, committer=BeforeCommitter())
        clusters["after"] = Cluster(store, oracle, settings, committer=CoprocessorCommitter())
        clusters["after"].create_table(TABLE)
        counter = CallCounter(store)
        run(clusters["after"], 10, args.rows, "warm")  # connections, regions, JIT
        counter.take()
        times: dict[str, list[float]] = {mode: [] for mode in clusters}
        calls: dict[str, Counter[str]] = {mode: Counter() for mode in clusters}
        oracle_trips = {mode: 0 for mode in clusters}
        for rnd in range(args.rounds):
            for mode in (("before", "after") if rnd % 2 == 0 else ("after", "before")):
                trips = oracle.round_trips
                times[mode].append(run(clusters[mode], args.transactions, args.rows, f"{mode}{rnd}"))
                calls[mode] += counter.take()
                oracle_trips[mode] += oracle.round_trips - trips
        total = args.transactions * args.rounds
        print(f"{args.rounds} rounds x {args.transactions} transactions of {args.rows} rows each, one thread")
        for mode in ("before", "after"):
            per = {k: v / total for k, v in sorted(calls[mode].items())}
            ms = [t / args.transactions * 1000 for t in times[mode]]
            print(f"{mode:6}  storage calls/txn {sum(per.values()):5.2f}  "
                  f"({', '.join(f'{k} {v:.2f}' for k, v in per.items())})  "
                  f"oracle round trips/txn {oracle_trips[mode] / total:.2f}  "
                  f"ms/txn median {statistics.median(ms):.2f} (rounds: {', '.join(f'{m:.2f}' for m in ms)})")
    finally:
        for cluster in clusters.values():
            cluster.executor.shutdown(wait=True)
            cluster.owners.close()
        for table in store.list_tables():
            store.drop_table(table)
        oracle.close()
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
