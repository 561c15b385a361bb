"""The cluster the tests of this folder share: ZooKeeper, a master, three region servers, both
Thrift servers, the oracle and its standby, under a home and on ports of its own, next to the
suite's own HBase (``caffeine up --regionservers 3``; ``support.local_cluster``).

It starts five JVMs more, so it runs only when asked: ``CAFFEINE_TEST_CLUSTER=1`` (.ci/run
sets it, like ``CAFFEINE_TEST_RESTART_HBASE``); otherwise every test here is skipped, saying
so. It starts once for the folder (about a minute on the 2-core machine: the folder is a
package so that the fixture's "package" scope ends with its last test) and is stopped then
with ``caffeine down`` as a user would; that stop is checked too (every process gone, every
port free, the stop order), so a failure there is reported as the last test's error. Its home
is ``<the runtime's home>/test-clusters/cluster-<id>``, removed afterwards; if the session is killed
first, .ci/run stops what is left there.

- ``running_cluster``: (LocalHBase, settings, seconds it took to start);
- ``cluster_client``: a ``Cluster`` over it in this process, judging locks as the children
  of ``support.child_helpers`` do.
"""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest

from caffeine.runtime.catalogue import pieces_for
from caffeine.runtime.local import LocalHBase
from caffeine.runtime.ports import port_is_free
from caffeine.runtime.process import find_pieces
from support.cli_helpers import run_cli
from support.local_cluster import CLUSTER_ENV, REGIONSERVERS, cluster_env, cluster_settings, home_beside_the_suites


@pytest.fixture(scope="package")
def running_cluster():
    """A started cluster of ``REGIONSERVERS`` region servers: (LocalHBase, settings, seconds to start)."""
    if os.environ.get(CLUSTER_ENV) != "1":
        pytest.skip(f"starts a cluster of {REGIONSERVERS} region servers (five JVMs more): set {CLUSTER_ENV}=1")
    home = home_beside_the_suites("cluster")
    settings = cluster_settings(home, table_prefix="cl_", startup_timeout_s=240)
    local = LocalHBase(settings, progress=lambda msg: print(msg, file=sys.stderr))
    t0 = time.monotonic()
    try:
        local.up()
        started = time.monotonic() - t0
        print(f"cluster of {REGIONSERVERS} region servers healthy after {started:.1f}s", file=sys.stderr)
        yield local, settings, started
        _down_stops_every_process(local, settings)
    finally:
        local.down()
        assert find_pieces(local.layout.home) == {}
        shutil.rmtree(home, ignore_errors=True)


def _down_stops_every_process(local: LocalHBase, settings) -> None:
    """``caffeine down`` (without the cluster's settings: it finds what runs) stops every
    process of the cluster, in order, and frees every port."""
    t0 = time.monotonic()
    down = run_cli("down", env=cluster_env(settings.model_copy(update={"regionservers": 0})), timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "regionserver-3 stopped" in down.stderr and "zookeeper stopped" in down.stderr
    assert down.stderr.index("standby stopped") < down.stderr.index("oracle stopped") < down.stderr.index("thrift2 stopped")
    assert find_pieces(local.layout.home) == {}
    ports = [port.number for p in pieces_for(settings) for port in p.ports]
    assert all(port_is_free(port) for port in ports)
    print(f"down took {time.monotonic() - t0:.1f}s", file=sys.stderr)


@pytest.fixture
def cluster_client(running_cluster):
    """A client of the cluster in this process, over its oracle, judging locks as the children do."""
    from caffeine.oracle.client import OracleClient
    from caffeine.percolator.cluster import Cluster
    from caffeine.storage import open_store
    from support.child_helpers import fast_settings

    _, settings, _ = running_cluster
    fast = fast_settings(settings)
    store = open_store(fast)
    cluster = Cluster(store, OracleClient(fast), fast)
    yield cluster
    cluster.close()
