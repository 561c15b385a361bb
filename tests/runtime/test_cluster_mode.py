"""The cluster mode of the local runtime (``caffeine up --regionservers N``) and the split tables.

The first part needs no HBase: the pieces, ports and hbase-site.xml keys of the cluster mode,
the port checks, the mode checks and the stop order on stand-in processes carrying our
markers, and the split policies of the data contract.

The second part starts a real cluster (ZooKeeper, a master, three region servers, both Thrift
servers, the oracle and its standby) under a home and on ports of its own, next to whatever else runs, and
checks that each server is up and bound to loopback, that the data contract's tables start
split with their regions on every region server, that a transaction over rows of every region
commits and reads back, that ``caffeine status`` and ``caffeine tables list --regions`` show
the servers, their regions and request counts, and that ``down`` leaves no process. It starts
five JVMs on top of the suite's own HBase, so it runs only when asked:
``CAFFEINE_TEST_CLUSTER=1`` (.ci/run sets it, like ``CAFFEINE_TEST_RESTART_HBASE``);
otherwise it is skipped, saying so. About a minute and a half on the 2-core machine.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import time
import uuid
from pathlib import Path

import pytest

from caffeine.config import Settings, load_settings
from caffeine.index.schema import DOCSTATS, DUPS, IMPACTS, INLINKS, POSTINGS, REPOSITORY, SPLIT_POLICIES, split_points
from caffeine.runtime import siteconf
from caffeine.runtime.catalogue import pieces_for, regionservers_running
from caffeine.runtime.errors import LocalHBaseError, PortInUse
from caffeine.runtime.home import Layout
from caffeine.runtime.local import LocalHBase
from caffeine.runtime.modes import mode_conflict
from caffeine.runtime.ports import port_is_free
from caffeine.runtime.process import find_pieces
from support.cli_helpers import cli_env, run_cli
from support.stand_ins import stand_ins

CLUSTER_ENV = "CAFFEINE_TEST_CLUSTER"
REGIONSERVERS = 3
PORT_NAMES = ("zookeeper_port", "master_port", "thrift1_port", "thrift2_port", "thrift1_info_port",
              "thrift2_info_port", "oracle_port", "oracle_standby_port")


def free_ports(count: int, span: int = 1) -> list[int]:
    """``count`` bases of ``span`` consecutive free ports on 127.0.0.1, all different, below
    Linux's usual range of ephemeral ports (32768 on), which outgoing connections take."""
    taken: set[int] = set()
    bases: list[int] = []
    while len(bases) < count:
        base = random.randrange(20000, 32000 - span)
        block = range(base, base + span)
        if taken.isdisjoint(block) and all(port_is_free(p) for p in block):
            bases.append(base)
            taken.update(block)
    return bases


def cluster_settings(home: Path, **extra) -> Settings:
    """A cluster of ``REGIONSERVERS`` region servers under ``home``, on ports nothing listens on."""
    singles = free_ports(len(PORT_NAMES))
    rs, info = free_ports(2, span=REGIONSERVERS)
    return Settings(home=home, regionservers=REGIONSERVERS, regionserver_port=rs, regionserver_info_port=info,
                    **dict(zip(PORT_NAMES, singles)), **extra)


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
    # Standalone stays the default, one JVM.
    assert [p.name for p in pieces_for(Settings())] == ["hbase", "thrift1", "thrift2", "oracle", "standby"]


def test_the_cluster_mode_hbase_site_is_distributed_on_loopback(settings: Settings) -> None:
    props = siteconf.for_settings(settings)
    standalone = siteconf.for_settings(settings.model_copy(update={"regionservers": 0}))
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
    for mode in (settings, settings.model_copy(update={"regionservers": 0})):
        no_standby = mode.model_copy(update={"oracle_standby_port": 0})
        assert "standby" not in [p.name for p in pieces_for(no_standby)]
        here = found if mode.regionservers else {"hbase": [999], **{n: found[n] for n in names[5:]}}
        assert mode_conflict(no_standby, pieces_for(no_standby), here, tmp_path) is None
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


