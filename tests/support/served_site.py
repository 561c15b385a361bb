"""A served site, crawled into real HBase with the observer chain: the site the directive and
near-duplicate tests crawl, and what they compare the index with.

Layer: test support. ``served(pages_of)`` serves ``pages_of(version)`` (path -> (body, extra
headers, the page:meta "robots" those headers give this crawler)) on 127.0.0.1 and records
every path asked for (``Site.requests``); ``truth`` is what the fetched pages are, from the
site itself (for ``reference_index``); ``crawl_and_settle`` crawls it and waits for the
observers; ``indexed`` lists what the index holds; ``spark_session`` is a module-scoped
fixture (import it into a test module to use it).
"""

from __future__ import annotations

import http.server
import threading
from contextlib import contextmanager

import pytest

from caffeine.index.schema import DOCSTATS, DOCSTATS_FAMILY
from caffeine.observers.app import application
from caffeine.percolator.engine_status import wait_until_quiescent
from crawler.crawl import crawl

# A fast crawl of a site on loopback: no politeness delay.
CRAWL_OPTIONS = dict(delay=0, timeout=5.0, workers=4)


class Site:
    """A recording server's state: ``pages_of(version)`` is the site, ``requests`` what was asked."""

    def __init__(self, pages_of) -> None:
        self.pages_of = pages_of
        self.version = 0
        self.requests: list[str] = []
        self.base = ""

    def pages(self):
        return self.pages_of(self.version)


@contextmanager
def served(pages_of):
    """A recording server of ``pages_of(version)`` (path -> (body, extra headers, ...)) on
    127.0.0.1; yields its ``Site``. Unknown paths answer 404."""
    site = Site(pages_of)
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            with lock:
                site.requests.append(self.path)
            found = site.pages().get(self.path)
            body, headers = (found[0], found[1]) if found else (b"<p>no</p>", {})
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def truth(site: Site, fetched: set[str]) -> dict[str, tuple[dict, bytes]]:
    """page:meta-like records and bodies of the fetched pages, from the site itself."""
    out = {}
    for path, (body, _, robots) in site.pages().items():
        if path in fetched:
            url = site.base + path
            meta = {"url": url, "status": 200, "content_type": "text/html; charset=utf-8", "error": None,
                    "final_url": url}
            if robots:
                meta["robots"] = robots
            out[url] = (meta, body)
    return out


def crawl_and_settle(cluster, site: Site) -> set[str]:
    """Crawl the site from ``/`` (depth 2), let the observer chain settle; the paths asked for."""
    site.requests.clear()
    crawl(cluster, [site.base + "/"], depth=2, **CRAWL_OPTIONS)
    wait_until_quiescent(cluster, application.observed_tables, timeout_s=300, poll_s=0.1)
    return set(site.requests)


def indexed(cluster) -> set[str]:
    """The URLs the index holds (those with document statistics)."""
    return {row.decode() for row, _ in cluster.serving(DOCSTATS, [DOCSTATS_FAMILY]).scan(columns=["s:length"])}


@pytest.fixture(scope="module")
def spark_session():
    """A local Spark session for ``caffeine verify``'s baseline, shared by a module's tests."""
    from spark.job import spark_session as make

    session = make("local[2]", "caffeine-tests", {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    yield session
    session.stop()
