"""The runtime's catalogue: its pieces, what each runs, on which ports, in which environment.

Layer: runtime. Imports ``caffeine.config`` only. Every piece is one process, bound to
``HOST`` (127.0.0.1). Standalone (``Settings.regionservers`` 0, the default), four pieces
(three with no standby; five with a Thrift2 JVM):

- ``hbase``    JVM ``HMaster start`` in standalone mode: master + region server + ZooKeeper
               (ports: zookeeper_port, master_port, regionserver_port)
- ``thrift1``  JVM ``thrift.ThriftServer`` (happybase's protocol; thrift1_port, thrift1_info_port)
- ``thrift2``  JVM ``thrift2.ThriftServer`` (atomic row mutations; thrift2_port, thrift2_info_port),
               only when ``thrift2_in_regionserver(settings)`` is false: by default
               (``Settings.thrift2_server`` ``auto`` with the coprocessor) the ``hbase``
               piece's region server answers Thrift2 on thrift2_port itself, one of its ports
- ``oracle``   Python ``caffeine.oracle`` (oracle_port), run through
               ``caffeine.runtime.oracle_main`` with the runtime's marker arguments. It keeps
               its high-water mark in HBase (table ``<runtime_table_prefix>oracle``), so it
               starts only once HBase and both Thrift servers are healthy, and stops before them.
- ``standby``  the same, on ``Settings.standby_port`` (oracle_standby_port; none when 0): a
               second oracle of the same deployment that takes over when the first dies.
               Both run with ``--standby``, so whichever holds the lease serves and the other
               waits, refusing requests; a crashed one restarted comes back as the standby.
               Started after the first answers (so the first is normally the active one),
               stopped before it (so ``down`` hands nothing over).

Cluster mode (``regionservers`` N >= 1): HBase distributed on this machine, its own servers
in place of ``hbase``:

- ``zookeeper``       JVM ``HQuorumPeer`` (a one-server ZooKeeper; zookeeper_port)
- ``master``          JVM ``HMaster start``, distributed (master_port)
- ``regionserver-k``  JVM ``HRegionServer start`` for k = 1..N, each with its own ports given
                      as generic options (``-Dhbase.regionserver.port=...``, as HBase's
                      ``local-regionservers.sh`` does): regionserver_port + k - 1 and its info
                      server's regionserver_info_port + k - 1

then ``thrift1``, ``thrift2`` (always its own JVM here), ``oracle`` and ``standby`` as above.

Contract: ``pieces_for(settings)`` lists them in start order (stop order is the reverse,
except that the region servers stop with the master: ``shutdown``); a piece's first port is
its service port, and every port names the ``Settings`` field (``CAFFEINE_<SETTING>``) that
moves it, with the offset a region server adds, so a conflict can say how to resolve it.
``Piece.role`` says what a piece is ("hbase" standalone, "zookeeper", "master",
"regionserver", "thrift1", "thrift2", "oracle" for the oracle and its standby), whatever its
name. ``regionservers_running`` tells the mode from the names of the processes that run, so
``status`` and ``down`` see a cluster whatever the settings of the command that asks.
``thrift2_in_regionserver(settings)`` says which server answers Thrift2, and
``thrift2_port_of(piece)`` which port of a piece is Thrift2's (the ``thrift2`` piece's, or the
standalone ``hbase`` piece's when its region server serves it).
``oracle_env(...)`` is the oracles' environment, every setting pinned. Pure values: nothing
here looks at the machine.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from caffeine.config import Settings

HOST = "127.0.0.1"
MASTER_CLASS = "org.apache.hadoop.hbase.master.HMaster"
THRIFT1_CLASS = "org.apache.hadoop.hbase.thrift.ThriftServer"
THRIFT2_CLASS = "org.apache.hadoop.hbase.thrift2.ThriftServer"
ZOOKEEPER_CLASS = "org.apache.hadoop.hbase.zookeeper.HQuorumPeer"
REGIONSERVER_CLASS = "org.apache.hadoop.hbase.regionserver.HRegionServer"
# Piece roles: the pieces that run an HMaster (its log says when it is initialized; the
# standalone one is stopped with a cluster shutdown), and all of HBase's own servers.
MASTER_ROLES = frozenset({"hbase", "master"})
HBASE_ROLES = frozenset({"hbase", "zookeeper", "master", "regionserver"})
REGIONSERVER_PREFIX = "regionserver-"
ORACLE = "oracle"
STANDBY = "standby"
# The pieces that are timestamp oracles (Python processes of ``ORACLE_MODULE``).
ORACLES = (ORACLE, STANDBY)
# What ``caffeine up`` runs for the oracle: ``python -m caffeine.oracle`` plus our markers.
ORACLE_MODULE = "caffeine.runtime.oracle_main"


@dataclass(frozen=True)
class Port:
    label: str  # what it is, for people: "ZooKeeper", "Thrift1 info"
    number: int
    setting: str  # the Settings field (CAFFEINE_<SETTING>) that moves it
    offset: int = 0  # added to that setting's value (region server k: k - 1)

    def how_to_move(self) -> str:
        """What to set to move this port, for messages."""
        how = f"CAFFEINE_{self.setting.upper()}=<free port>"
        return how + (f" (this one is that port + {self.offset})" if self.offset else "")


@dataclass(frozen=True)
class Piece:
    name: str
    title: str
    main_class: str  # a Java main class, or the Python module run with ``-m`` (kind "python")
    args: tuple[str, ...]
    heap: str  # JVMs only
    ports: tuple[Port, ...]
    kind: str = "jvm"  # "jvm" or "python"
    role: str = ""  # see the module docstring; defaults to the name

    def __post_init__(self) -> None:
        if not self.role:
            object.__setattr__(self, "role", self.name)

    @property
    def service_port(self) -> Port:
        return self.ports[0]


def thrift2_in_regionserver(settings: Settings) -> bool:
    """Whether the standalone HBase's region server answers Thrift2 on ``thrift2_port`` (no
    ``thrift2`` piece runs), by ``Settings.thrift2_server``: ``auto`` means yes for the
    standalone HBase unless the coprocessor is ``off``. ``regionserver`` where it cannot serve
    (the cluster mode, no coprocessor) is refused by ``coprocessor.check_thrift2_server``."""
    if settings.thrift2_server != "auto":
        return settings.thrift2_server == "regionserver"
    return settings.regionservers <= 0 and settings.coprocessor != "off"


def thrift2_port_of(piece: Piece) -> Port | None:
    """The port on which ``piece`` answers Thrift2, or None."""
    return next((p for p in piece.ports if p.setting == "thrift2_port"), None)


def pieces_for(settings: Settings) -> tuple[Piece, ...]:
    """The pieces in start order (``down`` stops them in reverse); ``thrift2`` only when the
    region server does not serve it, the standby only when its port is set."""

    def thrift(name: str, title: str, cls: str, port: int, info: int, pset: str, iset: str, label: str) -> Piece:
        return Piece(
            name=name,
            title=title,
            main_class=cls,
            # -threadpool: buffered transport + binary protocol, what happybase and our
            # thriftpy2 client speak (-hsha / -nonblocking would force framed transport).
            args=("-b", HOST, "-p", str(port), "--infoport", str(info), "-threadpool", "start"),
            heap=settings.thrift_heap,
            ports=(Port(label, port, pset), Port(f"{label} info", info, iset)),
        )

    hbase = hbase_pieces(settings)
    standby = settings.standby_port

    def oracle(name: str, title: str, port: int, setting: str, label: str) -> Piece:
        return Piece(
            name=name,
            title=title,
            main_class=ORACLE_MODULE,
            # Host and port on the command line (visible in ps); everything else, block size
            # and table prefix included, comes from the environment (oracle_env). With a
            # standby, both wait for a lease the other holds instead of refusing to start.
            args=("--host", HOST, "--port", str(port)) + (("--standby",) if standby else ()),
            heap="",
            ports=(Port(label, port, setting),),
            kind="python",
            role=ORACLE,
        )

    return (
        *hbase,
        thrift("thrift1", "Thrift1 server (happybase)", THRIFT1_CLASS, settings.thrift1_port,
               settings.thrift1_info_port, "thrift1_port", "thrift1_info_port", "Thrift1"),
        *(() if thrift2_in_regionserver(settings) else (
            thrift("thrift2", "Thrift2 server", THRIFT2_CLASS, settings.thrift2_port,
                   settings.thrift2_info_port, "thrift2_port", "thrift2_info_port", "Thrift2"),)),
        oracle(ORACLE, "Timestamp oracle", settings.oracle_port, "oracle_port", "oracle"),
    ) + ((oracle(STANDBY, "Standby timestamp oracle", standby, "oracle_standby_port", "standby oracle"),)
         if standby else ())


def hbase_pieces(settings: Settings) -> tuple[Piece, ...]:
    """HBase's own servers: the standalone JVM, or ZooKeeper, the master and the region servers."""
    if settings.regionservers <= 0:
        return (
            Piece(
                name="hbase",
                title="HBase standalone (master + region server + ZooKeeper"
                      + (", Thrift2 in the region server)" if thrift2_in_regionserver(settings) else ")"),
                main_class=MASTER_CLASS,
                args=("start",),
                heap=settings.master_heap,
                ports=(
                    Port("ZooKeeper", settings.zookeeper_port, "zookeeper_port"),
                    Port("master", settings.master_port, "master_port"),
                    Port("region server", settings.regionserver_port, "regionserver_port"),
                    # Thrift2, when the region server answers it (thrift2_in_regionserver).
                    *((Port("Thrift2", settings.thrift2_port, "thrift2_port"),)
                      if thrift2_in_regionserver(settings) else ()),
                ),
            ),
        )
    zookeeper = Piece(
        name="zookeeper",
        title="ZooKeeper (HBase's HQuorumPeer, one server)",
        main_class=ZOOKEEPER_CLASS,
        args=(),
        heap=settings.zookeeper_heap,
        ports=(Port("ZooKeeper", settings.zookeeper_port, "zookeeper_port"),),
    )
    master = Piece(
        name="master",
        title="HBase master",
        main_class=MASTER_CLASS,
        args=("start",),
        heap=settings.cluster_master_heap,
        ports=(Port("master", settings.master_port, "master_port"),),
    )
    return (zookeeper, master, *(regionserver_piece(settings, k) for k in range(1, settings.regionservers + 1)))