def region_of(key: bytes, keys: tuple[bytes, ...]) -> int:
    return sum(1 for k in keys if key >= k)


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


# -- a real cluster -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def running_cluster(tmp_path_factory):
    """A started cluster of ``REGIONSERVERS`` region servers: (LocalHBase, settings, seconds to start)."""
    if os.environ.get(CLUSTER_ENV) != "1":
        pytest.skip(f"starts a cluster of {REGIONSERVERS} region servers (five JVMs more): set {CLUSTER_ENV}=1")
    home = tmp_path_factory.mktemp("cluster") / "home"
    home.mkdir()
    # HBase's jars and the coprocessor jar as the suite's own runtime resolved them, so the
    # cluster's home does not fetch them again.
    runtime_lib = Layout.from_settings(load_settings()).lib_root
    runtime_lib.mkdir(parents=True, exist_ok=True)
    (home / "lib").symlink_to(runtime_lib, target_is_directory=True)
    settings = cluster_settings(home, table_prefix="cl_", startup_timeout_s=240)
    local = LocalHBase(settings, progress=lambda msg: print(msg, file=sys.stderr))
    t0 = time.monotonic()
    try:
        local.up()
        started = time.monotonic() - t0
        print(f"cluster of {REGIONSERVERS} region servers healthy after {started:.1f}s", file=sys.stderr)
        yield local, settings, started
    finally:
        local.down()
        assert find_pieces(local.layout.home) == {}


def cluster_env(settings: Settings) -> dict[str, str]:
    names = (*PORT_NAMES, "home", "regionservers", "regionserver_port", "regionserver_info_port", "table_prefix")
    return cli_env(**{name: getattr(settings, name) for name in names})


