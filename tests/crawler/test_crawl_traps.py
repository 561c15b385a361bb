"""No site can trap the crawler: the crawler-trap limits bound what one site makes a run hold.

Trap sites are served on 127.0.0.1 and generate URLs without end (an endless calendar, a fresh
session id in every link, ever-deeper relative paths, thousands of links on a page, a 100 KB
URL). Crawled with ``--depth 50``, what the servers were asked for and what the frontier holds
stay bounded, and the summary and progress line name the sites and the limits they hit. The
connection layer is guarded as in ``test_crawl_addresses`` (``network_stub``): nothing here
leaves loopback. Crawls record into the in-memory store and real HBase (the ``cluster`` fixture).
"""

from __future__ import annotations

import re
import urllib.parse
import uuid
from collections import Counter

import pytest

from caffeine.index import normalize_url
from crawler.crawl import crawl
from crawler.frontier import RUN_ROW
from crawler.traps import HostBudget, LimitCounts, TrapLimits
from support.network_stub import NOT_FOUND, html, network, redirect, serve  # noqa: F401 (network: a fixture)

FAST = dict(delay=0, timeout=3.0, workers=4)


@pytest.fixture
def tables():
    suffix = uuid.uuid4().hex[:8]
    return dict(repository=f"repo_{suffix}", frontier=f"front_{suffix}")


def frontier_rows(cluster, table) -> list[str]:
    with cluster.begin() as txn:
        return [key.decode() for key, _ in txn.scan(table, columns=["state"]) if key != RUN_ROW.encode()]


# -- the limits, pure ------------------------------------------------------------------------------


@pytest.mark.parametrize("url, flag", [
    ("http://h/docs/2024/01/page.html", None),
    ("http://h/a/a/", None),
    ("http://h/a/a/a/", "--max-path-repeats"),
    ("http://h/a/b/a/b/", None),
    ("http://h/x/a/b/a/b/a/b/", "--max-path-repeats"),
    ("http://h/" + "/".join(f"s{i}" for i in range(20)), None),
    ("http://h/" + "/".join(f"s{i}" for i in range(21)), "--max-path-depth"),
    ("http://h/?" + "&".join(f"p{i}=1" for i in range(16)), None),
    ("http://h/?" + "&".join(f"p{i}=1" for i in range(17)), "--max-query-params"),
    ("http://h/" + "x" * 2039, None),
    ("http://h/" + "x" * 2040, "--max-url-length"),
])
def test_per_url_limits_and_their_defaults(url, flag):
    assert TrapLimits().url_limit(url) == flag


def test_a_limit_of_zero_is_no_limit_and_negative_ones_are_refused():
    off = TrapLimits(max_url_length=0, max_path_depth=0, max_path_repeats=0, max_query_params=0)
    assert off.url_limit("http://h/" + "a/" * 5000 + "?" + "&".join(["p=1"] * 100)) is None
    with pytest.raises(ValueError, match="--max-host-pages"):
        TrapLimits(max_host_pages=-1)


def test_the_path_repeat_check_is_bounded_on_huge_paths():
    """Checked on every link: a 5,000-segment path (no depth or length limit) is decided in
    well under a second, and a repeat at its deep end is still found."""
    import time

    limits = TrapLimits(max_url_length=0, max_path_depth=0)
    unique = "/".join(f"s{i}" for i in range(5000))
    started = time.monotonic()
    assert limits.url_limit(f"http://h/{unique}") is None
    assert limits.url_limit(f"http://h/{unique}/a/b/a/b/a/b") == "--max-path-repeats"
    assert limits.url_limit("http://h/" + "/".join(["a", "b"] * 2500)) == "--max-path-repeats"
    assert time.monotonic() - started < 2.0


def test_the_host_budget_counts_what_it_cuts_and_takes_back_what_was_not_queued():
    counts = LimitCounts()
    budget = HostBudget(3, counts, known=["http://a/0"])
    assert budget.take(["http://a/1", "http://a/2", "http://a/3", "http://b/1"]) == ["http://a/1", "http://a/2", "http://b/1"]
    budget.give_back(["http://a/2"])  # another page queued it first
    assert budget.take(["http://a/4", "http://a/5"]) == ["http://a/4"]
    assert counts.counts() == Counter({("a", "--max-host-pages"): 2})
    assert counts.lines() == ["a: --max-host-pages 2"]


