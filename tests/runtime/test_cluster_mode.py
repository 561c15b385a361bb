"""The cluster mode of the local runtime (``caffeine up --regionservers N``) and the split tables,
without HBase: the pieces, ports and hbase-site.xml keys of the cluster mode, the port checks,
the mode checks and the stop order on stand-in processes carrying our markers, and the split
policies of the data contract. A real cluster is ``tests/cluster/``.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

import pytest

from caffeine.config import Settings
from caffeine.index.schema import DOCSTATS, DUPS, IMPACTS, INLINKS, POSTINGS, REPOSITORY, SPLIT_POLICIES, split_points
from caffeine.runtime import siteconf
from caffeine.runtime.catalogue import pieces_for, regionservers_running
from caffeine.runtime.errors import LocalHBaseError, PortInUse
from caffeine.runtime.home import Layout
from caffeine.runtime.local import LocalHBase
from caffeine.runtime.modes import mode_conflict
from caffeine.runtime.process import find_pieces
from support.local_cluster import cluster_settings, region_of
from support.stand_ins import stand_ins


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return cluster_settings(tmp_path / "home", shutdown_timeout_s=5)


# -- the pieces, their ports and configuration ---------------------------------------------------


def test_the_cluster_mode_runs_zookeeper_a_master_and_each_region_server_on_its_own_ports(settings: Settings) -> None:
    pieces = pieces_for(settings)
    assert [p.name for p in pieces] == ["zookeeper", "master", "regionserver-1", "regionserver-2", "regionserver-3",
                                        "thrift1", "thrift2", "oracle", "standby"]
    assert [p.role for p in pieces] == ["zookeeper", "master", "regionserver", "regionserver", "regionserver",
                                        "thrift1", "thrift2", "oracle", "oracle"]
    numbers = [port.number for p in pieces for port in p.ports]
    assert len(numbers) == len(set(numbers)) == 1 + 1 + 2 * 3 + 2 + 2 + 1 + 1
    # Both oracles wait for the lease as standbys, whichever mode HBase runs in.
    assert all("--standby" in p.args for p in pieces[-2:])
    assert pieces[-1].ports[0].number == settings.oracle_standby_port
    zookeeper, master, *servers = pieces[:5]
    assert zookeeper.main_class == "org.apache.hadoop.hbase.zookeeper.HQuorumPeer"
    assert zookeeper.heap == "128m" and zookeeper.ports[0].number == settings.zookeeper_port
    assert master.main_class == "org.apache.hadoop.hbase.master.HMaster" and master.args == ("start",)
    for k, rs in enumerate(servers, start=1):
        port, info = settings.regionserver_port + k - 1, settings.regionserver_info_port + k - 1
        assert rs.main_class == "org.apache.hadoop.hbase.regionserver.HRegionServer"
        assert rs.args == (f"-Dhbase.regionserver.port={port}", f"-Dhbase.regionserver.info.port={info}", "start")
        assert [(p.number, p.setting, p.offset) for p in rs.ports] == [
            (port, "regionserver_port", k - 1), (info, "regionserver_info_port", k - 1)]
    assert "CAFFEINE_REGIONSERVER_PORT=<free port> (this one is that port + 2)" == servers[2].ports[0].how_to_move()
    # Standalone stays the default, one JVM, whose region server answers Thrift2.
    assert [p.name for p in pieces_for(Settings())] == ["hbase", "thrift1", "oracle", "standby"]
    # The cluster mode's Thrift2 server is its own JVM, also when asked for in the region server
    # (which `up` refuses: coprocessor.check_thrift2_server).
    assert not [p for p in zookeeper.ports + master.ports if p.setting == "thrift2_port"]


def test_the_cluster_mode_hbase_site_is_distributed_on_loopback(settings: Settings) -> None:
    props = siteconf.for_settings(settings)
    # Compared with a standalone HBase that serves no Thrift2 itself: the cluster's is a JVM of its own.
    assert "hbase.coprocessor.regionserver.classes" not in props
    standalone = siteconf.for_settings(settings.model_copy(update={"regionservers": 0, "thrift2_server": "separate"}))
    assert standalone["hbase.cluster.distributed"] == "false"
    assert props["hbase.cluster.distributed"] == "true"
    assert props["hbase.zookeeper.property.clientPortAddress"] == "127.0.0.1"
    assert props["hbase.zookeeper.property.admin.enableServer"] == "false"
    assert props["hbase.master.wait.on.regionservers.mintostart"] == "3"
    # Granted as asked: ZooKeeper allows 2 to 20 ticks.
    tick, timeout = int(props["hbase.zookeeper.property.tickTime"]), int(props["zookeeper.session.timeout"])
    assert 2 * tick <= timeout <= 20 * tick and timeout <= 20_000
    # What the local filesystem needs, and loopback everywhere, as standalone.
    for key in ("hbase.unsafe.stream.capability.enforce", "hbase.wal.provider", "hbase.master.hostname",
                "hbase.unsafe.regionserver.hostname", "hbase.regionserver.info.bindAddress", "hbase.rootdir"):
        assert props[key] == standalone[key], key
    assert props["hbase.regionserver.info.bindAddress"] == "127.0.0.1"
    # The other keys are the standalone ones (the Docker image's file is generated from those).
    assert set(standalone) <= set(props)


def test_settings_that_give_two_servers_one_port_are_refused_before_anything_starts(tmp_path: Path) -> None:
    settings = cluster_settings(tmp_path / "home")
    clash = settings.model_copy(update={"regionserver_info_port": settings.regionserver_port + 1})
    with pytest.raises(LocalHBaseError, match="one port to two servers") as err:
        LocalHBase(clash, progress=lambda msg: None).up()
    assert "CAFFEINE_REGIONSERVER" in str(err.value)
    assert find_pieces(Layout.from_settings(clash).home) == {}


def test_a_region_servers_port_taken_by_another_process_is_reported_with_the_setting_that_moves_it(
        settings: Settings) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", settings.regionserver_port + 1))
        holder.listen()
        local = LocalHBase(settings, progress=lambda msg: None)
        local.check_ports(["zookeeper", "master", "regionserver-1", "regionserver-3"])  # unaffected pieces pass
        with pytest.raises(PortInUse) as err:
            local.check_ports()  # what `up` runs before it starts anything
    message = str(err.value)
    assert f"port {settings.regionserver_port + 1} (regionserver-2: region server) is in use by pid {os.getpid()}" in message
    assert "CAFFEINE_REGIONSERVER_PORT=<free port> (this one is that port + 1)" in message
    assert "nothing was started" in message


def test_status_and_down_follow_the_mode_that_runs_and_up_refuses_another(settings: Settings, tmp_path: Path) -> None:
    # Stand-ins for a cluster of three (their ports do not answer, so the master gets SIGTERM
    # rather than `HMaster stop`, and the region servers are stopped one by one after it).
    home = Layout.from_settings(settings).home
    order = tmp_path / "order"
    names = ["zookeeper", "master", "regionserver-1", "regionserver-2", "regionserver-3", "thrift1", "thrift2", "oracle",
             "standby"]
    procs = stand_ins(home, order, names)
    try:
        assert regionservers_running(find_pieces(home)) == 3
        standalone = settings.model_copy(update={"regionservers": 0})
        local = LocalHBase(standalone, progress=lambda msg: None)
        assert [p.name for p in local.status(probe_timeout_s=1).pieces] == names
        with pytest.raises(LocalHBaseError, match="a cluster of 3 region servers") as err:
            local.up()
        assert "`caffeine down` first" in str(err.value)
        with pytest.raises(LocalHBaseError, match="a cluster of 2 region servers"):
            LocalHBase(settings.model_copy(update={"regionservers": 2}), progress=lambda msg: None).up()
        said: list[str] = []
        LocalHBase(standalone, progress=said.append).down()
        assert order.read_text().split() == ["standby", "oracle", "thrift2", "thrift1", "master",
                                             "regionserver-1", "regionserver-2", "regionserver-3", "zookeeper"]
        assert find_pieces(home) == {}
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def test_a_standby_oracle_the_settings_do_not_name_is_no_other_mode(settings: Settings, tmp_path: Path) -> None:
    names = ["zookeeper", "master", "regionserver-1", "regionserver-2", "regionserver-3", "thrift1", "thrift2", "oracle",
             "standby"]
    found = {name: [pid] for pid, name in enumerate(names, start=1000)}
    for mode in (settings, settings.model_copy(update={"regionservers": 0, "thrift2_server": "separate"})):
        no_standby = mode.model_copy(update={"oracle_standby_port": 0})
        assert "standby" not in [p.name for p in pieces_for(no_standby)]
        here = found if mode.regionservers else {"hbase": [999], **{n: found[n] for n in names[5:]}}
        assert mode_conflict(no_standby, pieces_for(no_standby), here, tmp_path) is None
    # A standalone HBase with Thrift2 in a JVM of its own is not the default's (Thrift2 in the region server).
    default = settings.model_copy(update={"regionservers": 0})
    assert "Thrift2 in a JVM of its own" in mode_conflict(default, pieces_for(default), here, tmp_path)
    assert "a cluster of 3 region servers" in mode_conflict(
        settings.model_copy(update={"regionservers": 0}), pieces_for(settings.model_copy(update={"regionservers": 0})),
        found, tmp_path)


# -- split policies --------------------------------------------------------------------------


def test_every_split_table_of_the_contract_has_a_policy_that_cuts_it_into_the_regions_asked() -> None:
    assert set(SPLIT_POLICIES) == {REPOSITORY, INLINKS, DOCSTATS, DUPS, POSTINGS, IMPACTS}
    for table in SPLIT_POLICIES:
        assert split_points(table, 1) == ()
        for regions in (2, 3, 5, 8):
            keys = split_points(table, regions)
            assert len(keys) == regions - 1, (table, regions, keys)
            assert all(isinstance(k, bytes) and k for k in keys)
            assert list(keys) == sorted(set(keys))
    assert split_points("frontier", 3) == () and split_points("owners", 3) == ()


def test_url_tables_keep_a_host_together_and_spread_hosts() -> None:
    keys = split_points(REPOSITORY, 3)
    for host in ("http://127.0.0.1:8800", "https://www.python.org", "https://docs.rs", "http://example.com"):
        assert len({region_of(f"{host}/{path}".encode(), keys) for path in ("", "a", "z/zz", "~x")}) == 1, host
    hosts = [f"https://{w}{c}example.org/".encode() for w in ("", "www.") for c in "abcdefghijklmnopqrstuvwxyz"]
    assert {region_of(h, keys) for h in hosts} == {0, 1, 2}


def test_fingerprints_and_band_rows_spread_evenly() -> None:
    rng = random.Random(7)
    keys = split_points(DUPS, 4)
    fingerprints = [f"{rng.getrandbits(128):032x}".encode() for _ in range(4000)]
    bands = [f"~{rng.getrandbits(64):016x}00{rng.getrandbits(64):016x}".encode() for _ in range(4000)]
    counts = [0] * 4
    for key in fingerprints + bands:
        counts[region_of(key, keys)] += 1
    assert all(1700 < n < 2300 for n in counts), counts


def test_terms_spread_over_the_regions_by_their_first_letter() -> None:
    keys = split_points(POSTINGS, 3)
    words = "the of and to in is that for it as was with be by on not he this are or his from at which but".split()
    words += "search index page server region table commit snapshot python 2024 über zebra".split()
    assert {region_of(w.encode(), keys) for w in words} == {0, 1, 2}
    assert split_points(IMPACTS, 3) == keys


def test_the_cluster_settings_never_give_a_single_port_and_a_region_servers_block_one_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The draws of the test support, in order: the eight single ports, then a block of region
    # server ports starting on the first single port (it must be drawn again), then two free blocks.
    import support.ports
    draws = iter([*range(20000, 20008), 20000, 20008, 20011])
    monkeypatch.setattr(support.ports.random, "randrange", lambda lo, hi: next(draws))
    monkeypatch.setattr(support.ports, "port_is_free", lambda port: True)
    settings = cluster_settings(tmp_path / "home")
    numbers = [port.number for p in pieces_for(settings) for port in p.ports]
    assert sorted(numbers) == list(range(20000, 20014))
