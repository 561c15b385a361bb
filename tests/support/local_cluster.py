"""A local cluster of region servers for tests: its settings on free ports, its environment.

Layer: test support. ``cluster_settings(home)`` describes a cluster of ``REGIONSERVERS``
region servers (``caffeine up --regionservers N``) on loopback ports nothing listens on, below
the ephemeral range; ``cluster_env(settings)`` is the environment that points a ``caffeine``
command or a child process at it. The started cluster itself is ``tests/cluster/conftest.py``'s
``running_cluster`` (one per session: five JVMs).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from caffeine.config import Settings, load_settings
from caffeine.runtime.home import Layout
from support.cli_helpers import cli_env
from support.ports import free_port_blocks

REGIONSERVERS = 3
PORT_NAMES = ("zookeeper_port", "master_port", "thrift1_port", "thrift2_port", "thrift1_info_port",
              "thrift2_info_port", "oracle_port", "oracle_standby_port")
CLUSTER_ENV = "CAFFEINE_TEST_CLUSTER"


def home_beside_the_suites(name: str) -> Path:
    """A new home ``<the suite's runtime home>/test-clusters/<name>-<id>`` for a runtime a test
    starts beside the suite's: under that home, so whoever stops the suite's runtime finds one
    left running if the session is killed first (.ci/run does), with HBase's jars and the
    coprocessor jar linked from the suite's runtime, so it does not fetch them again."""
    suite = Layout.from_settings(load_settings())
    home = suite.home / "test-clusters" / f"{name}-{uuid.uuid4().hex[:8]}"
    home.mkdir(parents=True)
    suite.lib_root.mkdir(parents=True, exist_ok=True)
    (home / "lib").symlink_to(suite.lib_root, target_is_directory=True)
    return home


def cluster_settings(home: Path, **extra) -> Settings:
    """A cluster of ``REGIONSERVERS`` region servers under ``home``, on ports nothing listens on."""
    *singles, rs, info = free_port_blocks([1] * len(PORT_NAMES) + [REGIONSERVERS, REGIONSERVERS])
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
