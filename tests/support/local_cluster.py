"""A local cluster of region servers for tests: its settings on free ports, its environment.

Layer: test support. ``cluster_settings(home)`` describes a cluster of ``REGIONSERVERS``
region servers (``caffeine up --regionservers N``) on loopback ports nothing listens on, below
the ephemeral range; ``cluster_env(settings)`` is the environment that points a ``caffeine``
command or a child process at it. The started cluster itself is ``tests/cluster/conftest.py``'s
``running_cluster`` (one per session: five JVMs).
"""

from __future__ import annotations

import random
from pathlib import Path

from caffeine.config import Settings
from caffeine.runtime.ports import port_is_free
from support.cli_helpers import cli_env

REGIONSERVERS = 3
PORT_NAMES = ("zookeeper_port", "master_port", "thrift1_port", "thrift2_port", "thrift1_info_port",
              "thrift2_info_port", "oracle_port", "oracle_standby_port")
CLUSTER_ENV = "CAFFEINE_TEST_CLUSTER"


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


def cluster_env(settings: Settings, **extra) -> dict[str, str]:
    """The environment of a ``caffeine`` command (or a child) that talks to the cluster."""
    names = (*PORT_NAMES, "home", "regionservers", "regionserver_port", "regionserver_info_port", "table_prefix")
    return cli_env(**{name: getattr(settings, name) for name in names}, **extra)


def region_of(key: bytes, keys: tuple[bytes, ...]) -> int:
    """The index of the region holding ``key`` in a table split at ``keys``."""
    return sum(1 for k in keys if key >= k)


def server_address(settings: Settings, k: int) -> str:
    """Region server ``k``'s (1-based) name as HBase reports a region's server."""
    return f"localhost:{settings.regionserver_port + k - 1}"


def regionserver_name(settings: Settings, server: str) -> str:
    """The runtime's piece name (``regionserver-<k>``) of the region server ``localhost:<port>``."""
    port = int(server.rsplit(":", 1)[1])
    return f"regionserver-{port - settings.regionserver_port + 1}"
