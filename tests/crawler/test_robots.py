"""robots.txt by RFC 9309, against a served site: what the server was asked for is the proof.

Each test serves a small site whose robots.txt uses one real-world rule kind (``*``
wildcards, ``$`` anchors, longest-match precedence between Allow and Disallow, fractional
Crawl-delay, Sitemap lines), crawls it from ``/`` through the crawler, and checks the
server's own request log: a disallowed URL was never requested, an allowed one was.
Crawls record into the in-memory store and real HBase (the ``cluster`` fixture).
"""

from __future__ import annotations

import http.server
import threading
import time
import uuid
from contextlib import contextmanager

import pytest

from crawler.addresses import AddressPolicy
from crawler.crawl import crawl
from crawler.fetch import Fetcher
from crawler.robots import RobotsCache

# The tests' servers listen on 127.0.0.1: a Fetcher connects to global addresses only unless told.
LOOPBACK = AddressPolicy.for_seeds(["127.0.0.1"])

FAST = dict(delay=0, timeout=3.0, workers=4)


@pytest.fixture
def tables():
    suffix = uuid.uuid4().hex[:8]
    return dict(repository=f"repo_{suffix}", frontier=f"front_{suffix}")


class Site:
    """A recording server: ``routes[path_with_query] = (status, content_type, body)``."""

    def __init__(self, routes: dict[str, tuple[int, str, bytes]]):
        self.routes = routes
        self.requests: list[tuple[str, float]] = []  # (path with query, monotonic arrival)
        self.base = ""

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]


@contextmanager
def served(routes: dict[str, tuple[int, str, bytes]]):
    site = Site(routes)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            with lock:
                site.requests.append((self.path, time.monotonic()))
            status, ctype, body = site.routes.get(self.path, (404, "text/html", b"<p>no</p>"))
            if callable(body):
                body = body(site.base)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def html_links(*hrefs: str) -> tuple[int, str, bytes]:
    body = "<html><body>" + " ".join(f'<a href="{h}">link</a>' for h in hrefs) + "</body></html>"
    return 200, "text/html; charset=utf-8", body.encode()


def page(text: str = "page") -> tuple[int, str, bytes]:
    return 200, "text/html; charset=utf-8", f"<html><body><p>{text}</p></body></html>".encode()


def robots(text: str) -> tuple[int, str, bytes]:
    return 200, "text/plain", text.encode()


def test_wildcard_and_end_anchor_rules_keep_those_urls_unrequested(cluster, tables):
    routes = {
        "/robots.txt": robots("User-agent: *\nDisallow: /*?\nDisallow: /*.pdf$\n"),
        "/": html_links("/list?page=2", "/search?q=x", "/paper.pdf", "/paper.pdf.html", "/about.html"),
        "/paper.pdf.html": page(), "/about.html": page(),
        "/list?page=2": page(), "/search?q=x": page(), "/paper.pdf": (200, "application/pdf", b"%PDF"),
    }
    with served(routes) as site:
        report = crawl(cluster, [site.base + "/"], depth=1, **FAST, **tables)
    asked = site.paths()
    for forbidden in ("/list?page=2", "/search?q=x", "/paper.pdf"):
        assert forbidden not in asked, f"{forbidden} was requested despite robots.txt"
        assert report.outcomes[site.base + forbidden].label == "robots.txt"
    # "$" anchors the end: a path that merely contains ".pdf" is allowed.
    assert "/paper.pdf.html" in asked and "/about.html" in asked
    # What the server was asked for, exactly: robots.txt once, then each allowed page once.
    assert sorted(asked) == sorted(["/robots.txt", "/", "/paper.pdf.html", "/about.html"])


