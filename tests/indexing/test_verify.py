"""``caffeine verify`` on real HBase: the incremental index equals the batch recomputation.

Pages are written into ``repository`` the way the crawler writes them, the observer chain runs
in-process until quiescent, then the Spark job (local mode) recomputes everything at one
snapshot and ``spark.verify`` compares the six logical tables cell by cell: no difference,
before and after pages change, disappear (404), turn into non-HTML, fail with a 5xx (the last
good version is kept, which the batch reader finds by walking back through older snapshots)
and new pages arrive (impacts cells whose posting's level changed are tombstoned). Then a
tampered cell on each side is reported.
"""

from __future__ import annotations

import json
import random

import pytest

from caffeine.observers.app import application
from caffeine.index.impacts import impact_qualifier
from caffeine.index.schema import (
    DUPS,
    IMPACTS,
    IMPACTS_FAMILY,
    PAGE_CONTENT,
    PAGE_META,
    POSTINGS,
    POSTINGS_FAMILY,
    REPOSITORY,
    counted_families,
)
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.percolator.worker import Worker
from spark.hbase_io import BATCH_TABLES, read_batch_tables
from spark.verify import Difference, diff_tables, incremental_tables, verify

WORDS = "oak ash elm fir yew pine beech birch cedar maple alder willow hazel lime".split()
BASE = "http://verify.test/"


@pytest.fixture(scope="session")
def spark_session():
    from spark.job import spark_session as make

    session = make("local[2]", "caffeine-tests", {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    yield session
    session.stop()


def meta(url, status=200, content_type="text/html; charset=utf-8", error=None, size=0):
    return {"url": url, "status": status, "content_type": content_type, "fetched_at": 1.0,
            "final_url": url, "error": error, "truncated": False, "bytes": size}


def make_web(n: int, seed: int, version: int = 0) -> dict[str, tuple[dict, bytes]]:
    """Duplicates, links to uncrawled pages, links without text, empty titles."""
    rng = random.Random(seed * 1000 + version)
    pages = {}
    for i in range(n):
        url = f"{BASE}p{i}"
        links = [f"{BASE}p{rng.randrange(n + 4)}" for _ in range(rng.randrange(1, 5))]
        anchors = "".join(f'<a href="{l}">{"" if j == 1 else "to " + l[-3:]}</a> ' for j, l in enumerate(links))
        title = "" if i % 9 == 0 else f"<title>Page {i} v{version}</title>"
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(4, 25)))
        html = f"<html><head>{title}</head><body><p>{body}</p>{anchors}</body></html>"
        if i % 7 == 3:
            html = pages[f"{BASE}p{i - 1}"][1].decode()
        pages[url] = (meta(url, size=len(html)), html.encode())
    return pages


def feed(cluster, pages):
    items = sorted(pages.items())
    for i in range(0, len(items), 10):
        with cluster.begin() as txn:
            for url, (m, content) in items[i:i + 10]:
                txn.set(REPOSITORY, url, PAGE_META, json.dumps(m))
                txn.set(REPOSITORY, url, PAGE_CONTENT, content)


def quiesce(cluster):
    wait_until_quiescent(cluster, application.observed_tables, timeout_s=300, poll_s=0.1)


