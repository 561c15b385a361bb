"""What a plain ``pip install`` gives a client: the Thrift2 IDL without Maven or HBase's jars."""

from __future__ import annotations

import hashlib
import sys
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


def test_caffeine_batch_without_pyspark_names_the_extra_to_install(monkeypatch, capsys):
    import sys

    from caffeine.commands.cli import main

    monkeypatch.setitem(sys.modules, "pyspark", None)  # `import pyspark` now fails as if absent
    monkeypatch.setenv("CAFFEINE_PREFLIGHT_TIMEOUT_S", "0")
    for command in ("batch", "verify"):
        assert main([command]) == 1
        err = capsys.readouterr().err
        assert "PySpark is not installed" in err and "caffeine[spark]" in err, err
        assert "Traceback" not in err


@pytest.mark.hbase
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_fresh_virtualenv_without_pyspark_installs_and_runs_the_demo(hbase_store, hbase_settings, tmp_path):
    """The README's demo command with what `pip install -e .` installs, in a fresh virtual
    environment: no PySpark, no matplotlib, no HBase jars (a fresh CAFFEINE_HOME), against
    the running HBase and oracle (``--no-start``: the demo must not start or stop them)."""
    import os
    import subprocess
    import uuid

    from support.cli_helpers import ROOT

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", "-e", str(ROOT)],
                             capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stdout + install.stderr
    for optional in ("pyspark", "matplotlib", "pytest"):
        absent = subprocess.run([str(python), "-c", f"import {optional}"], capture_output=True, timeout=60)
        assert absent.returncode != 0, f"{optional} was installed by `pip install -e .`"

    prefix = f"{hbase_settings.table_prefix}venv{uuid.uuid4().hex[:4]}_"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(CAFFEINE_HOME=str(tmp_path / "home"), CAFFEINE_TABLE_PREFIX=prefix)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    version = subprocess.run(["caffeine", "--version"], env=env, capture_output=True, text=True, timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("caffeine "), version.stdout + version.stderr
    try:
        demo = subprocess.run(["caffeine", "demo", "--pages", "60", "--workers", "1", "--threads", "4", "--no-start"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
        assert "answer already: using them" in demo.stdout
        assert "documents in the index:" in demo.stdout and "search '" in demo.stdout
        assert "[7/7] done" in demo.stdout
        assert not (tmp_path / "home" / "lib").exists(), "the demo resolved HBase's jars"
        batch = subprocess.run(["caffeine", "batch"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert batch.returncode == 1 and "caffeine[spark]" in batch.stderr, batch.stderr
    finally:
        from caffeine.storage.hbase import HBaseStore

        store = HBaseStore(hbase_settings.model_copy(update={"table_prefix": prefix}))
        for table in store.list_tables():
            store.drop_table(table)
        store.close()
