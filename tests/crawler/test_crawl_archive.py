"""``crawl --warc``: the archive holds every exchange the crawl had, and changes none of its outcomes.

The served side is the judge: the test web logs every path it was asked for, and each
request that got an answer must be in the archive as a request record and a response record
that name each other. Runs through the ``cluster`` fixture (in-memory store and real HBase).
"""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections import Counter

import pytest
from warcio.archiveiterator import ArchiveIterator

from crawler.crawl import crawl
from testweb import SPECIALS, TestWeb

FAST = dict(delay=0, timeout=3.0, workers=4)
CAP = 64 * 1024


@pytest.fixture
def tables():
    suffix = uuid.uuid4().hex[:8]
    return dict(repository=f"repo_{suffix}", frontier=f"front_{suffix}")


def outcomes(cluster, table) -> dict[str, tuple[dict, bytes | None]]:
    """URL -> (latest outcome without fetched_at, content)."""
    with cluster.begin() as txn:
        out = {}
        for key, cols in txn.scan(table, columns=["page:meta", "page:error", "page:content"]):
            meta = json.loads(cols.get("page:error") or cols["page:meta"])
            meta.pop("fetched_at")
            out[key.decode()] = (meta, cols.get("page:content"))
        return out


def records(path) -> list:
    """(type, target URI, WARC headers, HTTP headers, payload) of every record, in file order."""
    out = []
    with open(path, "rb") as f:
        for r in ArchiveIterator(f):
            out.append((r.rec_type, r.rec_headers.get_header("WARC-Target-URI"), r.rec_headers, r.http_headers,
                        r.content_stream().read()))
    return out


def test_crawl_warc_holds_a_request_and_a_response_for_every_answer_the_server_gave(cluster, tables, tmp_path):
    web = TestWeb(pages=20, seed=31, huge_bytes=3 * CAP, slow_s=8.0)  # every bad-input page too
    path = tmp_path / "crawl.warc.gz"
    with web as base:
        crawl(cluster, [base + "/"], depth=3, max_bytes=CAP, warc=str(path), **FAST, **tables)
        served = list(web.requests)
    got = records(path)
    assert got[0][0] == "warcinfo"
    responses = [r for r in got if r[0] == "response"]
    requests = [r for r in got if r[0] == "request"]

    # Every request the server answered with HTTP is archived once per time it was asked;
    # the page that never answers in time and the one that does not speak HTTP left nothing.
    unanswered = {SPECIALS["slow"], SPECIALS["not_http"]}
    archived = Counter(uri[len(base):] for _, uri, *_ in responses)
    assert archived == Counter(p for p in served if p not in unanswered)
    assert "/robots.txt" in archived and not [p for p in archived if p.startswith("/private/")]
    assert {SPECIALS["redirect_loop"], SPECIALS["redirect_chain"], SPECIALS["pdf"]} <= set(archived)

    # Request and response name each other; the request is the one the crawler sent.
    by_id = {h.get_header("WARC-Record-ID"): (uri, h) for _, uri, h, _, _ in responses}
    assert len(requests) == len(responses)
    for _, uri, h, http, _ in requests:
        assert by_id[h.get_header("WARC-Concurrent-To")][0] == uri
        assert http.protocol == "GET" and "CaffeineBot" in http.get_header("User-Agent")

    # Payloads are the bytes served; the cap and a short body are marked, not hidden.
    g = web.generated
    for _, uri, h, http, payload in responses:
        p = uri[len(base):]
        if p == SPECIALS["huge"]:
            assert h.get_header("WARC-Truncated") == "length" and len(payload) == CAP
        elif p == SPECIALS["short_body"]:
            assert h.get_header("WARC-Truncated") == "disconnect"
        else:
            assert h.get_header("WARC-Truncated") is None
            expected = g.respond(p, web.version)
            assert int(http.get_statuscode()) == expected.status, p
            if expected.body:
                assert payload == expected.body, p
        assert int(http.get_header("Content-Length")) == len(payload)


