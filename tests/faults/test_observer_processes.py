"""Observers in real worker processes, one of them SIGKILLed mid-run (real HBase and oracle)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from caffeine.percolator.cluster import Cluster
from caffeine.percolator.engine_status import pending_notifications, wait_until_quiescent
from support import ROOT

pytestmark = pytest.mark.hbase
CHANGES = 1000


@pytest.fixture
def real_cluster(hbase_store, hbase_settings):
    from support.session import close_keeping_store, oracle_for

    cluster = Cluster(hbase_store, oracle_for(hbase_settings), hbase_settings)
    yield cluster
    close_keeping_store(cluster)()


def start_worker(env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "caffeine.commands", "worker", "--app", "tests/support/observer_apps.py:chain", "--threads", "4"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )


def test_chain_counts_every_change_exactly_once_through_a_worker_crash(real_cluster, hbase_settings):
    import importlib.util

    table = "chain_" + uuid.uuid4().hex[:6]
    env = dict(os.environ, CAFFEINE_TABLE_PREFIX=hbase_settings.table_prefix, CAFFEINE_TEST_CHAIN_TABLE=table,
               CAFFEINE_HEARTBEAT_INTERVAL_MS="500", CAFFEINE_OWNER_GRACE_MS="2000", CAFFEINE_LOCK_TTL_MS="2000")
    os.environ["CAFFEINE_TEST_CHAIN_TABLE"] = table
    spec = importlib.util.spec_from_file_location("observer_apps", ROOT / "tests" / "support" / "observer_apps.py")
    apps = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(apps)
    app = apps.chain()
    app.install(real_cluster)

    workers = [start_worker(env), start_worker(env)]
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
        workers[0].send_signal(signal.SIGKILL)
        workers[0].wait()
        workers[0] = start_worker(env)
        wait_until_quiescent(real_cluster, [table], timeout_s=600, poll_s=0.5)
    finally:
        for w in workers:
            w.send_signal(signal.SIGTERM)
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()

    with real_cluster.begin() as txn:
        counts = {}
        for row, cols in txn.scan(table, columns=["a_runs", "b_runs", "c_runs", "c"]):
            counts[row] = (cols.get("a_runs"), cols.get("b_runs"), cols.get("c_runs"), cols.get("c"))
    assert len(counts) == CHANGES
    wrong = {r: v for r, v in counts.items() if v != (b"1", b"1", b"1", b"payload")}
    assert not wrong, f"{len(wrong)} rows counted wrongly, e.g. {list(wrong.items())[:5]}"