def regionserver_piece(settings: Settings, k: int) -> Piece:
    """Region server ``k`` (1-based) of the cluster mode."""
    port = settings.regionserver_port + k - 1
    info = settings.regionserver_info_port + k - 1
    return Piece(
        name=f"{REGIONSERVER_PREFIX}{k}",
        title=f"HBase region server {k}",
        main_class=REGIONSERVER_CLASS,
        # Generic options (HBase's ServerCommandLine parses them), so every region server
        # shares the one hbase-site.xml.
        args=(f"-Dhbase.regionserver.port={port}", f"-Dhbase.regionserver.info.port={info}", "start"),
        heap=settings.regionserver_heap,
        ports=(
            Port("region server", port, "regionserver_port", k - 1),
            Port("region server info", info, "regionserver_info_port", k - 1),
        ),
        role="regionserver",
    )


def regionservers_running(names) -> int | None:
    """The mode that the running processes' piece names show: 0 standalone, N region servers
    (the highest k of a running ``regionserver-k``; 1 when only a master or ZooKeeper of a
    cluster runs), None when no HBase server runs."""
    names = set(names)
    ks = [int(n[len(REGIONSERVER_PREFIX):]) for n in names
          if n.startswith(REGIONSERVER_PREFIX) and n[len(REGIONSERVER_PREFIX):].isdigit()]
    if ks:
        return max(ks)
    if names & {"zookeeper", "master"}:
        return 1
    if "hbase" in names:
        return 0
    return None