class _ShortBodies(http.server.BaseHTTPRequestHandler):
    """Responses whose bodies stop before their Content-Length, of kinds a crawl does not read."""

    protocol_version = "HTTP/1.1"
    routes = {
        "/doc.pdf": (200, "application/pdf", None),
        "/missing.html": (404, "text/html", None),
        "/moved.html": (301, "text/html", "/page.html"),
        "/page.html": (200, "text/html", None),
        "/robots.txt": (404, "text/plain", None),
    }

    def do_GET(self):
        status, ctype, location = self.routes.get(self.path, (404, "text/plain", None))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        if location:
            self.send_header("Location", location)
        if self.path == "/page.html":
            body = b"<html><body><p>a whole page</p></body></html>"
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        self.send_header("Content-Length", "5000")
        self.end_headers()
        self.wfile.write(b"only the start")
        self.close_connection = True

    def log_message(self, format, *args):
        pass


def test_archiving_changes_no_outcome_of_a_crawl(cluster, tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _ShortBodies)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    seeds = [base + p for p in ("/doc.pdf", "/missing.html", "/moved.html")]
    web = TestWeb(pages=12, seed=32, huge_bytes=3 * CAP, slow_s=8.0)
    try:
        with web as web_base:
            runs = []
            for warc in (None, str(tmp_path / "a.warc.gz")):
                suffix = uuid.uuid4().hex[:8]
                repo = f"repo_{suffix}"
                crawl(cluster, seeds + [web_base + "/"], depth=3, max_bytes=CAP, warc=warc, repository=repo,
                      frontier=f"front_{suffix}", any_host=True, **FAST)
                runs.append(outcomes(cluster, repo))
    finally:
        server.shutdown()
        server.server_close()
    plain, archived = runs
    assert plain[base + "/doc.pdf"][0]["error"] is None and plain[base + "/doc.pdf"][0]["status"] == 200
    assert plain[base + "/moved.html"][0]["final_url"] == base + "/page.html"
    assert archived == plain


def test_crawl_command_warc_resume_appends_and_ingest_replays(cluster, tmp_path, monkeypatch, capsys):
    import caffeine.percolator
    from caffeine.commands.cli import main
    from support.cli_helpers import KeepOpen

    monkeypatch.setattr(caffeine.percolator, "connect", lambda **kw: KeepOpen(cluster))
    suffix = uuid.uuid4().hex[:8]
    path = str(tmp_path / "run.warc.gz")
    web = TestWeb(pages=10, seed=33, include_bad=False)
    with web as base:
        common = ["--delay", "0", "--timeout", "3", "--workers", "2", "--no-progress", "--warc", path,
                  "--repository-table", f"repo_{suffix}", "--frontier-table", f"front_{suffix}"]
        assert main(["crawl", base + "/", "--depth", "2", "--max-pages", "3", *common]) == 0
        first = [uri for kind, uri, *_ in records(path) if kind == "response"]
        assert main(["crawl", "--resume", *common]) == 0
        capsys.readouterr()
    got = records(path)
    assert [kind for kind, *_ in got].count("warcinfo") == 2  # one per run, the first run's records kept
    responses = [uri for kind, uri, *_ in got if kind == "response"]
    assert responses[: len(first)] == first and len(responses) > len(first)
    crawled = outcomes(cluster, f"repo_{suffix}")
    assert main(["ingest", path, "--repository-table", f"repo_ing_{suffix}", "--state-table", f"ingest_{suffix}",
                 "--no-progress"]) == 0
    assert "pages/s" in capsys.readouterr().out
    assert main(["crawl", "http://127.0.0.1:9/", "--warc", str(tmp_path / "no" / "such" / "dir.warc.gz")]) == 1
    assert "cannot write the archive" in capsys.readouterr().err
    ingested = outcomes(cluster, f"repo_ing_{suffix}")
    # Every row of a response comes back the same; the URLs robots.txt kept the crawl from
    # requesting have no record, and the archive also holds robots.txt itself.
    answered = {u: o for u, o in crawled.items() if o[0]["status"] != 0}
    assert {u for u, o in crawled.items() if o[0]["status"] == 0} == set(web.disallowed_urls())
    assert {u: ingested[u] for u in answered} == answered
    assert set(ingested) - set(answered) == {base + "/robots.txt"}
