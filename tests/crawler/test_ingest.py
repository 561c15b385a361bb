"""``caffeine ingest``: WARC records become the repository rows a crawl's fetches write.

Row-level tests run through the ``cluster`` fixture (in-memory store and real HBase) with
tables of their own; the index-level tests (``test_ingest_index_*``) run the observer
workers to quiescence on real HBase and compare the whole index, cell by cell, with the
crawl's (``spark.verify.diff_tables``: documents, inlinks, dups, postings, docstats).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import threading
import time
import uuid

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from crawler.crawl import crawl
from crawler.ingest import Ingester, ingest
from testweb import TestWeb, write_warc

FAST = dict(delay=0, timeout=3.0, workers=4)
B = "http://archive.example"


@pytest.fixture
def tables():
    suffix = uuid.uuid4().hex[:8]
    return dict(repository=f"repo_{suffix}", state_table=f"ingest_{suffix}")


def rows(cluster, table) -> dict[str, tuple[dict, bytes | None]]:
    """URL -> (latest outcome without fetched_at, content), as tests/crawler/test_crawler.py
    reads it."""
    with cluster.begin() as txn:
        out = {}
        for key, cols in txn.scan(table, columns=["page:meta", "page:error", "page:content"]):
            meta = json.loads(cols.get("page:error") or cols["page:meta"])
            meta.pop("fetched_at")
            out[key.decode()] = (meta, cols.get("page:content"))
        return out


def bad_rows(cluster, table) -> dict[str, dict[str, bytes]]:
    with cluster.begin() as txn:
        return {k.decode(): cols for k, cols in txn.scan(table, columns=["error", "url"])
                if k.startswith(b"bad:")}


# -- writing test archives -----------------------------------------------------------------


class Archive:
    """Records as separate byte strings (gzip members or plain), to splice damage between."""

    def __init__(self, compress: bool = True, version: str = "1.1"):
        self.compress = compress
        self.version = version
        self.parts: list[bytes] = []

    def _writer(self, out):
        return WARCWriter(out, gzip=self.compress, warc_version=self.version)

    def add(self, record_fn):
        """Append the record ``record_fn(writer)`` makes; return it (its headers name it)."""
        out = io.BytesIO()
        writer = self._writer(out)
        record = record_fn(writer)
        writer.write_record(record)
        self.parts.append(out.getvalue())
        return record

    def response(self, path, status=200, body=b"", ctype="text/html; charset=utf-8", headers=(), warc=None):
        http = StatusAndHeaders(f"{status} X", ([("Content-Type", ctype)] if ctype else []) + list(headers),
                                protocol="HTTP/1.1")
        return self.add(lambda w: w.create_warc_record(B + path, "response", payload=io.BytesIO(body),
                                                       http_headers=http, warc_headers_dict=warc or {}))

    def raw(self, data: bytes) -> None:
        self.parts.append(data)

    def bytes(self) -> bytes:
        return b"".join(self.parts)

    def write(self, path) -> str:
        with open(path, "wb") as f:
            f.write(self.bytes())
        return str(path)


def page(n: int) -> bytes:
    return f"<html><head><title>Page {n}</title></head><body><p>word{n} text</p></body></html>".encode()


# -- outcomes ------------------------------------------------------------------------------


def test_record_outcomes_follow_the_crawlers_rules(cluster, tables, tmp_path):
    a = Archive()
    a.add(lambda w: w.create_warcinfo_record("x.warc.gz", {"software": "test"}))
    a.add(lambda w: w.create_warc_record(B + "/page.html", "request", http_headers=StatusAndHeaders(
        "GET /page.html HTTP/1.1", [("Host", "archive.example")], is_http_request=True)))
    encoded = gzip.compress(page(1))
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(encoded), encoded)
    a.response("/page.html", body=chunked, headers=[("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")])
    a.add(lambda w: w.create_warc_record(B + "/page.html", "metadata", payload=io.BytesIO(b"k: v\r\n"),
                                         warc_content_type="application/warc-fields"))
    a.response("/r1", 301, headers=[("Location", "/r2")], body=b"")
    a.response("/r2", 302, headers=[("Location", B + "/page.html")], body=b"")
    a.response("/loop-a", 302, headers=[("Location", "/loop-b")])
    a.response("/loop-b", 302, headers=[("Location", "/loop-a")])
    a.response("/away", 302, headers=[("Location", "/missing.html")])
    a.response("/nolocation", 301)
    a.response("/gone", 410, body=b"<p>gone</p>")
    a.response("/nf", 404, body=b"<p>nf</p>")
    a.response("/err", 500, body=b"<p>err</p>")
    a.response("/doc.pdf", 200, body=b"%PDF-1.4", ctype="application/pdf")
    a.response("/cut.html", body=page(2)[:40], warc={"WARC-Truncated": "length"})
    a.response("/disc.html", body=page(3)[:40], warc={"WARC-Truncated": "disconnect"})
    a.response("/big.html", body=b"<p>" + b"x" * 5000 + b"</p>")
    digest = "sha1:" + __import__("base64").b32encode(__import__("hashlib").sha1(page(1)).digest()).decode()
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
    a.response("/orig.html", body=page(1))
    a.add(lambda w: w.create_revisit_record(B + "/copy.html", digest, B + "/orig.html", "2026-01-01T00:00:00Z",
                                            http_headers=http))
    a.add(lambda w: w.create_revisit_record(B + "/copy2.html", "sha1:NOTKNOWN", B + "/orig.html",
                                            "2026-01-01T00:00:00Z"))
    a.add(lambda w: w.create_revisit_record(B + "/orphan.html", "sha1:NOTKNOWN", B + "/nowhere.html",
                                            "2026-01-01T00:00:00Z"))
    path = a.write(tmp_path / "outcomes.warc.gz")
    report = ingest(cluster, [path], max_bytes=1000, **tables)
    got = rows(cluster, tables["repository"])

    def outcome(p):
        meta, content = got[B + p]
        return meta["status"], meta["error"], content

    assert outcome("/page.html") == (200, None, page(1))  # chunked and gzip undone
    meta, content = got[B + "/r1"]
    assert (meta["status"], meta["final_url"], meta["error"], content) == (200, B + "/page.html", None, page(1))
    status, error, _ = outcome("/loop-a")
    assert status == 302 and error == f"redirect loop: {B}/loop-a -> {B}/loop-b -> {B}/loop-a"
    status, error, _ = outcome("/away")
    assert status == 302 and error == f"redirect to {B}/missing.html not followed: not in the archive"
    assert got[B + "/away"][0]["final_url"] == B + "/missing.html"
    assert outcome("/nolocation") == (301, "redirect without a Location header", None)
    assert outcome("/gone") == (410, None, None) and outcome("/nf") == (404, None, None)
    assert outcome("/err") == (500, None, None)
    meta, content = got[B + "/doc.pdf"]
    assert (meta["content_type"], meta["bytes"], content) == ("application/pdf", 0, None)
    meta, content = got[B + "/cut.html"]
    assert (meta["truncated"], content) == (True, page(2)[:40])
    status, error, content = outcome("/disc.html")
    assert status == 200 and error.startswith("protocol error") and content is None
    meta, content = got[B + "/big.html"]
    assert (meta["truncated"], meta["bytes"], len(content)) == (True, 1000, 1000)
    assert outcome("/copy.html") == (200, None, page(1))  # revisit by payload digest
    assert outcome("/copy2.html") == (200, None, page(1))  # revisit by WARC-Refers-To-Target-URI
    assert outcome("/orphan.html")[:2] == (0, "protocol error: revisit of a record that is not in the archive")
    assert report.counts["skipped request"] == 1 and report.counts["skipped metadata"] == 1
    assert report.counts["skipped warcinfo"] == 1 and report.counts["damaged"] == 1
    assert list(bad_rows(cluster, tables["state_table"]).values())[0]["url"] == (B + "/orphan.html").encode()


@pytest.mark.parametrize("compress, version", [("records", "1.0"), ("file", "1.1"), (None, "1.0"), (None, "1.1")])
def test_every_compression_and_warc_version_yields_the_same_rows(cluster, tables, tmp_path, compress, version):
    web = TestWeb(pages=20, seed=4, include_bad=False, version=2)
    web.port = 8765  # the archive names URLs of this port; nothing is served
    reference = tmp_path / "reference.warc.gz"
    write_warc(web, reference, compress="records", version="1.1")
    other = tmp_path / "other.warc"
    n = write_warc(web, other, compress=compress, version=version)
    ingest(cluster, [str(reference)], **tables)
    want = rows(cluster, tables["repository"])
    second = dict(repository=tables["repository"] + "b", state_table=tables["state_table"] + "b")
    report = ingest(cluster, [str(other)], **second)
    assert report.pages == n == len(want)
    assert rows(cluster, second["repository"]) == want


def test_ingest_records_the_same_rows_as_a_crawl_of_the_same_web(cluster, tables, tmp_path):
    web = TestWeb(pages=40, seed=3, include_bad=False, version=2)  # version 2: 404s and 410s too
    crawl_tables = dict(repository=tables["repository"] + "c", frontier=tables["repository"] + "f")
    with web as base:
        crawl(cluster, [base + "/"], depth=3, **FAST, **crawl_tables)
        write_warc(web, tmp_path / "web.warc.gz")
    ingest(cluster, [str(tmp_path / "web.warc.gz")], **tables)
    crawled = rows(cluster, crawl_tables["repository"])
    ingested = rows(cluster, tables["repository"])
    disallowed = set(web.disallowed_urls())
    assert {u: r for u, r in crawled.items() if u not in disallowed} == ingested
    assert any(meta["status"] in (404, 410) for meta, _ in ingested.values())


# -- damage ----------------------------------------------------------------------------------


def _damaged_archive(compress: bool) -> tuple[Archive, int, list[str]]:
    """Good pages with one of each kind of damage between them; (archive, damages, good URLs)."""
    a = Archive(compress=compress)
    good = []

    def good_page(n):
        a.response(f"/good{n}.html", body=page(n))
        good.append(f"{B}/good{n}.html")

    def record_bytes(path, body, compress_it):
        out = io.BytesIO()
        w = WARCWriter(out, gzip=compress_it)
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        w.write_record(w.create_warc_record(B + path, "response", payload=io.BytesIO(body), http_headers=http))
        return out.getvalue()

    def with_length(data: bytes, delta: int) -> bytes:
        head, _, rest = data.partition(b"\r\n\r\n")
        lines = [(b"Content-Length: %d" % (int(l.split(b":")[1]) + delta)) if l.startswith(b"Content-Length") else l
                 for l in head.split(b"\r\n")]
        return b"\r\n".join(lines) + b"\r\n\r\n" + rest

    damages = 0
    for n in range(3):
        good_page(n)
    # 1. garbage between records
    a.raw(b"this line is not a WARC record\r\n" * 5)
    damages += 1
    good_page(3)
    # 2. a Content-Length too long (it would swallow the next record)
    data = with_length(record_bytes("/toolong.html", page(90), False), +300)
    a.raw(gzip.compress(data) if compress else data)
    damages += 1
    good_page(4)
    # 3. a Content-Length too short
    data = with_length(record_bytes("/tooshort.html", page(91), False), -25)
    a.raw(gzip.compress(data) if compress else data)
    damages += 1
    good_page(5)
    # 4. an HTTP block that does not parse
    data = record_bytes("/nothttp.html", page(92), False).replace(b"HTTP/1.1 200 OK", b"NOT HTTP AT ALL")
    a.raw(gzip.compress(data) if compress else data)
    damages += 1
    good_page(6)
    # 5. a truncated gzip member (plain: a record cut in the middle of its header)
    if compress:
        member = record_bytes("/truncated.html", page(93), True)
        a.raw(member[: len(member) // 2])
    else:
        a.raw(b"WARC/1.1\r\nWARC-Type: response\r\nWARC-Target-URI: " + B.encode() + b"/cut\r\nContent-Le")
    damages += 1
    for n in range(7, 10):
        good_page(n)
    return a, damages, good


@pytest.mark.parametrize("compress", [True, False])
def test_damaged_records_get_one_outcome_each_and_lose_no_neighbour(cluster, tables, tmp_path, compress):
    archive, damages, good = _damaged_archive(compress)
    path = archive.write(tmp_path / ("damaged.warc.gz" if compress else "damaged.warc"))
    report = ingest(cluster, [path], **tables)
    got = rows(cluster, tables["repository"])
    for n, url in enumerate(good):
        assert got[url] == ({"url": url, "status": 200, "content_type": "text/html; charset=utf-8",
                             "final_url": url, "error": None, "truncated": False, "bytes": len(page(n))}, page(n))
    bad = bad_rows(cluster, tables["state_table"])
    assert report.counts["damaged"] == damages == len(bad), sorted(v["error"] for v in bad.values())
    assert got[B + "/nothttp.html"][0]["status"] == 0  # the URL's row says what a crawl would
    assert set(got) == set(good) | {B + "/nothttp.html"}


# -- resuming --------------------------------------------------------------------------------


def test_an_interrupted_ingest_resumes_after_the_last_committed_record(cluster, tables, tmp_path):
    web = TestWeb(pages=60, seed=5, include_bad=False)
    web.port = 8766
    path = str(tmp_path / "web.warc.gz")
    n = write_warc(web, path)
    ingester = Ingester(cluster, checkpoint_s=0.0, workers=2, **tables)
    original = ingester._write

    def slow_write(work, report):  # slow enough that stop() lands mid-file
        time.sleep(0.01)
        return original(work, report)

    ingester._write = slow_write
    reports = []
    thread = threading.Thread(target=lambda: reports.append(ingester.run([path])))
    thread.start()
    deadline = time.monotonic() + 60
    while ingester._index.by_url == {} or (not reports and time.monotonic() < deadline
                                           and sum(1 for _ in rows(cluster, tables["repository"])) < 10):
        time.sleep(0.01)
    ingester.stop()
    thread.join(60)
    first = reports[0]
    assert first.stopped and 0 < first.pages < n
    second = ingest(cluster, [path], resume=True, **tables)
    assert not second.stopped and second.pages < n  # the committed prefix is not redone
    assert first.pages + second.pages >= n
    assert len(rows(cluster, tables["repository"])) == n
    third = ingest(cluster, [path], resume=True, **tables)
    assert third.skipped_files == [os.path.abspath(path)] and third.pages == 0


def test_caffeine_ingest_command(cluster, tables, tmp_path, monkeypatch, capsys):
    import caffeine.percolator
    from caffeine.commands.cli import main
    from support.cli_helpers import KeepOpen

    monkeypatch.setattr(caffeine.percolator, "connect", lambda **kw: KeepOpen(cluster))
    web = TestWeb(pages=10, seed=8, include_bad=False)
    web.port = 8767
    path = str(tmp_path / "w.warc.gz")
    n = write_warc(web, path)
    common = ["--repository-table", tables["repository"], "--state-table", tables["state_table"], "--no-progress"]
    assert main(["ingest", path, *common]) == 0
    out = capsys.readouterr().out
    assert f"ingest: {n} pages from 1 file(s)" in out and "pages/s" in out
    assert main(["ingest", "--resume", path, *common]) == 0
    assert "already ingested, skipped" in capsys.readouterr().out
    assert main(["ingest", str(tmp_path / "missing.warc"), *common]) == 1
    assert "cannot read" in capsys.readouterr().err


# -- a URL's last response -------------------------------------------------------------------

OLD_DATE, NEW_DATE = "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"


def delay_writes(monkeypatch, bodies: set[bytes], seconds: float = 1.0) -> list[tuple[str, bytes]]:
    """Make the ingest transaction that writes a body in ``bodies`` sleep once before it
    commits, so that on a pool of workers it commits after the writes submitted after it
    (a conflict retries it, still after them). Returns the (URL, body) writes delayed so far."""
    import crawler.ingest

    original = crawler.ingest.record_fetch
    delayed: list[tuple[str, bytes]] = []
    lock = threading.Lock()

    def slow(txn, repository, result):
        original(txn, repository, result)
        with lock:
            due = result.content in bodies and result.content not in [b for _, b in delayed]
            if due:
                delayed.append((result.url, result.content))
        if due:
            time.sleep(seconds)

    monkeypatch.setattr(crawler.ingest, "record_fetch", slow)
    return delayed


def fetched_at(cluster, table, url) -> float:
    with cluster.begin() as txn:
        cols = txn.get_rows(table, [url], ["page:meta", "page:error"])[url.encode()]
    return json.loads(cols["page:error"] or cols["page:meta"])["fetched_at"]


def _older_responses(a: Archive) -> None:
    """The first response of /dup.html (a page) and of /gone.html (a page), among others."""
    a.add(lambda w: w.create_warcinfo_record("run1.warc.gz", {"software": "test"}))
    for n in range(3):
        a.response(f"/p{n}.html", body=page(n), warc={"WARC-Date": OLD_DATE})
    a.response("/dup.html", body=page(100), warc={"WARC-Date": OLD_DATE})
    a.response("/gone.html", body=page(102), warc={"WARC-Date": OLD_DATE})
    a.add(lambda w: w.create_warc_record(B + "/p3.html", "request", http_headers=StatusAndHeaders(
        "GET /p3.html HTTP/1.1", [("Host", "archive.example")], is_http_request=True)))
    for n in range(3, 6):
        a.response(f"/p{n}.html", body=page(n), warc={"WARC-Date": OLD_DATE})


def _newer_responses(a: Archive) -> None:
    """The second response of /dup.html (another page, another type) and of /gone.html (410),
    a redirect to /dup.html, and others."""
    a.add(lambda w: w.create_warcinfo_record("run2.warc.gz", {"software": "test"}))
    a.response("/hop.html", 301, headers=[("Location", "/dup.html")], warc={"WARC-Date": NEW_DATE})
    a.response("/dup.html", body=page(101), ctype="text/html", warc={"WARC-Date": NEW_DATE})
    a.response("/gone.html", 410, body=b"<p>gone</p>", warc={"WARC-Date": NEW_DATE})
    for n in range(6, 9):
        a.response(f"/p{n}.html", body=page(n), warc={"WARC-Date": NEW_DATE})


def assert_newer_responses_kept(cluster, repository) -> None:
    got = rows(cluster, repository)
    url = B + "/dup.html"
    assert got[url] == ({"url": url, "status": 200, "content_type": "text/html", "final_url": url,
                         "error": None, "truncated": False, "bytes": len(page(101))}, page(101))
    meta, content = got[B + "/gone.html"]
    assert (meta["status"], meta["error"], content) == (410, None, None)
    assert fetched_at(cluster, repository, url) == fetched_at(cluster, repository, B + "/gone.html") == 1769904000.0
    meta, content = got[B + "/hop.html"]
    assert (meta["status"], meta["final_url"], content) == (200, url, page(101))
    for n in range(9):
        assert got[f"{B}/p{n}.html"][1] == page(n)
    assert len(got) == 12


def test_a_urls_last_response_wins_whichever_write_commits_last(cluster, tables, tmp_path, monkeypatch):
    # `crawl --resume --warc` appends to the archive of the run it continues: a URL fetched
    # again has two responses, close together, the newer one later in the file.
    a = Archive()
    _older_responses(a)
    _newer_responses(a)
    path = a.write(tmp_path / "resumed.warc.gz")
    delay_writes(monkeypatch, {page(100), page(102)})
    report = ingest(cluster, [path], workers=4, **tables)
    assert report.counts["damaged"] == 0 and not report.not_recorded
    assert_newer_responses_kept(cluster, tables["repository"])
    assert report.counts["superseded"] == 2 and report.pages == 12  # the older ones are not written


def test_a_urls_last_response_is_in_the_last_file_given(cluster, tables, tmp_path, monkeypatch):
    older, newer = Archive(), Archive()
    _older_responses(older)
    _newer_responses(newer)
    paths = [older.write(tmp_path / "run1.warc.gz"), newer.write(tmp_path / "run2.warc.gz")]
    delay_writes(monkeypatch, {page(100), page(102)})
    report = ingest(cluster, paths, workers=4, **tables)
    assert report.counts["damaged"] == 0 and not report.not_recorded
    assert_newer_responses_kept(cluster, tables["repository"])


def test_resuming_an_earlier_file_does_not_bring_back_an_older_response(cluster, tables, tmp_path, monkeypatch):
    # A write that fails holds the first file's checkpoint before it while the second file
    # finishes; the resumed run goes over the first file's rest again, older responses too.
    import crawler.ingest

    older, newer = Archive(), Archive()
    _older_responses(older)
    _newer_responses(newer)
    paths = [older.write(tmp_path / "run1.warc.gz"), newer.write(tmp_path / "run2.warc.gz")]
    original = crawler.ingest.record_fetch

    def failing(txn, repository, result):
        if result.url == B + "/p0.html":
            raise RuntimeError("storage unavailable")
        original(txn, repository, result)

    monkeypatch.setattr(crawler.ingest, "record_fetch", failing)
    first = ingest(cluster, paths, workers=4, **tables)
    assert first.not_recorded == 1 and not first.stopped
    monkeypatch.setattr(crawler.ingest, "record_fetch", original)
    second = ingest(cluster, paths, resume=True, workers=4, **tables)
    assert second.skipped_files == [os.path.abspath(paths[1])] and not second.not_recorded
    assert_newer_responses_kept(cluster, tables["repository"])


def digest(body: bytes) -> str:
    return "sha1:" + base64.b32encode(hashlib.sha1(body).digest()).decode()


def unparsable(path: str, body: bytes) -> bytes:
    """A gzip member holding a response record of ``B + path`` whose HTTP status line does
    not parse (same length, so its Content-Length stays right: framing finds the record)."""
    out = io.BytesIO()
    w = WARCWriter(out, gzip=False)
    http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
    w.write_record(w.create_warc_record(B + path, "response", payload=io.BytesIO(body), http_headers=http))
    return gzip.compress(out.getvalue().replace(b"HTTP/1.1 200 OK", b"NOT HTTP AT ALL", 1))


def test_superseded_records_are_still_read_and_checked_and_ingesting_again_changes_nothing(cluster, tables,
                                                                                          tmp_path):
    a = Archive()
    older_a = a.response("/a.html", body=page(1))
    # A revisit whose source is a record that its URL's newer response supersedes.
    a.add(lambda w: w.create_revisit_record(
        B + "/copy.html", digest(page(1)), B + "/a.html", OLD_DATE, http_headers=StatusAndHeaders(
            "200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1"),
        warc_headers_dict={"WARC-Refers-To": older_a.rec_headers.get_header("WARC-Record-ID")}))
    older_b = a.response("/b.html", body=page(3))
    a.raw(unparsable("/c.html", page(5)))
    a.response("/d.html", body=page(6))
    a.response("/e.html", body=page(7))
    a.response("/r.html", 302, headers=[("Location", "/a.html")])
    a.response("/a.html", body=page(2))
    # The last record of /b.html: a 304 revisit of the superseded one (its payload and headers).
    a.add(lambda w: w.create_revisit_record(
        B + "/b.html", digest(page(3)), B + "/b.html", OLD_DATE, http_headers=StatusAndHeaders(
            "304 Not Modified", [], protocol="HTTP/1.1"),
        warc_headers_dict={"WARC-Refers-To": older_b.rec_headers.get_header("WARC-Record-ID")}))
    a.response("/c.html", body=page(4))
    a.raw(unparsable("/d.html", page(8)))
    cut = Archive()
    cut.response("/e.html", body=page(9))
    a.raw(cut.bytes()[: len(cut.bytes()) // 2])  # a truncated gzip member: no record of /e.html
    path = a.write(tmp_path / "mixed.warc.gz")

    report = ingest(cluster, [path], workers=4, **tables)
    got = rows(cluster, tables["repository"])
    assert {u[len(B):]: c for u, (_, c) in got.items()} == {
        "/a.html": page(2), "/copy.html": page(1), "/b.html": page(3), "/c.html": page(4), "/d.html": None,
        "/e.html": page(7), "/r.html": page(2)}
    assert got[B + "/b.html"][0]["status"] == 200 and got[B + "/r.html"][0]["final_url"] == B + "/a.html"
    # The last record alone decides: the unparsable newest /d.html leaves no earlier page.
    assert got[B + "/d.html"][0]["status"] == 0 and got[B + "/d.html"][0]["error"].startswith("protocol error")
    with cluster.begin() as txn:
        assert txn.get_rows(tables["repository"], [B + "/d.html"], ["page:meta"])[(B + "/d.html").encode()] == {
            "page:meta": None}
    # Superseded: the older /a.html, /b.html and /d.html; the unparsable older /c.html is damage.
    assert report.counts["superseded"] == 3 and report.pages == 7
    bad = bad_rows(cluster, tables["state_table"])
    assert sorted(v.get("url") or b"" for v in bad.values()) == [b"", (B + "/c.html").encode(),
                                                                  (B + "/d.html").encode()]
    assert report.counts["damaged"] == 3

    again = ingest(cluster, [path, path], workers=4, **tables)  # a second ingest, the file given twice
    assert rows(cluster, tables["repository"]) == got and again.pages == 7
    # The first copy's 11 responses and revisits are all superseded, its 2 unparsable ones damage.
    assert again.counts["superseded"] == 9 + 3 and again.counts["damaged"] == 2 * 3
    assert bad_rows(cluster, tables["state_table"]) == bad


def test_every_failed_write_is_counted_and_awaited(cluster, tables, tmp_path):
    """Two writes fail, the first slowly: both are counted as not recorded, and the ingest
    returns only after every write it started has finished (none still in flight)."""
    a = Archive()
    for n in range(6):
        a.response(f"/p{n}.html", body=page(n))
    path = a.write(tmp_path / "fail.warc.gz")
    ingester = Ingester(cluster, workers=4, **tables)
    original = ingester._write
    finished = []

    def failing(work, report):
        body = work[0][1].content
        if body == page(1):
            time.sleep(0.5)
            finished.append(body)
            return False
        if body == page(2):
            finished.append(body)
            return False
        return original(work, report)

    ingester._write = failing
    report = ingester.run([path])
    assert report.not_recorded == 2
    assert sorted(finished) == sorted([page(1), page(2)])
    again = ingest(cluster, [path], resume=True, **tables)  # the resume redoes both
    assert again.not_recorded == 0
    assert {url.rsplit("/", 1)[1] for url in rows(cluster, tables["repository"])} == {f"p{n}.html" for n in range(6)}


def test_x_robots_tag_headers_are_kept_as_a_crawl_keeps_them(cluster, tables, tmp_path):
    a = Archive()
    a.response("/noindex.html", body=page(1), headers=[("X-Robots-Tag", "noindex")])
    a.response("/theirs.html", body=page(2), headers=[("X-Robots-Tag", "googlebot: noindex")])
    a.response("/ours.html", body=page(3), headers=[("X-Robots-Tag", "caffeinebot: nofollow"),
                                                    ("X-Robots-Tag", "nosnippet")])
    a.response("/plain.html", body=page(4))
    ingest(cluster, [a.write(tmp_path / "robots.warc.gz")], **tables)
    got = rows(cluster, tables["repository"])
    assert got[B + "/noindex.html"][0]["robots"] == ["noindex"]
    assert got[B + "/ours.html"][0]["robots"] == ["nofollow", "nosnippet"]
    assert "robots" not in got[B + "/theirs.html"][0] and "robots" not in got[B + "/plain.html"][0]