def test_the_longest_matching_rule_wins_and_allow_wins_a_tie(cluster, tables):
    routes = {
        "/robots.txt": robots("User-agent: *\nDisallow: /private\nAllow: /private/public\n"
                              "Disallow: /tie\nAllow: /tie\n"),
        "/": html_links("/private/secret.html", "/private/public/page.html", "/privateer.html", "/tie/x.html"),
        "/private/secret.html": page(), "/private/public/page.html": page(), "/privateer.html": page(),
        "/tie/x.html": page(),
    }
    with served(routes) as site:
        crawl(cluster, [site.base + "/"], depth=1, **FAST, **tables)
    asked = site.paths()
    assert "/private/public/page.html" in asked, "the longer Allow must beat the shorter Disallow"
    assert "/tie/x.html" in asked, "RFC 9309: on equal length, Allow wins"
    assert "/private/secret.html" not in asked and "/privateer.html" not in asked
    assert sorted(asked) == sorted(["/robots.txt", "/", "/private/public/page.html", "/tie/x.html"])


def test_a_fractional_crawl_delay_spaces_the_requests_to_the_host(cluster, tables):
    delay = 0.4
    routes = {
        "/robots.txt": robots(f"User-agent: *\nCrawl-delay: {delay}\nDisallow:\n"),
        "/": html_links(*[f"/p{i}.html" for i in range(4)]),
        **{f"/p{i}.html": page(str(i)) for i in range(4)},
    }
    with served(routes) as site:
        crawl(cluster, [site.base + "/"], depth=1, **FAST, **tables)
    times = [t for p, t in site.requests if p != "/robots.txt"]
    assert len(times) == 5
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert min(gaps) >= delay * 0.9, gaps


def test_sitemaps_listed_in_robots_txt_are_seeds_with_the_sitemaps_option(cluster, tables):
    def sitemap(base):
        urls = "".join(f"<url><loc>{base}{p}</loc></url>" for p in ("/orphan.html", "/hidden/x.html"))
        return (f'<?xml version="1.0" encoding="UTF-8"?>'
                f'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>').encode()

    def index(base):
        return (f'<?xml version="1.0"?><sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                f'<sitemap><loc>{base}/sitemap-pages.xml</loc></sitemap></sitemapindex>').encode()

    def robots_body(base):
        return f"User-agent: *\nDisallow: /hidden/\nSitemap: {base}/sitemap-index.xml\n".encode()

    routes = {
        "/robots.txt": (200, "text/plain", robots_body),
        "/": page("home"), "/orphan.html": page("orphan"), "/hidden/x.html": page("hidden"),
        "/sitemap-index.xml": (200, "application/xml", index),
        "/sitemap-pages.xml": (200, "application/xml", sitemap),
    }
    with served(routes) as site:
        crawl(cluster, [site.base + "/"], depth=0, **FAST, **tables)
        assert "/orphan.html" not in site.paths(), "without --sitemaps, only the seed"
        report = crawl(cluster, [site.base + "/"], depth=0, sitemaps=True, **FAST, **tables)
    asked = site.paths()
    assert "/orphan.html" in asked and report.outcomes[site.base + "/orphan.html"].label == "200"
    assert "/hidden/x.html" not in asked, "a sitemap does not override robots.txt"


def test_protego_rules_directly_with_percent_encoding_and_agent_groups():
    text = ("User-agent: *\nDisallow: /\n\nUser-agent: CaffeineBot\nDisallow: /a%3cd.html\n"
            "Disallow: /*/private$\nCrawl-delay: 1.5\n")
    with served({"/robots.txt": robots(text)}) as site:
        fetcher = Fetcher(timeout=3, address_policy=LOOPBACK)
        cache = RobotsCache(fetcher)
        base = site.base
        assert cache.check(base + "/ok") is None  # our own group, not "*"
        assert cache.check(base + "/a%3Cd.html") is not None  # escapes compare case-insensitively
        assert cache.check(base + "/x/private") is not None and cache.check(base + "/x/private/y") is None
        assert cache.crawl_delay(base) == 1.5
        fetcher.close()
