"""hbase-site.xml and log4j2.properties of the local HBase (and of the Docker image).

Layer: runtime. Contract:

- ``hbase_site_properties(...)`` is the single source of the HBase configuration: the keys
  are the same for the local instance (``for_settings``) and for docker/hbase (``for_docker``);
  only paths, ports, bind addresses and the web UIs differ. tests/runtime/test_runtime.py
  checks that docker/hbase/hbase-site.xml is exactly ``render_hbase_site(for_docker())``;
  regenerate it with ``python -m caffeine.runtime.siteconf docker > docker/hbase/hbase-site.xml``.
- ``write_conf(layout, settings)`` writes ``<home>/conf/hbase-site.xml`` and
  ``<home>/conf/log4j2.properties`` (only when their content changed) and returns the folder,
  which goes first on every JVM's classpath. Every path in them is absolute and under
  ``<home>``, so nothing lands in HBase's /tmp defaults.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from pathlib import Path
from xml.sax.saxutils import escape

from caffeine.config import Settings
from caffeine.runtime.catalogue import thrift2_in_regionserver
from caffeine.runtime.coprocessor import site_properties as coprocessor_site_properties
from caffeine.runtime.coprocessor import wanted as coprocessor_wanted
from caffeine.runtime.home import Layout

LOOPBACK = "127.0.0.1"


def hbase_site_properties(
    *,
    root_dir: Path,
    tmp_dir: Path,
    zookeeper_data_dir: Path,
    zookeeper_port: int,
    master_port: int,
    regionserver_port: int,
    bind_address: str = LOOPBACK,
    master_info_port: int = -1,
    regionserver_info_port: int = -1,
    coprocessor: bool = False,
    regionservers: int = 0,
    regionserver_thrift2_port: int = 0,
) -> dict[str, str]:
    """The hbase-site.xml properties, in the order they are written, with why each is set.

    ``coprocessor``: register Caffeine's RegionObserver for every table; only when its jar is
    on the region server's classpath (a class that fails to load aborts the region server,
    ``hbase.coprocessor.abortonerror``). ``regionservers``: 0 standalone, N the cluster mode
    (``cluster_properties``, added after the common keys). ``regionserver_thrift2_port``: the
    region server's own Thrift2 endpoint (with the coprocessor only; 0: none).
    """
    for p in (root_dir, tmp_dir, zookeeper_data_dir):
        if not p.is_absolute():
            raise ValueError(f"{p} must be absolute (HBase resolves relative paths against its cwd)")
    props = {
        # Standalone mode: one JVM runs the master, a region server and ZooKeeper (the cluster
        # mode sets it to true: cluster_properties).
        "hbase.cluster.distributed": "false",
        # Defaults live under /tmp (hbase.tmp.dir), which a reboot or tmp cleaner wipes.
        "hbase.rootdir": root_dir.as_uri(),
        "hbase.tmp.dir": str(tmp_dir),
        "hbase.zookeeper.property.dataDir": str(zookeeper_data_dir),
        "hbase.zookeeper.quorum": "localhost",
        # Read by the master to start its in-process ZooKeeper AND by the Thrift servers to find
        # it; the master aborts if it cannot bind exactly this port.
        "hbase.zookeeper.property.clientPort": str(zookeeper_port),
        "hbase.master.port": str(master_port),
        "hbase.regionserver.port": str(regionserver_port),
        # Register as "localhost" so the RPC servers bind the loopback interface and clients
        # never depend on the machine's hostname resolving.
        "hbase.master.hostname": "localhost",
        "hbase.unsafe.regionserver.hostname": "localhost",
        # Web UIs: off locally (-1: fewer ports to collide), on in Docker; bound like the rest.
        "hbase.master.info.port": str(master_info_port),
        "hbase.master.info.bindAddress": bind_address,
        "hbase.regionserver.info.port": str(regionserver_info_port),
        "hbase.regionserver.info.bindAddress": bind_address,
        # The Thrift servers' info web servers bind 0.0.0.0 unless told otherwise (their ports
        # are given per server with --infoport, since the two servers need different ones).
        "hbase.thrift.info.bindAddress": bind_address,
        # A local filesystem has no hflush/hsync capability; without this the WAL refuses to
        # start (StreamLacksCapabilityException). Acknowledged writes still survive a crash of
        # the HBase process: HBase turns Hadoop's checksum layer off for a LocalFileSystem
        # (HFileSystem, HBASE-11218), whose buffer would otherwise hold back the WAL's tail, so
        # each WAL sync is a write(2) into the OS before the write is acknowledged, and a
        # restart replays it (tests/faults/test_hbase_kill.py). There is no fsync, though: an
        # OS crash or power loss can lose the last writes.
        "hbase.unsafe.stream.capability.enforce": "false",
        # The asyncfs WAL needs HDFS; the classic filesystem WAL works on a local FS.
        "hbase.wal.provider": "filesystem",
        # The jars come from Maven, not from the tarball whose hbase-default.xml carries the
        # version check; skip it.
        "hbase.defaults.for.version.skip": "true",
        # Each memstore that takes a write grabs a 2 MB MSLAB chunk, and a Percolator table
        # has six families: a few hundred small tables (test runs create many) exhaust a
        # modest heap with chunks alone (seen: OutOfMemoryError, then the ZooKeeper session
        # expired and the master died). Without MSLAB memstores grow from small buffers.
        "hbase.hregion.memstore.mslab.enabled": "false",
        # Per-table latency histograms: the region server's metrics thread recomputes their
        # percentiles for every table every few seconds. A JFR profile of the local HBase
        # under load (bench/jfr_hot.py) put a fifth of its CPU samples there
        # (FastLongHistogram via MetricsTableAggregateSourceImpl) with 71 tables: CPU taken
        # from the region server on a two-core machine, for numbers nothing here reads.
        # Region server-wide latencies stay.
        "hbase.regionserver.enable.table.latencies": "false",
        # In-memory compaction, BASIC (user tables only; system tables keep
        # hbase.systemtables.compacting.memstore.type=NONE): a store takes writes in a small
        # skip list that is flushed in memory at 2 MB into a flat sorted array (ARRAY_MAP,
        # MSLAB being off), instead of one skip list that grows to the flush size. Under the
        # pipeline a JFR profile put 22% of HBase's CPU in memstore inserts, the skip list's
        # comparisons (CellComparatorImpl.compare: a third of all samples, self time); with
        # BASIC the comparator fell to 5% of the samples. HBase's CPU per page was 0.78x
        # (per-repeat ratios 0.72, 0.84), all processes' 0.80x, documents/s 1.27x:
        #   python3 bench/bench_config.py --variants base,basic,eager,flush32,handlers8,parallelgc
        #       --repeats 2 --pages 1200 --warmup-pages 300     (bench/README.md: the tables)
        # EAGER, which also drops versions hidden while in memory (the lock and notify cells a
        # commit deletes), gained less (0.87x): it copies the survivors, and most cells are
        # live postings. A smaller flush size (32 MB) was worse (1.07x). The WAL and its
        # sync per write are untouched.
        "hbase.hregion.compacting.memstore.type": "BASIC",
    }
    if coprocessor:
        # The Percolator row steps, checked under the row lock (caffeine.runtime.coprocessor).
        props.update(coprocessor_site_properties(regionserver_thrift2_port, bind_address))
    if regionservers > 0:
        props.update(cluster_properties(regionservers, bind_address))
    return props


# ZooKeeper's tick, and the session timeout HBase's servers ask for: ZooKeeper grants a
# session timeout between 2 and 20 ticks (4 to 40 s here), so 15 s is granted as asked.
ZOOKEEPER_TICK_MS = 2000
ZOOKEEPER_SESSION_TIMEOUT_MS = 15000


def cluster_properties(regionservers: int, bind_address: str = LOOPBACK) -> dict[str, str]:
    """The keys the cluster mode adds (or changes): HBase distributed over its own JVMs on
    this machine, data still on the local filesystem (``hbase.rootdir`` shared by every
    server, so the master can split a dead region server's write-ahead logs)."""
    return {
        # The master, each region server and ZooKeeper are processes of their own; the
        # master starts no ZooKeeper (HQuorumPeer, the `zookeeper` piece, runs it from these
        # same hbase.zookeeper.property.* keys: one server, so ZooKeeper's standalone mode).
        "hbase.cluster.distributed": "true",
        # ZooKeeper's client port on loopback only (it binds every interface otherwise).
        "hbase.zookeeper.property.clientPortAddress": bind_address,
        # ZooKeeper 3.5+ starts an admin web server on 8080 unless told not to.
        "hbase.zookeeper.property.admin.enableServer": "false",
        "hbase.zookeeper.property.tickTime": str(ZOOKEEPER_TICK_MS),
        # A killed region server is noticed when its ZooKeeper session expires (90 s by
        # default); then the master splits its logs and reassigns its regions.
        "zookeeper.session.timeout": str(ZOOKEEPER_SESSION_TIMEOUT_MS),
        # The master finishes initializing (assigns meta, creates nothing) only once every
        # region server has reported, so the first tables are spread over all of them.
        "hbase.master.wait.on.regionservers.mintostart": str(regionservers),
    }


def for_settings(settings: Settings, layout: Layout | None = None) -> dict[str, str]:
    """Properties of the local instance described by ``settings``."""
    layout = layout or Layout.from_settings(settings)
    return hbase_site_properties(
        root_dir=layout.hbase_root_dir,
        tmp_dir=layout.hbase_tmp_dir,
        zookeeper_data_dir=layout.zookeeper_data_dir,
        zookeeper_port=settings.zookeeper_port,
        master_port=settings.master_port,
        regionserver_port=settings.regionserver_port,
        coprocessor=coprocessor_wanted(settings),
        regionservers=settings.regionservers,
        regionserver_thrift2_port=settings.thrift2_port if thrift2_in_regionserver(settings) else 0,
    )


# docker/hbase: HBase lives under /opt/hbase, its data in the /data volume; the container
# listens on every interface (the compose file publishes the ports on the host's 127.0.0.1),
# and the master / region server UIs are on, at HBase's default ports.
DOCKER_HOME = Path("/opt/hbase")
DOCKER_DATA = Path("/data")


def for_docker() -> dict[str, str]:
    """Properties of the docker/hbase image (same keys as the local instance)."""
    return hbase_site_properties(
        root_dir=DOCKER_DATA / "hbase",
        tmp_dir=DOCKER_HOME / "tmp" / "hbase",
        zookeeper_data_dir=DOCKER_DATA / "zookeeper",
        zookeeper_port=2181,
        master_port=16000,
        regionserver_port=16020,
        bind_address="0.0.0.0",
        master_info_port=16010,
        regionserver_info_port=16030,
        # The image builds the jar from coprocessor/ and puts it on the classpath.
        coprocessor=True,
    )


def render_hbase_site(props: dict[str, str], header: str = "") -> str:
    lines = ['<?xml version="1.0"?>', '<?xml-stylesheet type="text/xsl" href="configuration.xsl"?>']
    if header:
        # XML forbids "--" inside a comment, and Hadoop's parser rejects the whole file.
        if "--" in header:
            raise ValueError("an XML comment cannot contain '--'")
        lines.append(f"<!-- {header} -->")
    lines.append("<configuration>")
    for name, value in props.items():
        lines.append("  <property>")
        lines.append(f"    <name>{escape(name)}</name>")
        lines.append(f"    <value>{escape(value)}</value>")
        lines.append("  </property>")
    lines.append("</configuration>")
    return "\n".join(lines) + "\n"


def log4j2_properties_text() -> str:
    return resources.files("caffeine.runtime").joinpath("log4j2.properties").read_text(encoding="utf-8")


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_conf(layout: Layout, settings: Settings) -> Path:
    """Write hbase-site.xml and log4j2.properties under ``<home>/conf``; return that folder."""
    layout.conf_dir.mkdir(parents=True, exist_ok=True)
    site = render_hbase_site(
        for_settings(settings, layout),
        header="Written by `caffeine up` from caffeine/runtime/siteconf.py; edits are overwritten.",
    )
    _write_if_changed(layout.hbase_site, site)
    _write_if_changed(layout.log4j2_properties, log4j2_properties_text())
    return layout.conf_dir


DOCKER_HEADER = (
    "Generated by `python -m caffeine.runtime.siteconf docker`: the same keys as the local "
    "HBase that `caffeine up` starts. Do not edit by hand."
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the hbase-site.xml Caffeine uses.")
    parser.add_argument("variant", nargs="?", choices=("local", "docker"), default="local",
                        help="local: from the CAFFEINE_* settings (default); docker: docker/hbase")
    args = parser.parse_args(argv)
    if args.variant == "docker":
        sys.stdout.write(render_hbase_site(for_docker(), header=DOCKER_HEADER))
    else:
        sys.stdout.write(render_hbase_site(for_settings(Settings())))
    return 0


if __name__ == "__main__":
    sys.exit(main())