@pytest.mark.hbase
@pytest.mark.timeout(900)
@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_verify_finds_no_difference_before_and_after_changes_and_deletions(fresh_cluster, spark_session):
    cluster = fresh_cluster
    application.install(cluster)
    pages = make_web(40, seed=5)
    with Worker(cluster, application, threads=4):
        feed(cluster, pages)
        quiesce(cluster)
        first = verify(cluster.settings, spark=spark_session, partitions=3, timeout_s=300)
        assert first.clean, first.format()
        rows = {t.table: t.incremental_rows for t in first.tables}
        assert rows["documents"] >= 35 and rows["dups"] < rows["documents"], "the web has duplicates"
        assert rows["postings"] >= len(WORDS) and rows["inlinks"] > 0 and rows["docstats"] > 0
        assert rows["impacts"] == rows["postings"], "every term's postings, in impact order too"

        # Changes, deletions (404), a page turned into a PDF, server errors that keep the last
        # good version, and pages that did not exist before.
        changed = make_web(44, seed=5, version=1)
        update = {}
        for i, url in enumerate(sorted(pages)):
            if i % 4 == 0:
                update[url] = changed[url]
            elif i % 6 == 1:
                update[url] = (meta(url, status=404, content_type="text/html"), b"not found")
            elif i % 10 == 2:
                update[url] = (meta(url, status=503, error="server error"), b"")
            elif i == 5:
                update[url] = (meta(url, content_type="application/pdf"), b"%PDF-1.4")
        for i in range(40, 44):
            update[f"{BASE}p{i}"] = changed[f"{BASE}p{i}"]
        feed(cluster, update)
        quiesce(cluster)
        second = verify(cluster.settings, spark=spark_session, partitions=3, timeout_s=300)
        assert second.clean, second.format()
        assert second.tables != first.tables, "the changes changed the index"
        after = {t.table: t.incremental_rows for t in second.tables}
        assert after["documents"] < rows["documents"] + 4, "404s and the PDF left the index"
        impacts = cluster.serving(IMPACTS, [IMPACTS_FAMILY], counted=counted_families(IMPACTS))
        assert any(v == b"" for _, cells in impacts.scan_changes(0) for v in cells.values()), \
            "stale impacts cells were tombstoned, and verify skipped them"
        kept = [u for i, u in enumerate(sorted(pages)) if i % 10 == 2 and i % 4 and i % 6 != 1]
        assert kept and all(u in incremental_tables(cluster, cluster.oracle.get_timestamp())["documents"] for u in kept)

    # A tampered cell on either side is reported (the batch tables of the last run are reused).
    with cluster.begin() as txn:
        fp = next(iter(read_batch_tables(cluster.store)["dups"]))
        txn.set(DUPS, fp, "member:http://intruder.test/", "7")
    cluster.serving(POSTINGS, [POSTINGS_FAMILY]).put({"oak": {"p:http://intruder.test/": b"\x01\x00"}},
                                                    ts=cluster.oracle.get_timestamp())
    intruder_impact = "i:" + impact_qualifier(7, "http://intruder.test/")
    cluster.serving(IMPACTS, [IMPACTS_FAMILY], counted=counted_families(IMPACTS)).put({"oak": {intruder_impact: b"\x01\x00"}},
                                                  ts=cluster.oracle.get_timestamp())
    incremental = incremental_tables(cluster, cluster.oracle.get_timestamp())
    summaries, examples, total = diff_tables(incremental, read_batch_tables(cluster.store))
    assert total == 3
    assert {(d.table, d.column) for d in examples} == {
        ("dups", "member:http://intruder.test/"), ("postings", "p:http://intruder.test/"),
        ("impacts", intruder_impact)}
    tampered = ("dups", "postings", "impacts")
    by_table = {s.table: s for s in summaries}
    assert all(by_table[table].differing == 1 for table in tampered)
    assert all(s.clean for s in summaries if s.table not in tampered)
    for batch in BATCH_TABLES.values():
        cluster.store.drop_table(batch.name)


def test_diff_tables_reports_missing_extra_and_different_cells():
    a = {"postings": {"x": {"p:u": b"1"}, "y": {"p:u": b"2"}}, "docstats": {"u": {"s:length": b"3"}}}
    b = {"postings": {"x": {"p:u": b"1", "p:v": b"9"}, "z": {"p:u": b"2"}}, "docstats": {"u": {"s:length": b"4"}}}
    summaries, examples, total = diff_tables(a, b, limit=3)
    by_table = {s.table: s for s in summaries}
    assert total == 4 and len(examples) == 3
    assert (by_table["postings"].only_incremental, by_table["postings"].only_batch, by_table["postings"].differing) == (1, 1, 1)
    assert by_table["docstats"].differing == 1 and by_table["dups"].clean
    assert examples[0] == Difference("postings", "x", "p:v", None, b"9")
    assert "incremental=<absent> batch=b'9'" in str(examples[0])


def test_executors_take_the_drivers_settings_unless_their_environment_differs(monkeypatch):
    from caffeine.config import load_settings
    from spark.hbase_io import executor_settings, ship_settings

    monkeypatch.setenv("CAFFEINE_THRIFT1_HOST", "10.1.1.1")
    shipped = ship_settings(load_settings(table_prefix="job_", thrift2_port=9999))
    same = executor_settings(shipped)  # local mode: the executor's environment is the driver's
    assert (same.table_prefix, same.thrift2_port, same.thrift1_host) == ("job_", 9999, "10.1.1.1")

    monkeypatch.setenv("CAFFEINE_THRIFT1_HOST", "hbase-1.internal")  # spark.executorEnv.*
    monkeypatch.setenv("CAFFEINE_THRIFT2_IDL", "hbase.thrift")
    monkeypatch.setenv("CAFFEINE_TABLE_PREFIX", "other_")
    cluster_side = executor_settings(shipped)
    assert cluster_side.thrift1_host == "hbase-1.internal" and cluster_side.thrift2_idl == "hbase.thrift"
    assert cluster_side.table_prefix == "job_" and cluster_side.thrift2_port == 9999