@pytest.mark.parametrize("url, want", [
    ("http://h/p?PHPSESSID=0f1e2d3c4b5a69788796a5b4c3d2e1f0&x=1", "http://h/p?x=1"),
    ("http://h/p?x=1&jsessionid=ABC&y=2", "http://h/p?x=1&y=2"),
    ("http://h/p;jsessionid=A1B2C3D4?x=1", "http://h/p?x=1"),
    ("http://h/p?SessionID=abc", "http://h/p"),
    ("http://h/p?ASPSESSIONIDQQGGGNSC=KJHGFDSA", "http://h/p"),
    # "sid" is kept whatever its value: as often a content id as a session (dropping it could
    # merge distinct pages, and migrate-urls would mark all but one gone).
    ("http://h/p?sid=5f2b8c1d9e0a47b3a6c2d4e8f0b1a3c5", "http://h/p?sid=5f2b8c1d9e0a47b3a6c2d4e8f0b1a3c5"),
    ("http://h/p?sid=05/01/01/1234", "http://h/p?sid=05/01/01/1234"),   # a story id, not a session
    ("http://h/p?sid=42", "http://h/p?sid=42"),
    ("http://h/p?PHPSESS%49D=abc", "http://h/p"),                         # escaped, still the name
    ("http://h/a/..;jsessionid=x/b", "http://h/b"),
    ("http://h/a/%2E%2E/b", "http://h/b"),
    ("http://h/p?&PHPSESSID=x&", "http://h/p"),                          # no "?&" left behind
    ("http://h/p?a=1&&PHPSESSID=x&b=2&", "http://h/p?a=1&b=2"),
    ("http://h/p?a=1&&b=2", "http://h/p?a=1&&b=2"),                      # no session id: as written
])
def test_session_ids_are_dropped_in_normalization(url, want):
    assert normalize_url(url) == want
    assert normalize_url(want) == want


# -- a trap site crawled at depth 50 ------------------------------------------------------------------


def calendar(site, path):
    """An endless calendar: every month links to the next and the previous one and to its days."""
    parts = urllib.parse.urlsplit(path)
    query = urllib.parse.parse_qs(parts.query)
    if parts.path == "/":
        return html("/calendar?month=2024-01")
    if parts.path != "/calendar":
        return NOT_FOUND
    year, month = map(int, query.get("month", ["2024-01"])[0].split("-"))
    nxt = f"{year + (month == 12)}-{month % 12 + 1:02d}"
    prv = f"{year - (month == 1)}-{(month - 2) % 12 + 1:02d}"
    days = [f"/calendar?month={year}-{month:02d}&day={d}" for d in range(1, 29)]
    return html(f"/calendar?month={nxt}", f"/calendar?month={prv}", *days)


def sessions(site, path):
    """Five pages, each linking to all five with a fresh session id in every link."""
    parts = urllib.parse.urlsplit(path)
    if parts.path not in ["/"] + [f"/p{i}.html" for i in range(5)]:
        return NOT_FOUND
    links = [f"/p{i}.html?PHPSESSID={uuid.uuid4().hex}" for i in range(4)] + [f"/p4.html;jsessionid={uuid.uuid4().hex}"]
    return html(*links)


def deep(site, path):
    """Ever-deeper relative links: ``a/b/`` under /a/b/... and a new segment ``nK/`` per level."""
    segments = [s for s in urllib.parse.urlsplit(path).path.split("/") if s]
    if path == "/":
        return html("a/b/", "n1/")
    if segments and segments[0] == "a":
        return html("a/b/")
    return html(f"n{len(segments) + 1}/")


def crowded(site, path):
    """A page of 3,000 links, a link with 40 query parameters, a 100 KB URL and a redirect to it."""
    long_path = "/" + "x" * 100_000
    if path == "/":
        return html("/to-long", *[f"/item{i}.html" for i in range(3000)],
                    "/q?" + "&".join(f"p{i}=1" for i in range(40)), long_path)
    if path == "/to-long":
        return redirect(long_path)
    if re.fullmatch(r"/item\d+\.html", path):
        return html()
    return NOT_FOUND


