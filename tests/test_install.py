"""What a plain ``pip install`` gives a client: the Thrift2 IDL without Maven or HBase's jars."""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from caffeine.config import load_settings
from caffeine.storage.idl import PACKAGED_IDL, thrift2_idl_path

# caffeine/storage/thrift/NOTICE records this digest of the file copied from hbase-thrift 2.6.1.
IDL_SHA256 = "c9737f3d3834d082b71ca31bc288eb35f212aa736ac2dd9a36d866345af93299"


def test_the_thrift2_idl_ships_with_the_package_and_is_what_the_storage_layer_loads():
    assert thrift2_idl_path(load_settings(thrift2_idl=None)) == PACKAGED_IDL
    assert hashlib.sha256(PACKAGED_IDL.read_bytes()).hexdigest() == IDL_SHA256
    notice = (PACKAGED_IDL.parent / "NOTICE").read_text()
    assert "hbase-thrift:2.6.1" in notice and "Apache License, Version 2.0" in notice and IDL_SHA256 in notice
    from caffeine.storage.hbase import load_thrift2

    t2 = load_thrift2(str(PACKAGED_IDL))
    assert "checkAndMutate" in t2.THBaseService.thrift_services and hasattr(t2, "TRowMutations")


def test_the_packaged_idl_equals_the_one_in_the_runtimes_hbase_thrift_jar():
    settings = load_settings()
    jar = settings.home / "lib" / f"hbase-{settings.hbase_version}" / f"hbase-thrift-{settings.hbase_version}.jar"
    if not jar.exists():
        pytest.skip(f"{jar} not resolved here (`caffeine up` resolves it)")
    if settings.hbase_version != "2.6.1":
        pytest.skip("the packaged IDL is 2.6.1's")
    with zipfile.ZipFile(jar) as zf:
        assert zf.read("org/apache/hadoop/hbase/thrift2/hbase.thrift") == PACKAGED_IDL.read_bytes()


def test_a_client_store_does_not_need_the_runtime(monkeypatch):
    """Opening a store must not resolve jars: the local runtime's IDL lookup is never called."""
    import caffeine.runtime.local as local
    from caffeine.storage.hbase import HBaseStore

    def refuse(*a, **kw):
        raise AssertionError("a client store asked the local runtime for the IDL")

    monkeypatch.setattr(local.LocalHBase, "thrift2_idl_path", refuse)
    store = HBaseStore(load_settings(thrift2_idl=None))
    store.close()
