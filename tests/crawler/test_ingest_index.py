"""Ingest vs crawl, index against index, on real HBase with the observer chain run to quiescence.

Each side gets a cluster with a table prefix of its own (the application's fixed table
names start empty), runs an in-process observer ``Worker`` until no notification is left,
and the two indexes are compared cell by cell with ``spark.verify``'s reader and differ
(``documents``: doc:parsed/outlinks/fingerprint and cluster state; ``inlinks``; ``dups``;
``postings``; ``docstats``): no difference may remain.

* a WARC written with warcio from the generated test web (revisit records for its
  copies and mirror, request and metadata records around them) against a crawl of it;
* the same WARC with damaged records spliced in: the same index, and one recorded outcome
  per damaged record;
* ``crawl --warc`` of a web with every bad-input page, then ``ingest`` of that archive.

The first test's web has ``CAFFEINE_INGEST_INDEX_PAGES`` pages: 600 by default (about 3
minutes on a busy 2-core machine, for three indexes of it; its copies, mirror and revisit
records are all there at that size); ``CAFFEINE_INGEST_INDEX_PAGES=2000`` runs the same
checks on a larger web (about 10 minutes).
"""

from __future__ import annotations

import gzip
import io
import os
import uuid

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from caffeine.observers.app import application
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.percolator.worker import Worker
from crawler.crawl import crawl
from crawler.ingest import ingest
from testweb import TestWeb, write_warc
from crawler.warcframe import Archive, Record
from spark.verify import diff_tables, incremental_tables

PAGES = int(os.environ.get("CAFFEINE_INGEST_INDEX_PAGES", "600"))
FAST = dict(delay=0, timeout=3.0, workers=4)


@pytest.fixture
def fresh_hbase(hbase_store):
    """A factory of clusters over real HBase, each with a table prefix of its own."""
    from caffeine.percolator.cluster import Cluster
    from caffeine.storage.hbase import HBaseStore
    from support.session import SESSION_PREFIX, close_keeping_store, drop_all, oracle_for, session_settings

    made = []

    def make():
        settings = session_settings().model_copy(update={"table_prefix": f"{SESSION_PREFIX}{uuid.uuid4().hex[:6]}_"})
        store = HBaseStore(settings)
        cluster = Cluster(store, oracle_for(settings), settings)
        made.append((cluster, store))
        return cluster

    yield make
    for cluster, store in made:
        close_keeping_store(cluster)()
        drop_all(store)
        store.close()


def indexed(cluster, feed) -> dict:
    """Run ``feed()`` with the observers working, wait for quiescence, read the index."""
    with Worker(cluster, application, threads=4):
        result = feed()
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=900, poll_s=0.2)
    txn = cluster.begin()
    try:
        tables = incremental_tables(cluster, txn.start_ts)
    finally:
        txn.commit()
    return {"tables": tables, "result": result}


def must_be_equal(left: dict, right: dict) -> None:
    summaries, examples, total = diff_tables(left, right, limit=5)
    assert total == 0, [str(e) for e in examples]


