"""The crawler against the local test web, recording into the in-memory store and real HBase.

Each crawl test runs twice through the ``cluster`` fixture (memory, hbase) and gets tables of
its own (``repo_*``, ``front_*``), so tests sharing the session's table prefix never see each
other's rows. The test web is the generated one of ``testweb``: its
``expected_*`` methods say what a correct crawl records, computed without the crawler.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import uuid
from collections import Counter
from contextlib import contextmanager

import pytest

from crawler.addresses import AddressPolicy
from crawler.crawl import CrawlError, Crawler, crawl
from crawler.fetch import Fetcher
from crawler.frontier import RUN_ROW
from crawler.robots import RobotsCache
from crawler.schedule import HostQueues
from support.cli_helpers import KeepOpen
from testweb import SPECIALS, GeneratedWeb, TestWeb

# The tests' servers listen on 127.0.0.1: a Fetcher connects to global addresses only unless told.
LOOPBACK = AddressPolicy.for_seeds(["127.0.0.1"])

CAP = 256 * 1024
# A local web needs no politeness; the timeout leaves room for a loaded CI machine.
FAST = dict(delay=0, timeout=3.0, max_bytes=CAP, workers=4)
META_KEYS = {"url", "status", "content_type", "fetched_at", "final_url", "error", "truncated", "bytes"}


@pytest.fixture
def tables():
    suffix = uuid.uuid4().hex[:8]
    return dict(repository=f"repo_{suffix}", frontier=f"front_{suffix}")


def repository(cluster, table) -> dict[str, tuple[dict, bytes | None]]:
    """URL -> (its latest recorded outcome, content). A transient failure is recorded in
    page:error (deleted by the next real outcome), so when present it is the latest."""
    with cluster.begin() as txn:
        return {
            key.decode(): (json.loads(cols.get("page:error") or cols["page:meta"]), cols.get("page:content"))
            for key, cols in txn.scan(table, columns=["page:meta", "page:error", "page:content"])
        }


def frontier_states(cluster, table) -> dict[str, str]:
    with cluster.begin() as txn:
        return {key.decode(): cols["state"].decode() for key, cols in txn.scan(table, columns=["state"])
                if key != RUN_ROW.encode()}


def must_match_the_web(rows, web: TestWeb) -> None:
    """Every generated URL recorded with its status, and 200 pages with the bytes served."""
    statuses = web.expected_statuses()
    assert set(statuses) <= set(rows), f"not recorded: {sorted(set(statuses) - set(rows))}"
    wrong = {u: (rows[u][0]["status"], s) for u, s in statuses.items() if rows[u][0]["status"] != s}
    assert not wrong, wrong
    for url, body in web.expected_pages().items():
        meta, content = rows[url]
        assert content == body, url
        assert meta["error"] is None and meta["bytes"] == len(body) and not meta["truncated"]
    for url, status in web.gone_pages().items():
        assert rows[url][1] is None, f"{url} answers {status} but still has content"


# -- a whole web ---------------------------------------------------------------------------


def test_every_url_of_a_generated_web_is_recorded_with_its_status(cluster, tables):
    web = TestWeb(pages=40, seed=11, include_bad=False)
    with web as base:
        report = crawl(cluster, [base + "/"], depth=3, **FAST, **tables)
    rows = repository(cluster, tables["repository"])
    must_match_the_web(rows, web)
    assert report.stopped is None and report.queued_left == 0
    assert all(set(meta) == META_KEYS for meta, _ in rows.values())
    meta = rows[web.abs("/")][0]
    assert meta["url"] == meta["final_url"] == web.abs("/") and meta["content_type"] == "text/html; charset=utf-8"
    assert 0 < time.time() - meta["fetched_at"] < 600
    # One transaction per page: page recorded <=> frontier row final.
    states = frontier_states(cluster, tables["frontier"])
    assert set(states) == set(rows) and set(states.values()) <= {"done", "failed"}
    assert all(states[u] == "done" for u in web.expected_pages())
    # Every page fetched once; page:meta is observed, so the crawler's writes notify.
    fetched = Counter(p for p in web.requests if p != "/robots.txt")
    assert max(fetched.values()) == 1
    assert cluster.notify_columns(tables["repository"], ["page:meta", "page:content"]) == ["page:meta"]


def test_robots_txt_disallow_is_respected(cluster, tables):
    web = TestWeb(pages=20, seed=2, include_bad=False)
    with web as base:
        report = crawl(cluster, [base + "/"], depth=2, **FAST, **tables)
    rows = repository(cluster, tables["repository"])
    assert not [p for p in web.requests if p.startswith("/private/")], "a disallowed page was requested"
    for url in web.disallowed_urls():
        meta, content = rows[url]
        assert (meta["status"], meta["error"], content) == (0, "disallowed by robots.txt", None)
        assert report.outcomes[url].label == "robots.txt"
    assert web.requests.count("/robots.txt") == 1  # cached per origin


def test_bad_inputs_have_clear_outcomes_and_do_not_stop_the_crawl(cluster, tables):
    web = TestWeb(pages=20, seed=5, huge_bytes=3 * CAP, slow_s=8.0)  # slower than the timeout
    with web as base:
        report = crawl(cluster, [base + "/"], depth=2, **FAST, **tables)
    rows = repository(cluster, tables["repository"])
    must_match_the_web(rows, web)  # the good pages all made it
    special = {name: rows[url] for name, url in web.special_urls().items()}
    assert set(special) == set(SPECIALS)

    def outcome(name):
        meta, content = special[name]
        return meta["status"], meta["error"], content

    for name in ("malformed", "latin1", "latin1_undeclared", "binary", "self_link", "bad_links"):
        status, error, content = outcome(name)
        assert (status, error) == (200, None) and content, name
    assert outcome("empty") == (200, None, b"")
    meta, content = special["huge"]
    assert (meta["status"], meta["error"], meta["truncated"], meta["bytes"]) == (200, None, True, CAP)
    assert len(content) == CAP and content.startswith(b"<html>")
    status, error, content = outcome("redirect_loop")
    assert status == 302 and error.startswith("redirect loop: ") and content is None
    assert error.endswith("/bad/loop-a.html -> " + web.abs("/bad/loop-b.html") + " -> " + web.abs("/bad/loop-a.html"))
    status, error, _ = outcome("redirect_chain")
    assert status == 302 and error.startswith("more than 5 redirects")
    meta, content = special["redirect_ok"]
    assert (meta["status"], meta["error"], meta["final_url"]) == (200, None, web.abs("/site0/")) and content
    status, error, _ = outcome("redirect_private")
    assert status == 302 and "not followed: disallowed by robots.txt" in error
    assert outcome("server_error") == (500, None, None)
    status, error, _ = outcome("slow")
    assert status == 0 and error.startswith("timeout")
    meta, content = special["pdf"]
    assert (meta["status"], meta["content_type"], meta["error"], meta["bytes"], content) == (200, "application/pdf", None, 0, None)
    status, error, content = outcome("short_body")
    assert status == 200 and error.startswith("protocol error") and content is None
    status, error, _ = outcome("not_http")
    assert status == 0 and error.startswith("protocol error")
    # The self-link page was crawled once, not re-queued by its own link.
    assert web.requests.count(SPECIALS["self_link"]) == 1
    counts = report.counts()
    assert counts["302 (error)"] == 3 and counts["robots.txt"] == 3
    assert "redirect loop" in report.summary()


def test_a_recrawl_records_changed_and_vanished_pages(cluster, tables):
    web = TestWeb(pages=40, seed=3, include_bad=False)
    with web as base:
        crawl(cluster, [base + "/"], depth=3, **FAST, **tables)
        before = repository(cluster, tables["repository"])
        web.set_version(2)
        assert web.gone_pages(), "version 2 removes pages"
        report = crawl(cluster, [base + "/"], depth=3, **FAST, **tables)
    rows = repository(cluster, tables["repository"])
    must_match_the_web(rows, web)
    changed = [u for u, body in web.expected_pages().items() if before[u][1] != body]
    assert changed, "version 2 changes pages"
    assert report.queued_left == 0 and len(report.outcomes) == len(before)  # a new run fetches all again


# -- resuming ------------------------------------------------------------------------------


def test_resume_after_max_pages_gets_every_page_exactly_once(cluster, tables):
    web = TestWeb(pages=30, seed=4, include_bad=False)
    with web as base:
        report = crawl(cluster, [base + "/"], depth=3, max_pages=8, **FAST, **tables)
        assert report.stopped == "max-pages" and report.queued_left > 0
        assert "--resume" in report.summary()
        for _ in range(30):
            report = crawl(cluster, resume=True, max_pages=12, **FAST, **tables)  # depth from the run
            if report.queued_left == 0:
                break
        assert report.queued_left == 0 and report.stopped is None
    must_match_the_web(repository(cluster, tables["repository"]), web)
    fetched = Counter(p for p in web.requests if p != "/robots.txt")
    assert max(fetched.values()) == 1, [p for p, n in fetched.items() if n > 1]


def test_resume_after_an_interruption(cluster, tables):
    web = TestWeb(pages=30, seed=6, include_bad=False)
    with web as base:
        crawler = Crawler(cluster, depth=3, **FAST, **tables)
        reports = []
        thread = threading.Thread(target=lambda: reports.append(crawler.run([base + "/"])))
        thread.start()
        deadline = time.monotonic() + 60
        while len(web.requests) < 6 and time.monotonic() < deadline:
            time.sleep(0.005)
        crawler.stop()
        thread.join(60)
        crawler.close()
        assert reports and reports[0].stopped == "stopped"
        report = crawl(cluster, resume=True, **FAST, **tables)
        assert report.queued_left == 0
    must_match_the_web(repository(cluster, tables["repository"]), web)


def test_resume_needs_a_run_and_seeds_must_be_http(cluster, tables):
    with pytest.raises(CrawlError, match="nothing to resume"):
        crawl(cluster, resume=True, **FAST, **tables)
    with pytest.raises(CrawlError, match="no http"):
        crawl(cluster, ["mailto:x@y.z", "not a url"], **FAST, **tables)


def test_invalid_seeds_are_reported_and_valid_ones_crawled(cluster, tables):
    web = TestWeb(pages=5, seed=1, include_bad=False)
    with web as base:
        report = crawl(cluster, ["javascript:void(0)", base + "/site0/page0.html"], **FAST, **tables)
    assert report.invalid_seeds == ["javascript:void(0)"]
    assert list(repository(cluster, tables["repository"])) == [web.abs("/site0/page0.html")]
    assert "not an http(s) URL" in report.summary()


# -- the command ---------------------------------------------------------------------------


def test_caffeine_crawl_command(cluster, tables, monkeypatch, capsys, tmp_path):
    import caffeine.percolator
    from caffeine.commands.cli import main

    monkeypatch.setattr(caffeine.percolator, "connect", lambda **kw: KeepOpen(cluster))
    web = TestWeb(pages=10, seed=8, include_bad=False)
    with web as base:
        seeds = tmp_path / "urls.txt"
        seeds.write_text(f"# seeds\n{base}/site0/\n\n{base}/site1/page0.html\n")
        common = ["--delay", "0", "--timeout", "3", "--max-bytes", "256K", "--workers", "2", "--no-progress",
                  "--repository-table", tables["repository"], "--frontier-table", tables["frontier"]]
        assert main(["crawl", "--file", str(seeds), "--depth", "1", "--max-pages", "3", *common]) == 0
        first = capsys.readouterr().out
        assert "crawl run" in first and "still queued" in first
        assert main(["crawl", "--resume", *common]) == 0
        out = capsys.readouterr().out
    rows = repository(cluster, tables["repository"])
    site0 = [u for u in web.expected_pages() if "/site0/" in u]
    assert set(site0) <= set(rows) and web.abs("/site1/page0.html") in rows
    assert "200:" in out


def test_crawl_command_without_urls_is_an_error(capsys):
    from caffeine.commands.cli import main

    assert main(["crawl"]) == 1
    assert "give URLs" in capsys.readouterr().err


# -- pieces: fetch, robots, politeness, the test web ------------------------------------------


@contextmanager
def serve(routes: dict[str, tuple[int, dict, bytes]]):
    """A tiny server answering ``routes[path] = (status, headers, body)``; 404 otherwise."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            status, headers, body = routes.get(self.path.split("?")[0], (404, {}, b""))
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.block_on_close = False  # idle keep-alive connections must not delay the test
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_fetch_outcomes_for_types_and_bad_redirects():
    html = {"Content-Type": "text/html"}
    routes = {
        "/page": (200, html, b"<p>x</p>"),
        "/notype": (200, {}, b"<p>x</p>"),
        "/xhtml": (200, {"Content-Type": "application/xhtml+xml; charset=utf-8"}, b"<p>x</p>"),
        "/image": (200, {"Content-Type": "image/png"}, b"\x89PNG"),
        "/to-mailto": (302, {"Location": "mailto:a@b.c"}, b""),
        "/no-location": (301, {}, b""),
        "/gone": (410, html, b"gone"),
    }
    fetcher = Fetcher(timeout=2, address_policy=LOOPBACK)
    with serve(routes) as base:
        r = {p: fetcher.fetch(base + p) for p in routes}
    fetcher.close()
    assert (r["/page"].status, r["/page"].content, r["/page"].ok) == (200, b"<p>x</p>", True)
    assert r["/xhtml"].content == b"<p>x</p>"
    assert (r["/notype"].status, r["/notype"].content, r["/notype"].error) == (200, None, None)
    assert (r["/image"].content_type, r["/image"].content, r["/image"].meta()["bytes"]) == ("image/png", None, 0)
    assert r["/to-mailto"].status == 302 and "unusable location" in r["/to-mailto"].error
    assert r["/no-location"].error == "redirect without a Location header"
    assert (r["/gone"].status, r["/gone"].error, r["/gone"].content, r["/gone"].ok) == (410, None, None, False)


