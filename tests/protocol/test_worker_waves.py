"""Waves and lockstep: a worker runs notifications of one column together, and their storage
calls go in shared multi-row calls (caffeine.percolator.worker, caffeine.storage.lockstep).
On the in-memory store and on the real HBase."""

from __future__ import annotations

import uuid

import pytest

from caffeine.percolator import Application, Observer
from caffeine.percolator.cluster import Cluster
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.percolator.testing import InProcessOracle, memory_store
from caffeine.percolator.worker import Worker
from caffeine.storage.batching import BatchingStore


@pytest.fixture(params=["memory", "hbase"])
def gang_cluster(request):
    """A cluster whose store combines calls with a lockstep generous enough that a slow
    machine does not break the rounds up."""
    from caffeine.config import load_settings

    if request.param == "memory":
        inner, settings = memory_store(), load_settings()
    else:
        inner, settings = request.getfixturevalue("hbase_store"), request.getfixturevalue("hbase_settings")
    cluster = Cluster(BatchingStore(inner, lockstep_ms=1000.0), InProcessOracle(), settings)
    yield cluster
    cluster.executor.shutdown(wait=True)
    cluster.owners.close()


def copy_app(cluster, name: str, n: int):
    """An application whose observer copies column v to column copy, installed, and ``n``
    rows whose v is written in one transaction: (app, table, rows)."""
    table = f"{name}_{uuid.uuid4().hex[:6]}"

    def copy(txn, row, column):
        txn.set(table, row, "copy", txn.get(table, row, "v"))

    app = Application(name, [Observer("copy", table, "v", copy)])
    app.install(cluster)
    rows = [b"r%02d" % i for i in range(n)]
    with cluster.begin() as txn:
        for row in rows:
            txn.set(table, row, "v", row)
    return app, table, rows


def assert_copied(cluster, table, rows):
    with cluster.begin() as txn:
        assert {row: txn.get(table, row, "copy") for row in rows} == {row: row for row in rows}


def test_a_wave_of_runs_shares_its_calls(gang_cluster):
    cluster = gang_cluster
    app, table, rows = copy_app(cluster, "waves", 16)
    stats = cluster.store.stats
    before = stats.as_dict()
    with Worker(cluster, app, threads=8):
        wait_until_quiescent(cluster, app.observed_tables, timeout_s=120, poll_s=0.05)
    after = stats.as_dict()
    assert_copied(cluster, table, rows)
    calls = after.get("batched_calls", 0) - before.get("batched_calls", 0)
    requests = after.get("batched_requests", 0) - before.get("batched_requests", 0)
    # Each of the 16 runs makes its first read, its prewrite and its commit (which clears
    # the notification): 48 requests at least, 48 calls if each went alone. Two waves of 8
    # in step need about one call per round.
    assert requests >= 48
    assert requests / calls >= 4, (calls, requests)


def test_a_small_backlog_is_taken_in_few_listings(gang_cluster):
    """Each listing of the notify family walks every notification and delete marker the
    store still holds, a cost that grows with the run: a pass takes several waves of a small
    backlog rather than one, instead of listing again after each wave."""
    cluster = gang_cluster
    app, table, rows = copy_app(cluster, "passes", 32)
    worker = Worker(cluster, app, threads=4)
    passes = []
    scan_pass = worker._scan_pass

    def counted(t):
        found = scan_pass(t)
        if found:
            passes.append(found)
        return found

    worker._scan_pass = counted
    with worker:
        wait_until_quiescent(cluster, app.observed_tables, timeout_s=120, poll_s=0.05)
    assert_copied(cluster, table, rows)
    assert sum(passes) == 32
    assert len(passes) <= 2, passes