def listening_addresses(ports: set[int]) -> dict[int, set[str]]:
    """Port -> the local addresses listening on it (hex, as /proc/net/tcp* writes them)."""
    found: dict[int, set[str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, port = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(port, 16) in ports:
                found.setdefault(int(port, 16), set()).add(address)
    return found


# 127.0.0.1 as /proc/net/tcp writes it, and as tcp6 writes ::ffff:127.0.0.1.
LOOPBACK = {"0100007F", "0000000000000000FFFF00000100007F"}


@pytest.mark.hbase
def test_each_server_of_the_cluster_runs_healthy_on_loopback(running_cluster) -> None:
    local, settings, started = running_cluster
    st = local.status()
    assert st.healthy, st.render()
    names = ["zookeeper", "master", "regionserver-1", "regionserver-2", "regionserver-3", "thrift1", "thrift2", "oracle",
             "standby"]
    assert [p.name for p in st.pieces] == names
    assert all(len(p.pids) == 1 for p in st.pieces)
    assert len({p.pids[0] for p in st.pieces}) == len(names)
    assert st.coprocessor is not None and st.coprocessor[0] is True, st.render()
    assert st.piece("oracle").detail.startswith("active: ") and st.piece("standby").detail.startswith("standby: ")
    ports = {port.number for p in st.pieces for port in p.piece.ports}
    listening = listening_addresses(ports)
    assert set(listening) == ports
    assert all(addresses <= LOOPBACK for addresses in listening.values()), listening
    for p in st.pieces:
        assert p.log == local.layout.logs_dir / f"{p.name}.log" and p.log.is_file()
    assert started < 200


@pytest.mark.hbase
def test_the_contract_tables_start_split_over_every_region_server_and_a_transaction_spans_them(running_cluster) -> None:
    from caffeine.observers.app import application
    from caffeine.observers.serving_tables import serving_table
    from caffeine.percolator import connect

    _, settings, _ = running_cluster
    servers = {f"localhost:{settings.regionserver_port + k}" for k in range(REGIONSERVERS)}
    rows = [b"http://127.0.0.1:8800/", b"https://pypi.org/", b"https://www.python.org/"]
    with connect(settings) as cluster:
        application.install(cluster)
        for name in (POSTINGS, IMPACTS, DOCSTATS):
            serving_table(cluster, name)
        for name in (REPOSITORY, INLINKS, DUPS, POSTINGS, IMPACTS, DOCSTATS):
            regions = cluster.store.regions(name)
            assert [r.start for r in regions[1:]] == list(split_points(name, REGIONSERVERS)), name
            assert {r.server for r in regions} == servers, (name, regions)
        # One row in each region of the repository: its commit writes to every region server.
        assert {region_of(row, split_points(REPOSITORY, REGIONSERVERS)) for row in rows} == {0, 1, 2}
        marker = uuid.uuid4().hex

        def write(txn):
            for row in rows:
                txn.set(REPOSITORY, row, "page:meta", json.dumps({"marker": marker, "url": row.decode()}))

        cluster.run(write)
        with cluster.begin() as txn:
            read = {row: json.loads(txn.get(REPOSITORY, row, "page:meta")) for row in rows}
        assert read == {row: {"marker": marker, "url": row.decode()} for row in rows}


@pytest.mark.hbase
def test_status_and_tables_show_each_servers_regions_and_requests(running_cluster) -> None:
    from caffeine.storage import FamilySpec, Put, open_store

    local, settings, _ = running_cluster
    with open_store(settings) as store:
        # A table of its own with a region on every server, and a write to each region.
        keys = split_points(POSTINGS, REGIONSERVERS)
        store.create_table("requests", {b"f": FamilySpec()}, keys)
        store.put_rows("requests", {key + b"x": [Put(b"f", b"q", 1, b"v")] for key in (b"0", *keys)})
    st = local.status()
    servers = [p for p in st.pieces if p.piece.role == "regionserver"]
    assert all(s.metrics.get("regions", 0) >= 1 and s.metrics.get("requests", 0) > 0 for s in servers), st.render()
    env = cluster_env(settings)
    status = run_cli("status", env=env, timeout=120)
    assert status.returncode == 0, status.stdout + status.stderr
    for k in range(1, REGIONSERVERS + 1):
        line = next(line for line in status.stdout.splitlines() if line.strip().startswith(f"regionserver-{k} "))
        assert "healthy" in line and f"127.0.0.1:{settings.regionserver_port + k - 1}" in line
    assert status.stdout.count("online: ") == REGIONSERVERS
    assert " requests; " in status.stdout and " row reads, " in status.stdout
    assert "\n  regions  regionserver-1 " in status.stdout
    tables = run_cli("tables", "list", "--regions", env=env, timeout=120)
    assert tables.returncode == 0, tables.stdout + tables.stderr
    assert f"{REPOSITORY}\t(HBase table cl_{REPOSITORY}): 3 regions" in tables.stdout
    per_server = next(line for line in tables.stdout.splitlines() if line.startswith("regions per server: "))
    assert all(f"localhost:{settings.regionserver_port + k}" in per_server for k in range(REGIONSERVERS))


@pytest.mark.hbase
def test_down_stops_every_process_of_the_cluster(running_cluster) -> None:
    local, settings, _ = running_cluster
    t0 = time.monotonic()
    down = run_cli("down", env=cluster_env(settings.model_copy(update={"regionservers": 0})), timeout=300)
    assert down.returncode == 0, down.stdout + down.stderr
    assert "regionserver-3 stopped" in down.stderr and "zookeeper stopped" in down.stderr
    assert down.stderr.index("standby stopped") < down.stderr.index("oracle stopped") < down.stderr.index("thrift2 stopped")
    assert find_pieces(local.layout.home) == {}
    ports = [port.number for p in pieces_for(settings) for port in p.ports]
    assert all(port_is_free(port) for port in ports)
    print(f"down took {time.monotonic() - t0:.1f}s", file=sys.stderr)