def test_fetch_of_a_closed_port_is_a_recorded_error():
    with serve({}) as base:
        pass  # the server is gone: its port refuses connections
    fetcher = Fetcher(timeout=3, address_policy=LOOPBACK)
    result = fetcher.fetch(base + "/x")
    fetcher.close()
    assert result.status == 0 and result.error.startswith("connection failed")


@pytest.mark.parametrize("status, allowed", [(404, True), (403, True), (503, False)])
def test_robots_txt_status_rules(status, allowed):
    with serve({"/robots.txt": (status, {"Content-Type": "text/plain"}, b"User-agent: *\nDisallow: /\n")}) as base:
        fetcher = Fetcher(timeout=3, address_policy=LOOPBACK)
        reason = RobotsCache(fetcher).check(base + "/page")
        fetcher.close()
    assert (reason is None) == allowed
    if not allowed:
        assert "robots.txt unreachable" in reason


def test_robots_txt_rules_and_crawl_delay():
    robots = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 2\n\nUser-agent: CaffeineBot\nDisallow: /nobots/\nCrawl-delay: 999\n"
    with serve({"/robots.txt": (200, {"Content-Type": "text/plain"}, robots)}) as base:
        fetcher = Fetcher(timeout=3, address_policy=LOOPBACK)
        cache = RobotsCache(fetcher)
        assert cache.check(base + "/nobots/x") == "disallowed by robots.txt"
        assert cache.check(base + "/private/x") is None  # our own group applies, not "*"
        assert cache.check(base + "/ok") is None
        assert cache.crawl_delay(base) == 30.0  # capped
        fetcher.close()


