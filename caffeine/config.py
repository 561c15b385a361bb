"""Settings: where HBase's Thrift servers are, where local state lives, which table prefix.

Layer: leaf (imports nothing from caffeine). Every setting has a default that points at the
local HBase that ``caffeine up`` starts, can be overridden by a ``CAFFEINE_*`` environment
variable (``CAFFEINE_THRIFT2_PORT=9191``), and by command-line flags that build a ``Settings``
with explicit values. The same code therefore points at this machine or at a cluster.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    """All knobs, read from ``CAFFEINE_<NAME>`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="CAFFEINE_", frozen=True, extra="ignore")

    # Thrift1 (happybase: admin, reads, scans) and Thrift2 (atomic row mutations, check-and-mutate).
    thrift1_host: str = "127.0.0.1"
    thrift1_port: int = 9090
    thrift2_host: str = "127.0.0.1"
    thrift2_port: int = 9091
    # Socket timeout for every Thrift call. A conditional write that times out has an unknown
    # outcome and is resolved by re-reading (see caffeine.storage.hbase).
    thrift_timeout_ms: int = 30_000
    # Connections kept per Thrift server by each process's pools.
    pool_size: int = 16
    # Every HBase table name is prefixed with this, so several deployments (or test runs)
    # can share one HBase.
    table_prefix: str = "caffeine_"

    # Local runtime (``caffeine up``): jars, hbase-site.xml, data, logs, pid files.
    home: Path = Field(default=PROJECT_ROOT / "var")
    # ZooKeeper port of the standalone HBase (the master aborts if it cannot bind it).
    zookeeper_port: int = 2181
    master_heap: str = "1g"
    thrift_heap: str = "384m"
    # Seconds ``caffeine up`` waits for HBase and both Thrift servers to answer.
    startup_timeout_s: float = 180.0

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"


def load_settings(**overrides) -> Settings:
    """Settings from the environment, with explicit (non-None) overrides on top."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