def test_a_trap_site_crawled_at_depth_50_stays_bounded_and_the_summary_names_the_limits(
        cluster, tables, network, monkeypatch, capsys):
    """Through ``caffeine crawl`` (default limits but for the page and host budgets), with the
    real resolver and connector (IP literals only) under the socket guard."""
    import caffeine.percolator
    from caffeine.commands.cli import main

    class KeepOpen:  # the fixture's cluster, handed to the command, which closes what it connects
        def __getattr__(self, name):
            return getattr(cluster, name)

        def close(self):
            pass

    monkeypatch.setattr(caffeine.percolator, "connect", lambda **kw: KeepOpen())
    with serve(calendar) as cal, serve(sessions) as ses, serve(deep) as dee, serve(crowded) as cro:
        argv = ["crawl", cal.base + "/", ses.base + "/", dee.base + "/", cro.base + "/", "--depth", "50",
                "--max-host-pages", "150", "--max-links-per-page", "100", "--delay", "0", "--timeout", "3",
                "--workers", "4", "--progress", "--repository-table", tables["repository"],
                "--frontier-table", tables["frontier"]]
        assert main(argv) == 0
    out, err = capsys.readouterr()
    rows = frontier_rows(cluster, tables["frontier"])
    per_site = Counter(urllib.parse.urlsplit(u).netloc for u in rows)

    # The endless calendar: cut at 150 URLs of its site, each requested once.
    assert per_site[cal.site] == 150
    assert len(cal.requests) == 151 and cal.requests.count("/robots.txt") == 1
    # Session ids: one URL per page, requested once, without its session id.
    assert sorted(ses.requests) == sorted(["/robots.txt", "/"] + [f"/p{i}.html" for i in range(5)])
    assert per_site[ses.site] == 6
    # Ever-deeper paths: /a/b/ and /a/b/a/b/ (a third repeat is cut); /n1/ ... /n1/.../n20/ (21 segments cut).
    assert sorted(p for p in dee.requests if p.startswith("/a/")) == ["/a/b/", "/a/b/a/b/"]
    assert max(p.count("/") - 1 for p in dee.requests) == 20
    assert per_site[dee.site] == 1 + 2 + 20
    # 3,001 followable links: the first 100 followed; the 40-parameter and 100 KB URLs never
    # requested, nor the redirect's target.
    assert "/to-long" in cro.requests and len([p for p in cro.requests if p.startswith("/item")]) == 99
    assert not [p for p in cro.requests if p.startswith(("/q", "/xxx"))]

    summary = out[out.index("crawler-trap limits hit"):]
    site_lines = {line.split(": ", 1)[0].strip(): line for line in summary.splitlines()[1:] if line.startswith("  ")}
    assert "--max-host-pages" in site_lines[cal.site]
    assert "--max-path-repeats" in site_lines[dee.site] and "--max-path-depth" in site_lines[dee.site]
    assert "--max-links-per-page 2901" in site_lines[cro.site]  # 3,001 followable distinct links, 100 kept
    assert "--max-query-params" in site_lines[cro.site] and "--max-url-length" in site_lines[cro.site]
    assert ses.site not in site_lines  # normalization alone bounds it
    # The redirect to the 100 KB URL: not followed, its target named (shortened) in the error.
    assert "characters) not followed: crawler-trap limit --max-url-length exceeded" in out
    last = err.rsplit("\r", 1)[-1]
    assert "limits hit: " in last and f"{cro.site} (--max-links-per-page" in last  # the site and its limit
    assert "still queued" not in out  # the frontier was exhausted, not cut off
    assert network.escaped == []


def test_resumed_runs_keep_the_host_budget(cluster, tables, network):
    """The run's limits are stored with it: a resume without them keeps them."""
    with serve(calendar) as cal:
        first = crawl(cluster, [cal.base + "/"], depth=50, max_pages=20, limits=TrapLimits(max_host_pages=30),
                      **FAST, **tables, **network.hooks())
        assert first.stopped == "max-pages"
        crawl(cluster, resume=True, **FAST, **tables, **network.hooks())  # the run's limits, not the defaults
    assert len(frontier_rows(cluster, tables["frontier"])) == 30
    assert len([p for p in cal.requests if p != "/robots.txt"]) == 30


def tomcat(site, path):
    """A cookie-less servlet container: a URL without ``;jsessionid=`` is redirected to itself
    with one, and the URL with one is served (links without it, as a session-aware page would
    encode them). ``/loop`` redirects to a fresh ``;jsessionid=`` every time: a real loop."""
    parts = urllib.parse.urlsplit(path)
    if parts.path == "/robots.txt":
        return NOT_FOUND
    if parts.path.startswith("/loop"):
        return redirect(f"/loop;jsessionid={uuid.uuid4().hex.upper()}")
    if ";jsessionid=" not in parts.path:
        return redirect(f"{parts.path};jsessionid={uuid.uuid4().hex.upper()}" + (f"?{parts.query}" if parts.query else ""))
    page = parts.path.split(";", 1)[0]
    return html("/next.html") if page in ("/", "/p.html") else html()


def test_a_servlet_that_redirects_to_add_its_session_id_is_fetched_under_the_normalized_url(cluster, tables, network):
    with serve(tomcat) as site:
        report = crawl(cluster, [site.base + "/p.html", site.base + "/loop"], depth=1, **FAST, **tables,
                       **network.hooks())
    page = report.outcomes[site.base + "/p.html"]
    assert page.status == 200 and page.error is None
    assert report.outcomes[site.base + "/next.html"].status == 200  # its links followed, keys normalized
    assert set(report.outcomes) == {site.base + "/p.html", site.base + "/next.html", site.base + "/loop"}
    assert [p.split(";")[0] for p in site.requests if p.startswith("/p.html")] == ["/p.html", "/p.html"]
    loop = report.outcomes[site.base + "/loop"]
    assert loop.status == 302 and loop.error.startswith("redirect loop: ")
    assert len([p for p in site.requests if p.startswith("/loop")]) == 2  # the detour is taken once
    assert network.escaped == []