def test_politeness_one_fetch_per_host_at_a_time_spaced_by_the_delay():
    queues = HostQueues(lambda origin: 0.05 if "slow" in origin else 0.0)
    for i in range(4):
        queues.add(f"http://slow.example/{i}", 0)
        queues.add(f"http://fast.example/{i}", 0)
    handed = []
    while (item := queues.next()) is not None:
        handed.append((item[0], time.monotonic()))
        queues.done(*item)
    slow = [t for u, t in handed if "slow" in u]
    assert len(handed) == 8 and [u for u, _ in handed if "slow" in u] == [f"http://slow.example/{i}" for i in range(4)]
    assert all(b - a >= 0.045 for a, b in zip(slow, slow[1:]))


def test_politeness_a_polite_host_is_never_fetched_twice_at_once():
    queues = HostQueues(lambda origin: 0.01)
    queues.add("http://a.example/1", 0)
    queues.add("http://a.example/2", 0)
    first = queues.next()
    got = []
    t = threading.Thread(target=lambda: got.append(queues.next()))
    t.start()
    time.sleep(0.1)
    assert not got, "second URL of the host handed out while the first is in flight"
    queues.done(*first)
    t.join(5)
    assert got == [("http://a.example/2", 0)]


def test_max_pages_and_stop_end_the_schedule():
    queues = HostQueues(lambda origin: 0.0, max_pages=2)
    for i in range(5):
        queues.add(f"http://a.example/{i}", 0)
    assert queues.next() and queues.next() and queues.next() is None
    queues = HostQueues(lambda origin: 0.0)
    queues.add("http://a.example/1", 0)
    queues.stop()
    assert queues.next() is None


