"""Which server answers Thrift2 (``CAFFEINE_THRIFT2_SERVER``): the standalone HBase's region
server by default, or HBase's Thrift2 server in a JVM of its own.

- ``caffeine up`` refuses the region server's where it cannot serve (the cluster mode; the
  coprocessor turned off), before starting anything, saying what to change; ``auto`` gives
  those a Thrift2 JVM instead.
- The suite's runtime (default settings) runs no Thrift2 JVM: its ``hbase`` piece lists the
  Thrift2 port and answers on it (every HBase test of the suite goes through it).
- A standalone runtime of its own with ``separate``: the Thrift2 JVM runs and serves; the
  storage contract, the batching store and the protocol's inline runs pass through it (a
  child session of those test files), its JMX counters show their multi-row calls, and
  transactions through the coprocessor committer commit there, a write-write conflict refused;
  ``down`` stops it and frees its ports.

That runtime's home is ``<the runtime's home>/test-clusters/thrift2-jvm-<id>`` (HBase's jars
linked from the runtime's), removed afterwards; .ci/run stops what is left there, as it does
the clusters of tests/cluster, if the session is killed.
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
from caffeine.runtime.catalogue import pieces_for, thrift2_in_regionserver, thrift2_port_of
from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.local import LocalHBase
from caffeine.runtime.ports import listener_pids, port_is_free
from caffeine.runtime.process import find_pieces
from support.child_sessions import run_child_session
from support.local_cluster import home_beside_the_suites
from support.ports import free_port_blocks

PORTS = ("zookeeper_port", "master_port", "regionserver_port", "thrift1_port", "thrift2_port", "thrift1_info_port",
         "thrift2_info_port", "oracle_port", "oracle_standby_port")
# Test files whose HBase tests the child session runs through the Thrift2 JVM.
THROUGH_THE_JVM = ("tests/storage/test_storage_contract.py", "tests/storage/test_storage_hbase.py",
                   "tests/storage/test_batching_store.py", "tests/protocol/test_inline_observers.py")


def _settings(home, **extra) -> Settings:
    return Settings(home=home, **dict(zip(PORTS, free_port_blocks([1] * len(PORTS)))), **extra)


def test_up_refuses_thrift2_in_the_region_server_where_it_cannot_serve(tmp_path):
    for extra, says in (({"regionservers": 3}, "cluster mode"), ({"coprocessor": "off"}, "coprocessor jar")):
        asked = _settings(tmp_path / "home", thrift2_server="regionserver", **extra)
        local = LocalHBase(asked, progress=lambda msg: None)
        with pytest.raises(LocalHBaseError, match=says):
            local.up()
        assert find_pieces(local.layout.home) == {}
        # Left to itself (auto), the same runtime gets a Thrift2 JVM.
        auto = asked.model_copy(update={"thrift2_server": "auto"})
        assert not thrift2_in_regionserver(auto) and "thrift2" in [p.name for p in pieces_for(auto)]


@pytest.mark.hbase
def test_by_default_the_region_server_answers_thrift2(hbase_settings):
    settings = load_settings()
    if not thrift2_in_regionserver(settings):
        pytest.skip(f"this runtime runs a Thrift2 JVM (CAFFEINE_THRIFT2_SERVER={settings.thrift2_server}, "
                    f"CAFFEINE_COPROCESSOR={settings.coprocessor})")
    local = LocalHBase(settings, progress=lambda msg: None)
    st = local.status(probe_timeout_s=10)
    hbase = st.piece("hbase")
    assert hbase.healthy and "thrift2" in hbase.detail, hbase.detail
    assert thrift2_port_of(hbase.piece).number == settings.thrift2_port
    assert "thrift2" not in [p.name for p in st.pieces] and "thrift2" not in find_pieces(local.layout.home)
    # The process that listens there is HBase's.
    assert set(listener_pids(settings.thrift2_port)) == set(hbase.pids)


@pytest.fixture(scope="module")
def runtime():
    """A started standalone HBase whose Thrift2 server is a JVM of its own: (LocalHBase, settings)."""
    if os.environ.get("CI") != "true" and not load_settings().home.exists():
        pytest.skip("starts a local HBase of its own from the runtime's jars: run `caffeine up` once first")
    home = home_beside_the_suites("thrift2-jvm")
    settings = _settings(home, table_prefix="t2j_", coprocessor="on", thrift2_server="separate", startup_timeout_s=240)
    local = LocalHBase(settings, progress=lambda msg: print(msg, file=sys.stderr))
    try:
        local.up()
        yield local, settings
    finally:
        local.down()
        assert find_pieces(local.layout.home) == {}
        assert all(port_is_free(port.number) for piece in pieces_for(settings) for port in piece.ports)
        shutil.rmtree(home, ignore_errors=True)


# The Thrift2 JVM's multi-row calls, which the oracle (a Get and a checkAndMutate per
# high-water mark) and ``status`` never make.
MULTI_ROW_CALLS = ("GetMultiple_num_ops", "PutMultiple_num_ops", "DeleteMultiple_num_ops")
# Hadoop's metrics answer JMX from a snapshot at most this old (the metrics period, 10 s).
JMX_SNAPSHOT_S = 11.0


def jvm_multi_row_calls(settings) -> int:
    """How many multi-row calls the Thrift2 JVM has served (its JMX counters)."""
    url = f"http://127.0.0.1:{settings.thrift2_info_port}/jmx?qry=Hadoop:service=HBase,name=Thrift,sub=ThriftTwo"
    with urllib.request.urlopen(url, timeout=10) as answer:
        beans = json.load(answer)["beans"]
    assert beans, f"no Thrift2 metrics at {url}"
    return sum(int(bean.get(name, 0)) for bean in beans for name in MULTI_ROW_CALLS)


@pytest.mark.hbase
def test_a_thrift2_jvm_is_listed_and_serves_the_storage_contract(runtime):
    local, settings = runtime
    st = local.status(probe_timeout_s=10)
    assert st.healthy, st.render()
    assert "thrift2" in find_pieces(local.layout.home)
    assert thrift2_port_of(st.piece("thrift2").piece).number == settings.thrift2_port
    assert thrift2_port_of(st.piece("hbase").piece) is None
    time.sleep(JMX_SNAPSHOT_S)
    before = jvm_multi_row_calls(settings)
    env = {f"CAFFEINE_{name.upper()}": str(getattr(settings, name)) for name in PORTS}
    env.update(CAFFEINE_HOME=str(settings.home), CAFFEINE_THRIFT2_SERVER="separate", CAFFEINE_COMMITTER="coprocessor",
               CI="true")
    summary = run_child_session(THROUGH_THE_JVM, env, "Thrift2 JVM", timeout=900)
    print(f"\nthrough the Thrift2 JVM: {summary}")
    assert " passed" in summary, summary
    time.sleep(JMX_SNAPSHOT_S)
    assert jvm_multi_row_calls(settings) > before, "the child session's calls did not reach the Thrift2 JVM"


@pytest.mark.hbase
def test_transactions_commit_and_conflict_through_a_thrift2_jvm(runtime):
    from caffeine.percolator import connect
    from caffeine.percolator.errors import CommitConflict

    _, settings = runtime
    with connect(settings.model_copy(update={"committer": "coprocessor"})) as cluster:
        assert cluster.committer.name == "coprocessor"
        cluster.create_table("jvm")
        with cluster.begin() as txn:
            txn.set("jvm", b"r", "c", b"v1")
        first, second = cluster.begin(), cluster.begin()
        assert first.get("jvm", b"r", "c") == b"v1"
        first.set("jvm", b"r", "c", b"v2")
        second.set("jvm", b"r", "c", b"v3")
        first.commit()
        with pytest.raises(CommitConflict):
            second.commit()
        with cluster.begin() as txn:
            assert txn.get("jvm", b"r", "c") == b"v2"
