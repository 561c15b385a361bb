"""Observers in real worker processes, one of them SIGKILLed mid-run (real HBase and oracle)."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pytest

from caffeine.percolator.cluster import Cluster
from caffeine.percolator.engine_status import pending_notifications, wait_until_quiescent
from support.observer_apps import chain_app
from support.session import close_keeping_store, oracle_for
from support.workers import stop_workers

pytestmark = pytest.mark.hbase
CHANGES = 1000


@pytest.fixture
def real_cluster(hbase_store, hbase_settings):
    cluster = Cluster(hbase_store, oracle_for(hbase_settings), hbase_settings)
    yield cluster
    close_keeping_store(cluster)()


def test_chain_counts_every_change_exactly_once_through_a_worker_crash(real_cluster, hbase_settings, workers):
    table = "chain_" + uuid.uuid4().hex[:6]
    env = dict(os.environ, CAFFEINE_TABLE_PREFIX=hbase_settings.table_prefix, CAFFEINE_TEST_CHAIN_TABLE=table,
               CAFFEINE_HEARTBEAT_INTERVAL_MS="500", CAFFEINE_OWNER_GRACE_MS="2000", CAFFEINE_LOCK_TTL_MS="2000")
    chain_app(table).install(real_cluster)

    running = [workers("observer_apps.py:chain", env), workers("observer_apps.py:chain", env)]
    try:
        rows = [b"row%05d" % i for i in range(CHANGES)]
        for i in range(0, CHANGES, 20):
            with real_cluster.begin() as txn:
                for row in rows[i:i + 20]:
                    txn.set(table, row, "a", b"payload")
        # Kill one worker while the chain is busy, then start a replacement.
        deadline = time.monotonic() + 120
        while pending_notifications(real_cluster.store, [table]).count > CHANGES // 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        running[0].proc.send_signal(signal.SIGKILL)
        running[0].proc.wait()
        running[0] = workers("observer_apps.py:chain", env)
        wait_until_quiescent(real_cluster, [table], timeout_s=600, poll_s=0.5)
    finally:
        stop_workers(running)

    with real_cluster.begin() as txn:
        counts = {}
        for row, cols in txn.scan(table, columns=["a_runs", "b_runs", "c_runs", "c"]):
            counts[row] = (cols.get("a_runs"), cols.get("b_runs"), cols.get("c_runs"), cols.get("c"))
    assert len(counts) == CHANGES
    wrong = {r: v for r, v in counts.items() if v != (b"1", b"1", b"1", b"payload")}
    assert not wrong, f"{len(wrong)} rows counted wrongly, e.g. {list(wrong.items())[:5]}"