def next_in_thread(queues: HostQueues) -> tuple[threading.Thread, list]:
    """Call ``queues.next()`` in a thread; its result lands in the returned list."""
    got: list = []
    t = threading.Thread(target=lambda: got.append(queues.next()), daemon=True)
    t.start()
    return t, got


def test_level_barrier_a_deeper_url_waits_until_the_shallower_one_in_flight_is_done():
    queues = HostQueues(lambda origin: 0.0)  # parallel fetches allowed: only the barrier holds it back
    queues.add("http://a.example/0", 0)
    queues.add("http://b.example/1", 1)
    first = queues.next()
    assert first == ("http://a.example/0", 0)
    t, got = next_in_thread(queues)
    time.sleep(0.1)
    assert not got, "a depth-1 URL handed out while a depth-0 one is in flight"
    queues.done(*first)  # the waiting worker is woken when the level advances
    t.join(5)
    assert got == [("http://b.example/1", 1)]
    queues.done(*got[0])
    assert queues.next() is None


def test_level_barrier_the_same_origin_waits_for_its_shallower_url():
    queues = HostQueues(lambda origin: 0.0)
    queues.add("http://a.example/0", 0)
    queues.add("http://a.example/1", 1)
    first = queues.next()
    t, got = next_in_thread(queues)
    time.sleep(0.1)
    assert not got, "a depth-1 URL handed out while a depth-0 one of its origin is in flight"
    queues.done(*first)
    t.join(5)
    assert got == [("http://a.example/1", 1)]


