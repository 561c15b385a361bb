"""What pages say about themselves, on a served site crawled into real HBase with the observer chain.

One small site uses every directive and redirect form once: robots meta tags (``robots``,
this crawler's own ``caffeinebot``, another crawler's name), ``X-Robots-Tag`` headers (with
and without a user agent), ``nofollow``, ``nosnippet``, an instant meta refresh (a redirect
stub), a delayed one, and one inside ``<noscript>``. The proof is what the server was asked
for and what the index holds: the dups table, postings and docstats equal the from-scratch
reference computed from the site's own bytes, a ``noindex`` page is in the repository but
not in the index, the links of a ``noindex`` page count and those of a ``nofollow`` page do
not. Then the site changes (a page gains ``noindex``, another loses it) and is crawled
again, and the Spark baseline recomputes the same tables (``caffeine verify``).
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api.dependencies import get_cluster
from api.main import create_app
from caffeine.search.settings import SearchSettings
from caffeine.index.schema import DOC_DIRECTIVES, DOC_PARSED, INLINKS, PAGE_META, REPOSITORY
from caffeine.observers.app import application
from caffeine.percolator.worker import Worker
from support.reference_index import incremental, reference
from spark.verify import verify
from support.served_site import crawl_and_settle, indexed, served, spark_session, truth  # noqa: F401 (spark_session: a fixture)

pytestmark = [pytest.mark.hbase, pytest.mark.timeout(900)]


def page(words: str, head: str = "", links: dict[str, str] | None = None) -> bytes:
    anchors = " ".join(f'<a href="{href}">{text}</a>' for href, text in (links or {}).items())
    return (f"<html><head><title>{words.split()[0]}</title>{head}</head>"
            f"<body><p>{words}</p>{anchors}</body></html>").encode()


def robots_meta(name: str, content: str) -> str:
    return f'<meta name="{name}" content="{content}">'


# path -> (body, extra headers, the page:meta "robots" those headers give this crawler)
def site_pages(version: int) -> dict[str, tuple[bytes, dict[str, str], list[str]]]:
    plain_head = robots_meta("robots", "noindex") if version else ""
    noindex_head = "" if version else robots_meta("robots", "noindex")
    pages = {
        "/plain.html": (page("plainword common", plain_head, {"/plain-child.html": "to child"}), {}, []),
        "/noindex.html": (page("hiddenword common", noindex_head, {"/from-noindex.html": "anchorfromnoindex"}), {}, []),
        "/none.html": (page("noneword common", robots_meta("robots", "none"), {"/from-none.html": "x"}), {}, []),
        "/ours.html": (page("oursword common", robots_meta("CaffeineBot", "noindex, nofollow"),
                            {"/from-ours.html": "x"}), {}, []),
        "/theirs.html": (page("theirsword common", robots_meta("googlebot", "noindex, nofollow"),
                              {"/from-theirs.html": "anchorfromtheirs"}), {}, []),
        "/header-noindex.html": (page("headerhidden common"), {"X-Robots-Tag": "noindex"}, ["noindex"]),
        "/header-theirs.html": (page("headertheirs common"), {"X-Robots-Tag": "googlebot: noindex"}, []),
        "/header-nofollow.html": (page("headernofollow common", links={"/from-header-nofollow.html": "x"}),
                                  {"X-Robots-Tag": "caffeinebot: nofollow"}, ["nofollow"]),
        "/nofollow.html": (page("nofollowword common", robots_meta("robots", "nofollow"),
                                {"/from-nofollow.html": "x"}), {}, []),
        "/nosnippet.html": (page("snippetless common", robots_meta("robots", "nosnippet")), {}, []),
        "/stub.html": (page("stubword common", '<meta http-equiv="refresh" content="0; url=/target.html">',
                            {"/target.html": "click here"}), {}, []),
        "/delayed.html": (page("delayedword common", '<meta http-equiv="refresh" content="30; url=/later.html">'), {}, []),
        "/noscript.html": (page("noscriptword common",
                                '<noscript><meta http-equiv="refresh" content="0; url=/never.html"></noscript>'), {}, []),
    }
    for child in ("plain-child", "from-noindex", "from-none", "from-ours", "from-theirs", "from-header-nofollow",
                  "from-nofollow", "target", "later", "never"):
        pages[f"/{child}.html"] = (page(f"{child.replace('-', '')}word common"), {}, [])
    index_links = {path: path for path in pages if not path.startswith(("/from-", "/target", "/later", "/never",
                                                                          "/plain-child"))}
    pages["/"] = (page("home common", links=index_links), {}, [])
    return pages


def repository_rows(cluster) -> dict[str, dict]:
    with cluster.begin() as txn:
        return {row.decode(): cols for row, cols in txn.scan(REPOSITORY, columns=[PAGE_META, DOC_PARSED, DOC_DIRECTIVES])}


def inlink_sources(cluster, url: str) -> dict[str, str]:
    with cluster.begin() as txn:
        return {c[len("in:"):]: v.decode() for c, v in txn.get_all(INLINKS, url).items() if c.startswith("in:")}


def check_the_search_service(cluster, b: str) -> None:
    """Search shows no noindex page and no snippet of a nosnippet one; the details say why."""
    app = create_app(SearchSettings(stats_refresh_s=3600))
    app.dependency_overrides[get_cluster] = lambda: cluster
    with TestClient(app) as client:
        assert client.get("/search", params={"q": "hiddenword"}).json()["total"] == 0
        hits = client.get("/search", params={"q": "snippetless"}).json()["results"]
        assert [h["url"] for h in hits] == [b + "/nosnippet.html"] and hits[0]["snippet"] == ""
        plain = client.get("/search", params={"q": "plainword"}).json()["results"]
        assert plain and "plainword" in plain[0]["snippet"]
        doc = client.get("/documents", params={"url": b + "/noindex.html"}).json()
        assert doc["robots"] == ["noindex"] and not doc["indexed"] and doc["content_hash"] is None
        stub = client.get("/documents", params={"url": b + "/stub.html"}).json()
        assert stub["refresh_to"] == b + "/target.html" and stub["redirect_stub"] and not stub["indexed"]
        assert client.get("/documents", params={"url": b + "/nosnippet.html"}).json()["excerpt"] is None
        page = client.get("/page/document", params={"url": b + "/noindex.html"}).text
        assert "Robots directives" in page and "not a document of the index" in page


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_directives_decide_what_is_fetched_and_indexed(fresh_cluster, spark_session):
    cluster = fresh_cluster
    application.install(cluster)
    with served(site_pages) as site, Worker(cluster, application, threads=4):
        b = site.base
        asked = crawl_and_settle(cluster, site)
        # What the server was asked for: nofollow links (meta, "none", this crawler's own tag,
        # the header) and a refresh inside <noscript> never; the refresh target of a stub,
        # the delayed refresh's target, a noindex page's links and another crawler's
        # nofollow's links, yes.
        for never in ("/from-none.html", "/from-ours.html", "/from-header-nofollow.html", "/from-nofollow.html",
                      "/never.html"):
            assert never not in asked, never
        for fetched in ("/target.html", "/later.html", "/from-noindex.html", "/from-theirs.html", "/plain-child.html"):
            assert fetched in asked, fetched

        rows = repository_rows(cluster)
        hidden = {"/noindex.html", "/none.html", "/ours.html", "/header-noindex.html", "/stub.html"}
        for path in hidden:  # fetched and kept, but no document
            assert PAGE_META in rows[b + path] and DOC_PARSED not in rows[b + path], path
        documents = {b + p for p in asked if p.endswith(".html") or p == "/"} - {b + p for p in hidden}
        assert indexed(cluster) == documents
        assert json.loads(rows[b + "/noindex.html"][DOC_DIRECTIVES]) == {"robots": ["noindex"]}
        assert json.loads(rows[b + "/header-noindex.html"][DOC_DIRECTIVES]) == {"robots": ["noindex"]}
        assert json.loads(rows[b + "/header-nofollow.html"][DOC_DIRECTIVES]) == {"robots": ["nofollow"]}
        assert json.loads(rows[b + "/ours.html"][DOC_DIRECTIVES]) == {"robots": ["noindex", "nofollow"]}
        assert json.loads(rows[b + "/stub.html"][DOC_DIRECTIVES]) == {"redirect": True, "refresh": b + "/target.html"}
        assert json.loads(rows[b + "/delayed.html"][DOC_DIRECTIVES]) == {"redirect": False, "refresh": b + "/later.html"}
        assert json.loads(rows[b + "/header-noindex.html"][PAGE_META])["robots"] == ["noindex"]
        assert DOC_DIRECTIVES not in rows[b + "/theirs.html"] and DOC_DIRECTIVES not in rows[b + "/noscript.html"]
        assert json.loads(rows[b + "/nosnippet.html"][DOC_PARSED])["robots"] == ["nosnippet"]
        # Links: a noindex page's count (with their anchor text), a stub's refresh is a link
        # of its own, another crawler's nofollow is not ours.
        assert inlink_sources(cluster, b + "/from-noindex.html") == {b + "/noindex.html": "anchorfromnoindex"}
        assert inlink_sources(cluster, b + "/from-theirs.html") == {b + "/theirs.html": "anchorfromtheirs"}
        assert inlink_sources(cluster, b + "/target.html") == {b + "/stub.html": "click here"}
        assert inlink_sources(cluster, b + "/from-nofollow.html") == {}

        want = reference(truth(site, asked))
        got = incremental(cluster)
        assert got["dups"] == want["dups"] and got["docs"] == want["docs"] and got["postings"] == want["postings"]
        assert "hiddenword" not in got["postings"] and "headerhidden" not in got["postings"]
        assert b + "/from-noindex.html" in got["postings"]["anchorfromnoindex"]
        check_the_search_service(cluster, b)

        # The directive appears on an indexed page and leaves another: the index follows.
        site.version = 1
        asked_again = crawl_and_settle(cluster, site)
        now = indexed(cluster)
        assert b + "/plain.html" not in now and b + "/noindex.html" in now
        final = reference(truth(site, asked_again), previous=want)
        got = incremental(cluster)
        assert got["dups"] == final["dups"] and got["docs"] == final["docs"] and got["postings"] == final["postings"]
        assert "plainword" not in got["postings"] and b + "/noindex.html" in got["postings"]["hiddenword"]
        assert inlink_sources(cluster, b + "/plain-child.html") == {b + "/plain.html": "to child"}, \
            "a noindex page's links still count"

    report = verify(cluster.settings, spark=spark_session, partitions=2, timeout_s=300)
    assert report.clean, report.format()


def canonical_pages(version: int) -> dict[str, tuple[bytes, dict[str, str], list[str]]]:
    """Exact duplicates whose members declare canonicals: inside the cluster, outside it, and
    one only the declaration leads to (version 1 changes only a declaration)."""
    def declaring(words: str, canonical: str | None, links: dict[str, str] | None = None) -> bytes:
        head = f'<link rel="canonical" href="{canonical}">' if canonical else ""
        return page(words, head, links)

    a_canonical = "/a-print.html" if version else "/a.html"
    pages = {
        # Same text; print has more inlinks, but both declare /a.html (version 1: print).
        "/a.html": (declaring("articleword body", a_canonical), {}, []),
        "/a-print.html": (declaring("articleword body", a_canonical), {}, []),
        "/more1.html": (page("moreone text", links={"/a-print.html": "print"}), {}, []),
        "/more2.html": (page("moretwo text", links={"/a-print.html": "print"}), {}, []),
        # b-copy declares a page outside the cluster: not honoured, but discovered and crawled.
        "/b.html": (declaring("bookword body", None), {}, []),
        "/b-copy.html": (declaring("bookword body", "/elsewhere.html"), {}, []),
        "/elsewhere.html": (page("elsewhereword text"), {}, []),
        # c declares a page no link leads to, with the same text: crawled, joins, and wins.
        "/c.html": (declaring("cellword body", "/c-new.html"), {}, []),
        "/c-new.html": (declaring("cellword body", None), {}, []),
    }
    links = {path: path for path in ("/a.html", "/a-print.html", "/more1.html", "/more2.html", "/b.html",
                                     "/b-copy.html", "/c.html")}
    pages["/"] = (page("home text", links=links), {}, [])
    return pages


def canonicals(cluster) -> dict[str, str]:
    """{member url: its cluster's canonical} of every member of a dups row."""
    got = incremental(cluster)["dups"]
    return {url: canonical for canonical, members in got.values() for url in members}


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_rel_canonical_is_honoured_within_the_cluster(fresh_cluster, spark_session):
    cluster = fresh_cluster
    application.install(cluster)
    with served(canonical_pages) as site, Worker(cluster, application, threads=4):
        b = site.base
        asked = crawl_and_settle(cluster, site)
        assert "/elsewhere.html" in asked and "/c-new.html" in asked, "declared canonicals are discovered"
        elected = canonicals(cluster)
        assert elected[b + "/a-print.html"] == b + "/a.html", "declared, though print has more inlinks"
        assert elected[b + "/b-copy.html"] == b + "/b.html", "a declaration outside the cluster counts for nothing"
        assert elected[b + "/c.html"] == b + "/c-new.html"
        want = reference(truth(site, asked))
        got = incremental(cluster)
        assert got["dups"] == want["dups"] and got["docs"] == want["docs"] and got["postings"] == want["postings"]

        site.version = 1  # only the declarations of a and a-print change; their text does not
        asked = crawl_and_settle(cluster, site)
        assert canonicals(cluster)[b + "/a.html"] == b + "/a-print.html"
        final = reference(truth(site, asked))
        got = incremental(cluster)
        assert got["dups"] == final["dups"] and got["docs"] == final["docs"] and got["postings"] == final["postings"]

    report = verify(cluster.settings, spark=spark_session, partitions=2, timeout_s=300)
    assert report.clean, report.format()
