"""Where the Thrift2 IDL (HBase's ``hbase.thrift``) comes from.

Layer: storage. Imports ``caffeine.config`` only. The IDL of HBase 2.6.1's Thrift2 server
ships inside this package (``caffeine/storage/thrift/hbase.thrift``, Apache-2.0, origin in
``thrift/NOTICE``), so a client on any machine (a cluster client, a Spark executor, a
``pip install`` without HBase's jars) loads it from here. ``CAFFEINE_THRIFT2_IDL`` overrides it,
for a server of another HBase version whose IDL differs.
"""

from __future__ import annotations

from pathlib import Path

from caffeine.config import Settings

PACKAGED_IDL = Path(__file__).resolve().parent / "thrift" / "hbase.thrift"


def thrift2_idl_path(settings: Settings | None = None) -> Path:
    """The IDL to load: ``settings.thrift2_idl`` if set, else the packaged one."""
    if settings is not None and settings.thrift2_idl:
        return Path(settings.thrift2_idl)
    return PACKAGED_IDL


__all__ = ["PACKAGED_IDL", "thrift2_idl_path"]