def test_level_barrier_a_deeper_url_waits_while_a_shallower_one_is_queued_behind_a_delay():
    queues = HostQueues(lambda origin: 0.1 if "slow" in origin else 0.0)
    queues.add("http://slow.example/1", 1)
    queues.add("http://slow.example/2", 1)
    queues.add("http://fast.example/3", 2)  # ready at once, but deeper
    first = queues.next()
    queues.done(*first)
    started = time.monotonic()
    assert queues.next() == ("http://slow.example/2", 1)
    assert time.monotonic() - started >= 0.09  # the politeness delay still holds
    queues.done("http://slow.example/2", 1)
    assert queues.next() == ("http://fast.example/3", 2)


def test_urls_added_out_of_depth_order_go_out_shallowest_first_in_insertion_order_within_a_depth():
    queues = HostQueues(lambda origin: 0.0)
    for url, depth in [("http://a.example/d2", 2), ("http://a.example/d1a", 1), ("http://b.example/d1", 1),
                       ("http://a.example/d1b", 1), ("http://a.example/d0", 0)]:
        queues.add(url, depth)  # a resumed crawl loads queued URLs of mixed depths
    handed = []
    while (item := queues.next()) is not None:
        handed.append(item)
        queues.done(*item)
    assert [d for _, d in handed] == [0, 1, 1, 1, 2]
    assert [u for u, _ in handed if "a.example" in u] == [
        "http://a.example/d0", "http://a.example/d1a", "http://a.example/d1b", "http://a.example/d2"]


