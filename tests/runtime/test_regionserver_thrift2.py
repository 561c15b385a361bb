"""The region server's own Thrift2 endpoint (``CAFFEINE_REGIONSERVER_THRIFT2_PORT``), on a local
HBase of its own started with it, next to the suite's runtime:

- ``caffeine up`` refuses it, before starting anything, where it cannot serve (the cluster
  mode; the coprocessor turned off), saying what to change;
- started, the region server serves Thrift2 on that port (its HBase piece lists the port, and
  ``status`` is healthy); the storage contract, the batching store and the protocol's inline
  runs pass through it (a child session of those test files whose clients' Thrift2 port is
  the region server's), and transactions through the coprocessor committer commit there, a
  write-write conflict refused;
- those calls take the region server's own path: the standalone Thrift2 server (which still
  runs: the oracle keeps its high-water mark through it) counts none of their multi-row calls
  meanwhile (its JMX counters);
- ``down`` stops it with the region server and frees the port.

Its home is ``<the runtime's home>/test-clusters/rs-thrift2-<id>`` (HBase's jars linked from
the runtime's), removed afterwards; .ci/run stops what is left there, as it does the clusters of
tests/cluster, if the session is killed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import urllib.request

import pytest

from caffeine.config import Settings, load_settings
from caffeine.runtime.catalogue import pieces_for
from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.local import LocalHBase
from caffeine.runtime.ports import port_is_free
from caffeine.runtime.process import find_pieces
from support.child_sessions import run_child_session
from support.local_cluster import home_beside_the_suites
from support.ports import free_port_blocks

PORTS = ("zookeeper_port", "master_port", "regionserver_port", "thrift1_port", "thrift2_port", "thrift1_info_port",
         "thrift2_info_port", "oracle_port", "oracle_standby_port", "regionserver_thrift2_port")
# Test files whose HBase tests the child session runs with the region server's endpoint.
THROUGH_THE_ENDPOINT = ("tests/storage/test_storage_contract.py", "tests/storage/test_storage_hbase.py",
                        "tests/storage/test_batching_store.py", "tests/protocol/test_inline_observers.py")


def _settings(home, **extra) -> Settings:
    return Settings(home=home, **dict(zip(PORTS, free_port_blocks([1] * len(PORTS)))), **extra)


def test_up_refuses_the_endpoint_where_it_cannot_serve(tmp_path):
    for extra, says in (({"regionservers": 3}, "cluster mode"), ({"coprocessor": "off"}, "coprocessor jar")):
        local = LocalHBase(_settings(tmp_path / "home", **extra), progress=lambda msg: None)
        with pytest.raises(LocalHBaseError, match=says):
            local.up()
        assert find_pieces(local.layout.home) == {}


@pytest.fixture(scope="module")
def runtime():
    """A started standalone HBase with the region server's Thrift2 endpoint: (LocalHBase, settings)."""
    if os.environ.get("CI") != "true" and not load_settings().home.exists():
        pytest.skip("starts a local HBase of its own from the runtime's jars: run `caffeine up` once first")
    home = home_beside_the_suites("rs-thrift2")
    settings = _settings(home, table_prefix="rst_", coprocessor="on", startup_timeout_s=240)
    local = LocalHBase(settings, progress=lambda msg: print(msg, file=sys.stderr))
    try:
        local.up()
        yield local, settings
    finally:
        local.down()
        assert find_pieces(local.layout.home) == {}
        assert all(port_is_free(port.number) for piece in pieces_for(settings) for port in piece.ports)
        shutil.rmtree(home, ignore_errors=True)


# The standalone Thrift2 server's multi-row calls, which the oracle (a Get and a checkAndMutate
# per high-water mark) and ``status`` never make.
MULTI_ROW_CALLS = ("GetMultiple_num_ops", "PutMultiple_num_ops", "DeleteMultiple_num_ops")


def standalone_multi_row_calls(settings) -> int:
    """How many multi-row calls the standalone Thrift2 server has served (its JMX counters)."""
    url = f"http://127.0.0.1:{settings.thrift2_info_port}/jmx?qry=Hadoop:service=HBase,name=Thrift,sub=ThriftTwo"
    with urllib.request.urlopen(url, timeout=10) as answer:
        beans = json.load(answer)["beans"]
    assert beans, f"no Thrift2 metrics at {url}"
    return sum(int(bean.get(name, 0)) for bean in beans for name in MULTI_ROW_CALLS)


# Hadoop's metrics answer JMX from a snapshot at most this old (the metrics period, 10 s).
JMX_SNAPSHOT_S = 11.0


@pytest.fixture(scope="module")
def through_the_endpoint(runtime):
    """The runtime; once the module's tests are done, the standalone Thrift2 server served no
    multi-row call during them (each count read once no call can be missing from its snapshot)."""
    local, settings = runtime
    time.sleep(JMX_SNAPSHOT_S)
    before = standalone_multi_row_calls(settings)
    yield local, settings
    time.sleep(JMX_SNAPSHOT_S)
    assert standalone_multi_row_calls(settings) == before, "calls went through the standalone Thrift2 server"


@pytest.mark.hbase
def test_the_region_server_lists_and_serves_its_endpoint(through_the_endpoint):
    local, settings = through_the_endpoint
    hbase = local.status(probe_timeout_s=10).piece("hbase")
    assert hbase.healthy, hbase.detail
    assert settings.regionserver_thrift2_port in [p.number for p in hbase.piece.ports]


@pytest.mark.hbase
def test_the_storage_contract_passes_through_the_region_servers_endpoint(through_the_endpoint):
    _, settings = through_the_endpoint
    env = {f"CAFFEINE_{name.upper()}": str(getattr(settings, name)) for name in PORTS}
    env.update(CAFFEINE_HOME=str(settings.home), CAFFEINE_THRIFT2_PORT=str(settings.regionserver_thrift2_port),
               CAFFEINE_COMMITTER="coprocessor", CI="true")
    summary = run_child_session(THROUGH_THE_ENDPOINT, env, "region server Thrift2", timeout=900)
    print(f"\nthrough the region server's Thrift2 endpoint: {summary}")
    assert " passed" in summary, summary


@pytest.mark.hbase
def test_transactions_commit_and_conflict_through_the_region_servers_endpoint(through_the_endpoint):
    from caffeine.percolator import connect
    from caffeine.percolator.errors import CommitConflict

    _, settings = through_the_endpoint
    with connect(settings.model_copy(update={"thrift2_port": settings.regionserver_thrift2_port,
                                             "committer": "coprocessor"})) as cluster:
        assert cluster.committer.name == "coprocessor"
        cluster.create_table("endpoint")
        with cluster.begin() as txn:
            txn.set("endpoint", b"r", "c", b"v1")
        first, second = cluster.begin(), cluster.begin()
        assert first.get("endpoint", b"r", "c") == b"v1"
        first.set("endpoint", b"r", "c", b"v2")
        second.set("endpoint", b"r", "c", b"v3")
        first.commit()
        with pytest.raises(CommitConflict):
            second.commit()
        with cluster.begin() as txn:
            assert txn.get("endpoint", b"r", "c") == b"v2"
