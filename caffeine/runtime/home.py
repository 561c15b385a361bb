"""Where the local HBase keeps its files, all under one project-local ``Settings.home``.

Layer: runtime. Imports only ``caffeine.config``. Contract: every path is absolute and derived
from ``Settings.home`` alone, so two homes never share state, deleting ``<home>`` resets the
local HBase completely, and nothing is written to /tmp or to the user's home (except Maven's
own ~/.m2 download cache)::

    <home>/lib/hbase-<version>/   jars resolved by Maven (complete when its marker file exists)
    <home>/conf/                  hbase-site.xml, log4j2.properties (rewritten by every ``up``)
    <home>/data/hbase             hbase.rootdir (tables, WALs): survives ``down`` / ``up``
    <home>/data/zookeeper         the in-process ZooKeeper's data
    <home>/logs/<piece>.log       stdout+stderr of each JVM (previous run: <piece>.log.1)
    <home>/run/<piece>.pid        pid of each running JVM
    <home>/tmp/                   java.io.tmpdir and hbase.tmp.dir (Jetty unpacks webapps here)
    <home>/idl/hbase-<version>/   the Thrift2 IDL extracted from the hbase-thrift jar
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from caffeine.config import Settings


@dataclass(frozen=True)
class Layout:
    home: Path
    hbase_version: str

    @classmethod
    def from_settings(cls, settings: Settings) -> "Layout":
        # resolve(): the paths end up in hbase-site.xml and in JVM flags, which need them
        # absolute; a relative CAFFEINE_HOME would otherwise depend on the caller's cwd.
        return cls(home=Path(settings.home).expanduser().resolve(), hbase_version=settings.hbase_version)

    @property
    def lib_root(self) -> Path:
        return self.home / "lib"

    @property
    def lib_dir(self) -> Path:
        return self.lib_root / f"hbase-{self.hbase_version}"

    @property
    def conf_dir(self) -> Path:
        return self.home / "conf"

    @property
    def hbase_site(self) -> Path:
        return self.conf_dir / "hbase-site.xml"

    @property
    def log4j2_properties(self) -> Path:
        return self.conf_dir / "log4j2.properties"

    @property
    def data_dir(self) -> Path:
        return self.home / "data"

    @property
    def hbase_root_dir(self) -> Path:
        return self.data_dir / "hbase"

    @property
    def zookeeper_data_dir(self) -> Path:
        return self.data_dir / "zookeeper"

    @property
    def logs_dir(self) -> Path:
        return self.home / "logs"

    @property
    def run_dir(self) -> Path:
        return self.home / "run"

    @property
    def tmp_dir(self) -> Path:
        return self.home / "tmp"

    @property
    def hbase_tmp_dir(self) -> Path:
        return self.tmp_dir / "hbase"

    @property
    def idl_dir(self) -> Path:
        return self.home / "idl" / f"hbase-{self.hbase_version}"

    @property
    def thrift2_idl(self) -> Path:
        """The Thrift2 IDL of this HBase version, once ``jars.thrift2_idl_path`` extracted it
        from the hbase-thrift jar: what the runtime's probes and its oracle load."""
        return self.idl_dir / "hbase.thrift"

    def log_file(self, piece: str) -> Path:
        return self.logs_dir / f"{piece}.log"

    def pid_file(self, piece: str) -> Path:
        return self.run_dir / f"{piece}.pid"

    def make_dirs(self) -> None:
        """Create every directory of the layout (idempotent)."""
        for d in (
            self.lib_root,
            self.conf_dir,
            self.hbase_root_dir,
            self.zookeeper_data_dir,
            self.logs_dir,
            self.run_dir,
            self.hbase_tmp_dir,
            self.idl_dir,
        ):
            d.mkdir(parents=True, exist_ok=True)