def master_piece(pieces: tuple[Piece, ...]) -> Piece | None:
    """The piece that runs the HMaster (standalone: the one JVM); None among pieces without one."""
    return next((p for p in pieces if p.role in MASTER_ROLES), None)


def describe_mode(settings: Settings) -> str:
    n = settings.regionservers
    if n > 0:
        return f"a cluster of {n} region server{'s' if n != 1 else ''}"
    return "standalone, Thrift2 " + ("in the region server" if thrift2_in_regionserver(settings) else "in a JVM of its own")


def oracle_env(settings: Settings, thrift2_idl: Path | None, base: dict[str, str] | None = None) -> dict[str, str]:
    """The oracle process's environment: ``base`` (default ours) with every setting pinned.

    Each ``Settings`` field is written as its ``CAFFEINE_*`` variable, so the oracle runs with
    exactly the settings of the ``LocalHBase`` that starts it (also when those were passed
    explicitly rather than read from the environment), and ``thrift2_idl`` points at the IDL
    already extracted, so the oracle never resolves jars itself. ``PYTHONPATH`` starts with the
    directory this ``caffeine`` package was imported from, so the oracle runs the same code
    as its parent even when another checkout is installed. Unbuffered, so its log is current.
    """
    env = dict(os.environ if base is None else base)
    values = settings.model_dump()
    if thrift2_idl is not None and not values.get("thrift2_idl"):
        values["thrift2_idl"] = str(thrift2_idl)
    for name, value in values.items():
        key = f"CAFFEINE_{name.upper()}"
        if value is None:
            env.pop(key, None)
        elif isinstance(value, (list, tuple, set, dict)):
            # Complex values the way pydantic-settings parses them from the environment.
            env[key] = json.dumps(list(value) if isinstance(value, (tuple, set)) else value)
        else:
            env[key] = str(value)
    root = str(Path(__file__).resolve().parents[2])
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    env["PYTHONPATH"] = os.pathsep.join([root, *rest])
    # The oracle serves every table prefix of this HBase: its high-water mark lives under the
    # runtime's prefix, not under that of whichever command happened to start it.
    env["CAFFEINE_TABLE_PREFIX"] = settings.runtime_table_prefix
    env["PYTHONUNBUFFERED"] = "1"
    return env
