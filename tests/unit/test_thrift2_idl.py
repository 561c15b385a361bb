"""The Thrift2 IDL loader: one parse per path, and each path its own module."""

from __future__ import annotations

from caffeine.storage.thrift2 import load_thrift2
from caffeine.storage.idl import PACKAGED_IDL


def test_two_idl_paths_load_as_two_modules(tmp_path):
    """thriftpy2 caches a parse by module name: two paths loaded under one name gave the
    second caller the first path's module (a runtime reading its HBase jar's IDL after a
    client loaded the packaged one got the packaged one)."""
    other = tmp_path / "hbase-extended.thrift"
    other.write_text(PACKAGED_IDL.read_text() + "\nstruct TCaffeineOnlyHere {\n  1: optional i32 x\n}\n")
    packaged = load_thrift2(str(PACKAGED_IDL))
    extended = load_thrift2(str(other))
    assert hasattr(extended, "TCaffeineOnlyHere") and not hasattr(packaged, "TCaffeineOnlyHere")
    assert load_thrift2(str(PACKAGED_IDL)) is packaged and load_thrift2(str(other)) is extended
