"""Settings: where HBase's Thrift servers are, where local state lives, which table prefix.

Layer: shared. Imports nothing from caffeine. Every setting has a default that points at the
local HBase that ``caffeine up`` starts, can be overridden by a ``CAFFEINE_*`` environment
variable (``CAFFEINE_THRIFT2_PORT=9191``), and by command-line flags that build a ``Settings``
with explicit values. The same code therefore points at this machine or at a cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
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
    # Seconds each command gives the servers it needs to answer a first probe before it says
    # which one is silent and what to try (caffeine.preflight); 0 skips the probe.
    preflight_timeout_s: float = 3.0
    # Path of HBase's Thrift2 IDL (hbase.thrift). Default: the copy of HBase 2.6.1's that ships
    # with Caffeine (caffeine/storage/thrift); set it for a server whose IDL differs.
    thrift2_idl: str | None = None
    # Connections kept per Thrift server by each process's pools.
    pool_size: int = 16
    # Every HBase table name is prefixed with this, so several deployments (or test runs)
    # can share one HBase.
    table_prefix: str = "caffeine_"

    # Timestamp oracle (``caffeine oracle``): where it listens and where clients find it, and
    # how far ahead (in wall-clock ms) each persisted high-water mark reaches, i.e. how many
    # timestamps it may hand out per HBase write (caffeine.oracle.server). The block is also
    # the oracle's lease: a standby takes over about ``block + 0.5 s`` after the active
    # oracle stops renewing it (caffeine.oracle.hwm).
    oracle_host: str = "127.0.0.1"
    oracle_port: int = 9099
    oracle_block_ms: int = 3000
    # Port of the standby oracle ``caffeine up`` starts beside the first: it takes over when
    # the active one dies. None: ``oracle_port - 1`` (9098), so moving the oracle's port
    # moves its standby's too; 0: no standby (see ``standby_port``).
    oracle_standby_port: int | None = None
    # Where clients look for the active oracle, tried in order ("host:port,host:port"); a
    # client moves on to the next address when one refuses or is a standby. None: the local
    # pair, ``oracle_host:oracle_port`` then ``oracle_host:standby_port`` (see
    # ``oracle_endpoints``).
    oracle_addresses: str | None = None

    # Transactions (caffeine.percolator). A lock may be cleaned up by others once its TTL has
    # run from the physical part of its start_ts, or at once when its owner stopped
    # heartbeating for ``owner_grace_ms``; live owners refresh the TTL of long commits.
    lock_ttl_ms: int = 3000
    heartbeat_interval_ms: int = 1000
    owner_grace_ms: int = 4000
    # How long a read waits on a live transaction's lock before raising LockWaitTimeout.
    lock_wait_timeout_s: float = 30.0
    # Threads each client process uses to prewrite and commit rows in parallel.
    commit_threads: int = 16
    # How the commit's row steps reach HBase: the name of a commit backend of
    # caffeine.percolator.backends (which lists them, each with what it does, and checks this
    # name at connect), or "auto": the first backend whose probe at connect finds its server
    # side (Caffeine's coprocessor), else the one that needs none (thrift-cas).
    committer: str = "auto"
    # Whether a process combines the storage calls of its concurrent transactions into
    # multi-row calls (caffeine.storage.batching): up to batch_calls_in_flight calls of a
    # kind per table in flight, the calls waiting meanwhile sent together when one returns.
    batching: bool = True
    # How many combined calls of one kind and table a process keeps in flight at once. HBase
    # works a multi-row call on one handler thread: with one, each kind of call is one thread.
    batch_calls_in_flight: int = Field(default=1, ge=1, le=16)
    # How long a call with nothing in flight ahead of it waits for others to join it, in ms
    # (0: not at all; it is sent at once).
    batch_linger_ms: float = 0.0
    # How long a combined call waits, at most, for the other observer runs of its worker
    # process to reach their next call, in ms (caffeine.storage.lockstep; 0: not at all).
    batch_lockstep_ms: float = 20.0
    # Feeds (``caffeine crawl``, ``caffeine ingest``) slow down when the observer workers'
    # backlog would hold a page longer than this many seconds (crawler.backpressure; 0: never).
    freshness_target_s: float = 5.0

    # Local runtime (``caffeine up``): jars, hbase-site.xml, data, logs, pid files.
    home: Path = Field(default=PROJECT_ROOT / "var")
    # HBase release whose jars Maven resolves (caffeine/runtime/pom.xml). 2.6.1 is the only
    # release of hbase-thrift on Maven Central (a Hadoop-2 build); it runs on JDK 17.
    hbase_version: str = "2.6.1"
    # Ports of the local standalone HBase. All are bound to 127.0.0.1 and all can be moved,
    # so a second instance (tests, another checkout) can run beside the first.
    # ZooKeeper port of the standalone HBase (the master aborts if it cannot bind it).
    zookeeper_port: int = 2181
    master_port: int = 16000
    regionserver_port: int = 16020
    # Info (HTTP status) servers of the two Thrift servers; each defaults to 9095 in HBase,
    # so the second one must be moved or it fails to start.
    thrift1_info_port: int = 9095
    thrift2_info_port: int = 9096
    # The standalone JVM holds master, region server and ZooKeeper; 1g ran out of heap under
    # test suites that create hundreds of tables.
    master_heap: str = "3g"
    thrift_heap: str = "384m"
    # Cluster mode (``caffeine up --regionservers N``): 0 runs HBase standalone (one JVM, the
    # default); N >= 1 runs it distributed on this machine: a ZooKeeper (zookeeper_port), an
    # HMaster (master_port) and N region servers, region server k (1..N) on
    # regionserver_port + k - 1, its info server (whose /jmx ``caffeine status`` reads) on
    # regionserver_info_port + k - 1. It is also what ``table_regions`` defaults to.
    regionservers: int = Field(default=0, ge=0, le=9)
    regionserver_info_port: int = 16030
    # Heaps of the cluster mode's JVMs (standalone uses master_heap for its one JVM).
    zookeeper_heap: str = "128m"
    cluster_master_heap: str = "512m"
    regionserver_heap: str = "768m"
    # Regions a table of the data contract is created with, split by the table's split policy
    # (caffeine.index.schema.split_points): 0 means one per region server (``regionservers``),
    # so standalone tables stay one region each. Tables that exist keep their regions.
    table_regions: int = Field(default=0, ge=0, le=64)
    # Table prefix of the local runtime's own state: the oracle started by ``caffeine up``
    # keeps its high-water mark in ``<runtime_table_prefix>oracle``, whatever ``table_prefix``
    # the command that started it had. One oracle serves every prefix on the local HBase,
    # so its table must not go away when one prefix's tables are dropped.
    runtime_table_prefix: str = "caffeine_"
    # Caffeine's HBase coprocessor (coprocessor/, the protocol's row steps inside the region
    # server): whether the local HBase loads it. ``auto``: when its sources are there (a
    # checkout of the repository; ``caffeine up`` builds the jar with Maven once); ``on``: the
    # same, but missing sources are an error; ``off``: never (HBase runs without it).
    coprocessor: Literal["auto", "on", "off"] = "auto"
    # Which server answers Thrift2 on ``thrift2_port``. ``regionserver``: the standalone HBase's
    # region server itself (``RegionServerThrift2`` in Caffeine's coprocessor jar: HBase's own
    # Thrift2 handler on the region server's short-circuit connection), so a call reaches the
    # regions without a second JVM, an RPC or protobuf bytes; ``separate``: HBase's Thrift2
    # server in a JVM of its own (``thrift2_info_port`` is its info port); ``auto``:
    # ``regionserver`` for the standalone HBase unless ``coprocessor`` is ``off``, else
    # ``separate`` (the cluster mode's region servers would each need a port, and clients a
    # route to the one holding a call's rows). Measured in bench/README.md ("Thrift2 inside
    # the region server"). Takes effect at HBase's next start.
    thrift2_server: Literal["auto", "regionserver", "separate"] = "auto"
    # Seconds ``caffeine up`` waits for HBase and both Thrift servers to answer.
    startup_timeout_s: float = 180.0
    # Seconds ``caffeine down`` waits for each process to exit before it sends SIGKILL.
    shutdown_timeout_s: float = 60.0

    # Spark standalone cluster of the local runtime (``caffeine spark up``: caffeine/runtime/spark.py).
    # All bind 127.0.0.1. Worker i (1, 2, ...) listens on ``spark_worker_port + i - 1`` and
    # serves its web UI on ``spark_worker_webui_port + i - 1``.
    spark_master_port: int = 7077
    spark_master_webui_port: int = 8080
    spark_worker_port: int = 7078
    spark_worker_webui_port: int = 8081
    # What each worker offers (``--cores``, ``--memory``), the heap of the master and worker
    # daemons, and the heap of each executor a job on this cluster gets (at most the worker's).
    spark_workers: int = 2
    spark_worker_cores: int = 1
    spark_worker_memory: str = "1g"
    spark_daemon_heap: str = "256m"
    spark_executor_memory: str = "512m"
    # Seconds ``caffeine spark up`` waits for the master and every worker to register.
    spark_startup_timeout_s: float = 90.0

    # Log file of every ``caffeine`` command (what failed, with tracebacks; the terminal gets
    # one line). Default: ``<home>/logs/cli.log``, or the temporary directory.
    cli_log: Path | None = None

    @field_validator("oracle_addresses")
    @classmethod
    def _check_oracle_addresses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_addresses(value)
        return value

    @property
    def standby_port(self) -> int:
        """The standby oracle's port: ``oracle_standby_port``, by default ``oracle_port - 1``; 0: none."""
        if self.oracle_standby_port is None:
            return self.oracle_port - 1 if self.oracle_port > 1 else 0
        return self.oracle_standby_port

    @property
    def oracle_endpoints(self) -> tuple[tuple[str, int], ...]:
        """The oracle addresses clients try, in order: ``oracle_addresses``, or the local pair."""
        if self.oracle_addresses and self.oracle_addresses.strip():
            return parse_addresses(self.oracle_addresses)
        out = [(self.oracle_host, self.oracle_port)]
        if self.standby_port and self.standby_port != self.oracle_port:
            out.append((self.oracle_host, self.standby_port))
        return tuple(out)

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def regions_per_table(self) -> int:
        """How many regions a new table of the data contract gets (``table_regions``, or one
        per region server of the cluster mode, one in standalone)."""
        return self.table_regions or max(1, self.regionservers)


def parse_addresses(text: str) -> tuple[tuple[str, int], ...]:
    """``"a:1, [::1]:2"`` -> ``(("a", 1), ("::1", 2))``; ``ValueError`` naming a bad entry."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{item!r} is not host:port (a list looks like 127.0.0.1:9099,127.0.0.1:9098)")
        out.append((host, int(port)))
    return tuple(out)


def load_settings(**overrides) -> Settings:
    """Settings from the environment, with explicit (non-None) overrides on top."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})