def test_level_barrier_and_politeness_hold_for_workers_that_add_links_while_they_fetch():
    """Four workers crawl a tree over two origins (one polite): each "page" adds its
    children before ``done``, depth-1 pages are slow. No URL is handed out while a shallower
    one is queued or in flight, the polite origin never has two fetches in flight and they
    are spaced by its delay, every URL goes out once, and every worker ends."""
    delay = 0.02
    queues = HostQueues(lambda origin: delay if "polite" in origin else 0.0)
    lock = threading.Lock()
    unfinished: Counter = Counter()  # depth -> added and not done, as seen by the test
    violations, handed, polite_spans = [], [], []
    polite_in_flight = [0]

    def add(url, depth):
        with lock:
            unfinished[depth] += 1
        queues.add(url, depth)

    def children(url, depth):
        if depth == 3:
            return []
        return [f"http://{host}.example{url.split('.example')[1]}/{i}"
                for i, host in enumerate(["polite", "free", "free"])]

    def worker():
        while (item := queues.next()) is not None:
            url, depth = item
            with lock:
                handed.append(url)
                shallower = [d for d, n in unfinished.items() if d < depth and n]
                if shallower:
                    violations.append((url, depth, shallower))
                if "polite" in url:
                    polite_in_flight[0] += 1
                    if polite_in_flight[0] > 1:
                        violations.append((url, "two polite fetches in flight"))
                    polite_spans.append([time.monotonic(), None])
                    span = polite_spans[-1]
            time.sleep(0.05 if depth == 1 else 0.001)
            for child in children(url, depth):
                add(child, depth + 1)
            with lock:
                unfinished[depth] -= 1
                if "polite" in url:
                    polite_in_flight[0] -= 1
                    span[1] = time.monotonic()
            queues.done(url, depth)

    add("http://free.example", 0)
    workers = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(30)
    assert not any(t.is_alive() for t in workers), "a worker waits forever"
    assert not violations, violations[:5]
    assert len(handed) == len(set(handed)) == 1 + 3 + 9 + 27
    polite_spans.sort()
    assert all(b[0] - a[1] >= delay * 0.9 for a, b in zip(polite_spans, polite_spans[1:]))


