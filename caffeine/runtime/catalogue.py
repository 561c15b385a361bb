"""The runtime's catalogue: its pieces, what each runs, on which ports, in which environment.

Layer: runtime. Imports ``caffeine.config`` only. Five pieces (four with no standby), each one
process, all bound to ``HOST`` (127.0.0.1):

- ``hbase``    JVM ``HMaster start`` in standalone mode: master + region server + ZooKeeper
               (ports: zookeeper_port, master_port, regionserver_port)
- ``thrift1``  JVM ``thrift.ThriftServer`` (happybase's protocol; thrift1_port, thrift1_info_port)
- ``thrift2``  JVM ``thrift2.ThriftServer`` (atomic row mutations; thrift2_port, thrift2_info_port)
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

Contract: ``pieces_for(settings)`` lists them in start order (stop order is the reverse); a
piece's first port is its service port, and every port names the ``Settings`` field
(``CAFFEINE_<SETTING>``) that moves it, so a conflict can say how to resolve it.
``oracle_env(...)`` is the oracle process's environment, every setting pinned. Pure values:
nothing here looks at the machine.
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


@dataclass(frozen=True)
class Piece:
    name: str
    title: str
    main_class: str  # a Java main class, or the Python module run with ``-m`` (kind "python")
    args: tuple[str, ...]
    heap: str  # JVMs only
    ports: tuple[Port, ...]
    kind: str = "jvm"  # "jvm" or "python"

    @property
    def service_port(self) -> Port:
        return self.ports[0]


def pieces_for(settings: Settings) -> tuple[Piece, ...]:
    """The pieces in start order (``down`` stops them in reverse); the standby only when its
    port is set."""

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
        )

    return (
        Piece(
            name="hbase",
            title="HBase standalone (master + region server + ZooKeeper)",
            main_class=MASTER_CLASS,
            args=("start",),
            heap=settings.master_heap,
            ports=(
                Port("ZooKeeper", settings.zookeeper_port, "zookeeper_port"),
                Port("master", settings.master_port, "master_port"),
                Port("region server", settings.regionserver_port, "regionserver_port"),
            ),
        ),
        thrift("thrift1", "Thrift1 server (happybase)", THRIFT1_CLASS, settings.thrift1_port,
               settings.thrift1_info_port, "thrift1_port", "thrift1_info_port", "Thrift1"),
        thrift("thrift2", "Thrift2 server", THRIFT2_CLASS, settings.thrift2_port,
               settings.thrift2_info_port, "thrift2_port", "thrift2_info_port", "Thrift2"),
        oracle(ORACLE, "Timestamp oracle", settings.oracle_port, "oracle_port", "oracle"),
    ) + ((oracle(STANDBY, "Standby timestamp oracle", standby, "oracle_standby_port", "standby oracle"),)
         if standby else ())


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
