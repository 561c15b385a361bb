"""A real cluster of three region servers (``tests/cluster/conftest.py``): each server up and
bound to loopback; the data contract's tables start split with their regions on every region
server; a transaction over rows of every region commits and reads back; ``caffeine status``
and ``caffeine tables list --regions`` show the servers, their regions and request counts.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from caffeine.index.schema import DOCSTATS, DUPS, IMPACTS, INLINKS, POSTINGS, REPOSITORY, split_points
from support.cli_helpers import run_cli
from support.local_cluster import REGIONSERVERS, cluster_env, region_of


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
    # A region server's /jmx answers from Hadoop metrics' JMX cache, kept for the metrics
    # period (10 s by default): a write shows in the counts within a bounded wait, not at once.
    deadline = time.monotonic() + 60
    while True:
        st = local.status()
        servers = [p for p in st.pieces if p.piece.role == "regionserver"]
        if all(s.metrics.get("regions", 0) >= 1 and s.metrics.get("requests", 0) > 0 for s in servers):
            break
        assert time.monotonic() < deadline, st.render()
        time.sleep(1)
    assert len(servers) == REGIONSERVERS
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