def test_generated_web_is_reproducible_and_has_duplicates_mirrors_and_versions():
    a, b, c = GeneratedWeb(60, seed=9), GeneratedWeb(60, seed=9), GeneratedWeb(60, seed=10)
    paths = a.reachable_paths()
    assert [a.respond(p, 0).body for p in paths] == [b.respond(p, 0).body for p in paths]
    assert a.respond("/site0/page0.html", 0).body != c.respond("/site0/page0.html", 0).body
    for copy, original in a.copies.items():  # exact duplicates
        assert a.respond(copy, 0).body == a.respond(a.page_paths[original], 0).body
    m = a.mirrored_site
    assert a.respond(f"/mirror{m}/", 0).body == a.respond(f"/site{m}/", 0).body
    assert a.respond(f"/mirror{m}/page0.html", 0).body == a.respond(f"/site{m}/page0.html", 0).body
    v0 = {p: a.respond(p, 0) for p in a.page_paths}
    v2 = {p: a.respond(p, 2) for p in a.page_paths}
    assert any(r.status in (404, 410) for r in v2.values())
    assert any(r.status == 200 and r.body != v0[p].body for p, r in v2.items())
    assert sum(r.status == 200 and r.body == v0[p].body for p, r in v2.items()) > 40  # most unchanged
    # Links follow a skewed law: the most linked page gets many times the median's inlinks.
    from caffeine.index import parse_html

    inlinks = Counter()
    for p in a.page_paths:
        for target, _ in parse_html(a.respond(p, 0).body, "http://h" + p, "text/html").links:
            inlinks[target] += 1
    counts = sorted(inlinks.values(), reverse=True)
    assert counts[0] >= 4 * counts[len(counts) // 2]


def test_markers_are_unique_answers():
    web = TestWeb(pages=30, seed=1, include_bad=False)
    from caffeine.index import parse_html, tokenize

    pages = web.expected_pages()
    owners = {}
    for url, body in pages.items():
        for token in set(tokenize(parse_html(body, url, "text/html").text)):
            if token.startswith("qu"):
                owners.setdefault(token, set()).add(url)
    page = web.abs("/site1/page2.html")
    assert page in owners[web.marker(page)]
    assert "scriptword" not in {t for body in pages.values() for t in tokenize(parse_html(body, "http://h/", None).text)}


def test_directory_mode_serves_files(cluster, tables, tmp_path):
    (tmp_path / "index.html").write_text('<a href="sub/a.html">a</a> <a href="b.htm">b</a>')
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.html").write_text('<p>alpha</p><a href="../index.html">home</a>')
    (tmp_path / "b.htm").write_text("<p>beta</p>")
    web = TestWeb(directory=tmp_path)
    with web as base:
        crawl(cluster, [base + "/index.html"], depth=2, **FAST, **tables)
    rows = repository(cluster, tables["repository"])
    for url, body in web.expected_pages().items():
        assert rows[url][1] == body
    assert len(web.expected_pages()) == 3


def test_mutate_endpoint_changes_the_version():
    import httpx

    web = TestWeb(pages=10, seed=1)
    with web as base:
        assert httpx.post(base + "/_mutate?version=3").status_code == 200
        assert web.version == 3 and httpx.get(base + "/_version").text.strip() == "3"
        assert httpx.post(base + "/_mutate?version=x").status_code == 400


# -- the crawler feeds the indexing chain ----------------------------------------------------


def _web_truth(web: TestWeb) -> dict[str, tuple[dict, bytes]]:
    """page:meta-like records and bodies straight from the web, without the crawler."""
    pages = {}
    bodies = web.expected_pages()
    for url, status in web.expected_statuses().items():
        meta = {"url": url, "status": status, "content_type": "text/html; charset=utf-8", "error": None,
                "final_url": url}
        pages[url] = (meta, bodies.get(url, b""))
    for url in web.disallowed_urls():
        pages[url] = ({"url": url, "status": 0, "content_type": None, "error": "disallowed by robots.txt",
                       "final_url": url}, b"")
    return pages


@pytest.mark.timeout(600)
def test_a_crawl_indexes_the_web_as_a_from_scratch_computation_does(fresh_cluster):
    """Crawl (default tables, so the indexing application's observers fire), re-crawl after
    the web changed: the dups table and inverted index equal what the pure core computes
    from the web's own bytes."""
    from caffeine.observers.app import application
    from caffeine.percolator.engine_status import wait_until_quiescent
    from caffeine.percolator.worker import Worker
    from support.reference_index import incremental, reference

    cluster = fresh_cluster
    web = TestWeb(pages=30, seed=12, include_bad=False)
    with web as base, Worker(cluster, application, threads=4):
        crawl(cluster, [base + "/"], depth=3, **FAST)
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=300, poll_s=0.1)
        want = reference(_web_truth(web))
        assert any(len(members) > 1 for _, members in want["dups"].values()), "the web has duplicates"
        got = incremental(cluster)
        assert got["dups"] == want["dups"] and got["docs"] == want["docs"] and got["postings"] == want["postings"]

        web.set_version(2)
        crawl(cluster, [base + "/"], depth=3, **FAST)
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=300, poll_s=0.1)
        final = reference(_web_truth(web), previous=want)
        assert final["docs"] != want["docs"], "the new version changed the index"
        got = incremental(cluster)
        assert got["dups"] == final["dups"] and got["docs"] == final["docs"] and got["postings"] == final["postings"]


def test_links_to_other_hosts_are_followed_only_with_any_host(cluster, tables, tmp_path):
    other = TestWeb(pages=3, seed=1, include_bad=False)
    with other as other_base:
        (tmp_path / "index.html").write_text(f'<a href="{other_base}/site0/page0.html">away</a> <a href="local.html">here</a>')
        (tmp_path / "local.html").write_text("<p>local</p>")
        with TestWeb(directory=tmp_path) as base:
            crawl(cluster, [base + "/index.html"], depth=1, **FAST, **tables)
            assert set(repository(cluster, tables["repository"])) == {base + "/index.html", base + "/local.html"}
            crawl(cluster, [base + "/index.html"], depth=1, any_host=True, **FAST, **tables)
            assert other.abs("/site0/page0.html") in repository(cluster, tables["repository"])
