"""``caffeine scan``: committed values at one snapshot over a range; ``--raw`` protocol cells."""

from __future__ import annotations

import json
import uuid

from caffeine.ops import scan
from caffeine.percolator import testing as txn_steps
from caffeine.ops.rows import RowRange
from support.cli_helpers import assert_no_stack_trace, cli_env, run_cli
from support.session import SESSION_PREFIX


def test_a_snapshot_scan_shows_committed_values_at_its_timestamp_only(cluster):
    table = "scan_" + uuid.uuid4().hex[:6]
    cluster.create_table(table)
    with cluster.begin() as txn:
        for i in range(5):
            txn.set(table, b"k%d" % i, "v", b"old")
        txn.set(table, b"other", "v", b"x")
    before = cluster.begin()
    before_ts = before.start_ts
    before.rollback()
    with cluster.begin() as txn:
        txn.set(table, b"k1", "v", b"new")
        txn.delete(table, b"k2", "v")
    rolled_back = cluster.begin()
    rolled_back.set(table, b"k3", "v", b"never committed")
    txn_steps.prewrite(rolled_back)
    rolled_back.rollback()

    ts, rows = scan.committed_rows(cluster, table, RowRange.of(prefix="k"), ["v"], snapshot_ts=before_ts)
    assert ts == before_ts
    assert [(k, v["v"]) for k, v in rows] == [(b"k%d" % i, b"old") for i in range(5)]
    _, rows = scan.committed_rows(cluster, table, RowRange.of(prefix="k"), None, limit=3)
    assert [(k, v) for k, v in rows] == [(b"k0", {"v": b"old"}), (b"k1", {"v": b"new"}), (b"k3", {"v": b"old"})]


def test_text_and_json_forms_keep_bytes_that_are_not_text():
    assert scan.format_row(b"\xff\x01", {"c": b"\x00\x01", "t": b"a\nb"}).splitlines() == [
        "0xff01", "  c = b'\\x00\\x01'", "  t = a\\nb"]
    line = json.loads(scan.row_json(b"\xff", {"c": b"\xfe", "t": "é".encode()}, 7))
    assert line == {"row": {"hex": "ff"}, "snapshot_ts": 7, "columns": {"c": {"hex": "fe"}, "t": "é"}}


def test_the_scan_command_on_real_hbase_text_json_and_raw(hbase_store, hbase_settings):
    from caffeine.percolator.cluster import Cluster
    from support.session import oracle_for

    table = "scancli_" + uuid.uuid4().hex[:6]
    cluster = Cluster(hbase_store, oracle_for(hbase_settings), hbase_settings)
    try:
        cluster.create_table(table)
        with cluster.begin() as txn:
            txn.set(table, "a/1", "title", "One")
            txn.set(table, "a/2", "title", "Two")
            txn.set(table, "b/1", "title", "Other")
            txn.notify(table, "a/2", "title")
    finally:
        cluster.executor.shutdown(wait=True)
        cluster.owners.close()
        cluster.oracle.close()
    env = cli_env(table_prefix=SESSION_PREFIX)

    text = run_cli("scan", table, "--row-prefix", "a/", env=env)
    assert text.returncode == 0, text.stderr
    assert text.stdout.splitlines() == ["a/1", "  title = One", "a/2", "  title = Two"]
    assert "2 rows" in text.stderr and "snapshot " in text.stderr

    as_json = run_cli("scan", table, "--start", "a/2", "--json", env=env)
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["row"], r["columns"]) for r in rows] == [("a/2", {"title": "Two"}), ("b/1", {"title": "Other"})]
    assert len({r["snapshot_ts"] for r in rows}) == 1

    raw = run_cli("scan", table, "--row-prefix", "a/2", "--raw", "--json", env=env)
    cells = json.loads(raw.stdout)["cells"]
    families = sorted(c["family"] for c in cells)
    assert families == ["data", "notify", "write"], cells
    write = next(c for c in cells if c["family"] == "write")
    data = next(c for c in cells if c["family"] == "data")
    assert write["meaning"] == f"data @ {data['ts']}" and data["value"] == "Two"

    missing = run_cli("scan", "no_such_table_" + uuid.uuid4().hex[:6], env=env)
    assert missing.returncode != 0
    assert_no_stack_trace(missing.stderr)