def damaged(good: bytes) -> tuple[bytes, int]:
    """The per-record gzip WARC ``good`` with one damaged record of each kind spliced in
    between its members; (the bytes, the number of damaged records)."""
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".warc.gz") as f:
        f.write(good)
        f.flush()
        with Archive(f.name) as archive:
            starts = sorted({item.position[0] for item in archive.frame() if isinstance(item, Record)})
    base = "http://corrupt.example"

    def record(path: str, body: bytes, status_line: str = "200 OK") -> bytes:
        out = io.BytesIO()
        w = WARCWriter(out, gzip=False)
        http = StatusAndHeaders(status_line, [("Content-Type", "text/html")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(base + path, "response", payload=io.BytesIO(body), http_headers=http))
        return out.getvalue()

    def length(data: bytes, delta: int) -> bytes:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = [(b"Content-Length: %d" % (int(l.split(b":")[1]) + delta)) if l.startswith(b"Content-Length") else l
                 for l in head.split(b"\r\n")]
        return b"\r\n".join(lines) + b"\r\n\r\n" + rest

    body = b"<html><body><p>corrupt page</p></body></html>"
    truncated = gzip.compress(record("/t.html", body))
    inserts = [
        truncated[: len(truncated) // 2],                                    # a truncated gzip member
        b"garbage between records\r\n" * 3,                                  # garbage between members
        gzip.compress(length(record("/long.html", body), +400)),             # Content-Length too long
        gzip.compress(length(record("/short.html", body), -20)),             # Content-Length too short
        gzip.compress(record("/nothttp.html", body).replace(b"HTTP/1.1 200 OK", b"GARBAGE STATUS LINE")),
    ]
    out = bytearray()
    every = max(1, len(starts) // (len(inserts) + 1))
    pending = list(inserts)
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(good)
        if n and n % every == 0 and pending:
            out += pending.pop(0)
        out += good[start:end]
    for extra in pending:
        out += extra
    return bytes(out), len(inserts)


@pytest.mark.slow
@pytest.mark.timeout(3000)
def test_ingest_index_a_warc_of_the_test_web_equals_the_crawls_and_damage_costs_only_itself(fresh_hbase, tmp_path):
    web = TestWeb(pages=PAGES, seed=21, include_bad=False, version=1)
    path = tmp_path / "web.warc.gz"
    with web as base:
        crawl_cluster = fresh_hbase()
        crawled = indexed(crawl_cluster, lambda: crawl(crawl_cluster, [base + "/"], depth=3, **FAST))
        records = write_warc(web, path)
    assert records >= PAGES
    tables = crawled["tables"]
    assert len(tables["documents"]) >= PAGES * 0.9 and len(tables["postings"]) > 1000
    assert any(len([c for c in cells if c.startswith("member:")]) > 1 for cells in tables["dups"].values())

    ingest_cluster = fresh_hbase()
    ingested = indexed(ingest_cluster, lambda: ingest(ingest_cluster, [str(path)]))
    report = ingested["result"]
    assert report.pages == records and report.counts["damaged"] == 0
    must_be_equal(tables, ingested["tables"])

    bad_path = tmp_path / "damaged.warc.gz"
    data, damages = damaged(path.read_bytes())
    bad_path.write_bytes(data)
    damaged_cluster = fresh_hbase()
    with_damage = indexed(damaged_cluster, lambda: ingest(damaged_cluster, [str(bad_path)]))
    report = with_damage["result"]
    assert report.counts["damaged"] == damages, report.summary()
    with damaged_cluster.begin() as txn:
        bad = [k for k, _ in txn.scan("ingest", columns=["error"]) if k.startswith(b"bad:")]
    assert len(bad) == damages
    must_be_equal(tables, with_damage["tables"])


@pytest.mark.timeout(1200)
def test_ingest_index_crawl_warc_then_ingest_reproduces_the_crawls_index(fresh_hbase, tmp_path):
    cap = 256 * 1024
    web = TestWeb(pages=60, seed=22, huge_bytes=3 * cap, slow_s=8.0)  # every bad-input page too
    path = tmp_path / "crawl.warc.gz"
    crawl_cluster = fresh_hbase()
    with web as base:
        crawled = indexed(crawl_cluster, lambda: crawl(crawl_cluster, [base + "/"], depth=3, max_bytes=cap,
                                                       warc=str(path), **FAST))
    assert crawled["result"].counts()["robots.txt"] == 3  # nothing was fetched from /private/
    ingest_cluster = fresh_hbase()
    ingested = indexed(ingest_cluster, lambda: ingest(ingest_cluster, [str(path)], max_bytes=cap))
    report = ingested["result"]
    # One request record per response; a URL fetched twice (as a redirect hop and as itself)
    # has its earlier response superseded.
    assert report.counts["damaged"] == 0
    assert report.counts["skipped request"] == report.pages + report.counts["superseded"]
    must_be_equal(crawled["tables"], ingested["tables"])
    assert len(crawled["tables"]["documents"]) > 60
