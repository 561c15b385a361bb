"""The search API against the real HBase: a small web is fed through the whole observer chain,
then every endpoint is called through FastAPI's TestClient with ``get_cluster`` overridden.

The web (``build_web``) mixes seeded filler pages with pages whose answers are known:

- ``espresso.html`` is the only page about espresso (its word appears nowhere else);
- three pages share one text (``zanzibar``); ``dup-b.html`` has the most inlinks, so it is the
  canonical and the only one searchable;
- ``popular.html`` and ``lonely.html`` have the same statistics for ``quokka``; the popular one
  has inlinks (seven pages, but from one site with two anchor texts: two votes), so the link
  prior ranks it first;
- ``marmot`` is on many filler pages, ``walrus`` on one page that also says ``marmot``;
- ``escape.html`` has markup-looking text, which a snippet must escape;
- ``gone.html`` was fetched with 404: known to ``/documents``, not searchable.

Beyond these, rankings are compared with a from-scratch BM25F (docs/RANKING.md: all words
first with proximity, then the ranked fallback) over ``reference_index.reference``
(the independent computation the pipeline test uses), for a set of queries.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from fastapi.testclient import TestClient

from caffeine.index import MAX_POSITIONS, decode_posting, tokenize
from support import reference_scoring
from support.reference_index import reference
from support.search_web import BASE

from api.dependencies import get_cluster
from api.main import create_app
from caffeine.search.settings import SearchSettings


# ``web`` and ``indexed`` (the web, indexed on the real HBase) come from tests/search/conftest.py.
@pytest.fixture(scope="module")
def client(indexed):
    app = create_app(SearchSettings(stats_refresh_s=3600))
    app.dependency_overrides[get_cluster] = lambda: indexed
    with TestClient(app) as c:
        yield c


@pytest.fixture(scope="module")
def want(web):
    return reference(web)


def expected_ranking(want, terms: list[str]) -> list[tuple[str, float]]:
    """docs/RANKING.md from scratch over the reference index: BM25F x link prior; documents
    with every term first (plus the proximity bonus, from the documents' own tokens), then
    those with some of them (the ranked fallback)."""
    docs = want["docs"]
    n = len(docs)
    lengths = {url: (docs[url], *want["fields"][url]) for url in docs}
    averages = tuple(sum(length[i] for length in lengths.values()) / n for i in range(4))
    distinct = list(dict.fromkeys(terms))

    parts: dict[str, list[float]] = {}
    for term in distinct:
        row = want["postings"].get(term, {})
        for url, value in row.items():
            p = decode_posting(value)
            parts.setdefault(url, []).append(
                reference_scoring.bm25f((p.tf, p.title, p.anchor, p.url), lengths[url], averages, len(row), n))
    base = {url: reference_scoring.score(s, want["votes"][url]) for url, s in parts.items()}
    strict = {url for url in base if len(parts[url]) == len(distinct)}

    def proximity(url: str) -> float:
        tokens = tokenize(want["parsed"][url].text)
        where = {t: [i for i, token in enumerate(tokens) if token == t][:MAX_POSITIONS] for t in distinct}
        gaps = [abs(i - j) for a in distinct for b in distinct if a != b for i in where[a] for j in where[b]]
        if not gaps:
            return 0.0
        return reference_scoring.proximity(min(gaps))

    first = sorted(((url, base[url] + (proximity(url) if len(distinct) > 1 else 0.0)) for url in strict),
                   key=lambda p: (-p[1], p[0]))
    rest = sorted(((url, score) for url, score in base.items() if url not in strict), key=lambda p: (-p[1], p[0]))
    return first + rest


# -- /search ---------------------------------------------------------------------------------

def test_a_unique_word_finds_its_page_first_with_a_marked_snippet(client):
    r = client.get("/search", params={"q": "Espresso"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["terms"] == ["espresso"]
    assert body["total"] == 1
    hit = body["results"][0]
    assert hit["url"] == BASE + "espresso.html"
    assert hit["title"] == "All about espresso"
    assert "<mark>espresso</mark>" in hit["snippet"].lower()
    assert hit["cluster_size"] == 1 and hit["score"] > 0
    assert body["took_ms"] > 0


def test_duplicates_collapse_to_their_canonical(client):
    body = client.get("/search", params={"q": "zanzibar"}).json()
    assert body["total"] == 1
    hit = body["results"][0]
    assert hit["url"] == BASE + "dup-b.html"  # four inlinks, against one and none
    assert hit["cluster_size"] == 3
    cluster = client.get(hit["cluster_url"]).json()
    assert cluster["canonical_url"] == BASE + "dup-b.html"
    assert [m["url"] for m in cluster["members"]] == [BASE + "dup-b.html", BASE + "dup-a.html", BASE + "mirror/dup-c.html"]
    assert [m["inlinks"] for m in cluster["members"]] == [4, 1, 0]
    assert [m["canonical"] for m in cluster["members"]] == [True, False, False]


def test_link_votes_break_a_tie_between_equally_relevant_pages(client, want):
    hits = client.get("/search", params={"q": "quokka"}).json()["results"]
    assert [h["url"] for h in hits] == [BASE + "popular.html", BASE + "lonely.html"]
    assert hits[0]["inlinks"] == 7 and hits[1]["inlinks"] == 0
    # Seven pages link to it, but six of them with the same anchor from one site: two votes.
    assert want["votes"][BASE + "popular.html"] == 2
    assert hits[0]["score"] / hits[1]["score"] == pytest.approx(reference_scoring.prior(2))


def test_all_words_first_then_the_pages_with_some(client):
    body = client.get("/search", params={"q": "walrus marmot"}).json()
    assert body["results"][0]["url"] == BASE + "walrus.html" and body["results"][0]["all_terms"]
    assert sorted(body["results"][0]["matched_terms"]) == ["marmot", "walrus"]
    assert body["all_terms_total"] == 1
    assert body["total"] == body["doc_freq"]["marmot"] > 5  # walrus adds no page of its own
    assert all(h["matched_terms"] == ["marmot"] and not h["all_terms"] for h in body["results"][1:])


def test_anchor_text_of_incoming_links_is_searchable(client):
    # The pages filler pages link to with "see also" say neither word themselves.
    targets = {BASE + "popular.html", BASE + "dup-b.html", BASE + "espresso.html"}
    body = client.get("/search", params={"q": "see also", "size": 50}).json()
    found = {h["url"]: h for h in body["results"]}
    assert targets <= found.keys() and all(found[url]["all_terms"] for url in targets)
    # Phrases are matched on the text: the linking pages say "see also", the targets do not.
    body = client.get("/search", params={"q": '"see also"', "size": 50}).json()
    assert body["total"] > 0 and not targets & {h["url"] for h in body["results"]}


@pytest.mark.parametrize("q, urls", [
    ('"rottnest island"', {"popular.html", "lonely.html"}),
    ('"island rottnest"', set()),
    ('"spice island" notes', {"dup-b.html"}),
    ("quokka -plenty", {"lonely.html"}),
    ("quokka site:web.test", {"popular.html", "lonely.html"}),
    ("quokka site:WEB.test", {"popular.html", "lonely.html"}),
    ("quokka site:other.test", set()),
])
def test_phrases_exclusions_and_sites(client, q, urls):
    body = client.get("/search", params={"q": q}).json()
    assert {h["url"] for h in body["results"]} == {BASE + u for u in urls}
    assert body["total"] == body["all_terms_total"] == len(urls)


@pytest.mark.parametrize("q", ["marmot", "island", "quokka smiles", "oak moss reed", "spice notes island"])
def test_ranking_equals_a_from_scratch_bm25f(client, want, q):
    expected = expected_ranking(want, tokenize(q))
    body = client.get("/search", params={"q": q, "size": 50}).json()
    assert body["total"] == len(expected)
    got = [(h["url"], h["score"]) for h in body["results"]]
    assert [u for u, _ in got] == [u for u, _ in expected[:50]]
    for (_, score), (_, want_score) in zip(got, expected):
        assert score == pytest.approx(want_score, abs=1e-5)


def test_pages_partition_the_results(client):
    full = client.get("/search", params={"q": "marmot oak", "size": 50}).json()
    assert full["total"] > 6
    paged = []
    for p in range(1, 4):
        body = client.get("/search", params={"q": "marmot oak", "size": 3, "page": p}).json()
        assert body["page"] == p and body["size"] == 3
        paged += body["results"]
    assert [h["url"] for h in paged] == [h["url"] for h in full["results"][:9]]
    assert [h["rank"] for h in paged] == list(range(1, 10))
    beyond = client.get("/search", params={"q": "marmot oak", "page": 100}).json()
    assert beyond["results"] == [] and beyond["total"] == full["total"]


def test_snippets_escape_the_document_text(client):
    hit = client.get("/search", params={"q": "xylophone"}).json()["results"][0]
    assert hit["url"] == BASE + "escape.html"
    assert "&lt;script&gt;" in hit["snippet"] and "<script" not in hit["snippet"]
    assert hit["snippet"].count("<mark>xylophone</mark>") == 2
    assert hit["title"] == "Markup <b> in text"  # JSON carries text; the page escapes it


def test_unknown_words_and_gone_pages_find_nothing(client):
    assert client.get("/search", params={"q": "nonexistentword"}).json()["total"] == 0
    assert client.get("/search", params={"q": "nothing"}).json()["total"] == 0  # gone.html's word


@pytest.mark.parametrize("params, status, fragment", [
    ({}, 422, "q"),
    ({"q": ""}, 422, "q"),
    ({"q": "x" * 257}, 422, "q"),
    ({"q": "   "}, 400, "empty"),
    ({"q": "!!! ???"}, 400, "no searchable words"),
    ({"q": " ".join(f"w{i}" for i in range(17))}, 400, "too many"),
    ({"q": '"rottnest island'}, 400, "unbalanced quote"),
    ({"q": 'quokka ""'}, 400, "quoted phrase has no searchable words"),
    ({"q": "quokka site:"}, 400, "site: needs a host"),
    ({"q": "-espresso"}, 400, "nothing to search for"),
    ({"q": "espresso -espresso"}, 400, "both searched for and excluded"),
    ({"q": 'quokka -"rottnest island"'}, 400, "exclude single words"),
    ({"q": "espresso", "page": 0}, 422, "page"),
    ({"q": "espresso", "page": 101}, 422, "page"),
    ({"q": "espresso", "size": 51}, 422, "size"),
    ({"q": "espresso", "size": 0}, 422, "size"),
    ({"q": "espresso", "page": "two"}, 422, "page"),
])
def test_bad_search_input_gets_a_clear_client_error(client, params, status, fragment):
    r = client.get("/search", params=params)
    assert r.status_code == status, r.text
    detail = r.json()["detail"]
    text = detail if isinstance(detail, str) else json.dumps(detail)
    assert fragment in text
    assert "Traceback" not in r.text


# -- /documents ------------------------------------------------------------------------------

def test_a_document_with_its_metadata_inlinks_and_outlinks(client):
    doc = client.get("/documents", params={"url": BASE + "espresso.html"}).json()
    assert doc["title"] == "All about espresso"
    assert doc["fetched_at"] == 1_700_000_000.0 and doc["status"] == 200
    assert len(doc["content_hash"]) == 32 and doc["indexed"] and doc["is_canonical"]
    assert doc["canonical_url"] == BASE + "espresso.html" and doc["duplicates"] == []
    assert doc["inlinks"] == [{"source": BASE + "f11.html", "anchor": "see also"}]
    assert doc["outlinks"] == [{"target": BASE + "popular.html", "anchor": "a popular page"}]


def test_a_duplicate_names_its_canonical(client):
    doc = client.get("/documents", params={"url": BASE + "mirror/dup-c.html"}).json()
    assert not doc["indexed"] and not doc["is_canonical"]
    assert doc["canonical_url"] == BASE + "dup-b.html"
    assert doc["duplicates"] == [{"url": BASE + "dup-b.html", "inlinks": 4, "exact": True},
                                 {"url": BASE + "dup-a.html", "inlinks": 1, "exact": True}]
    assert doc["cluster_size"] == 3


def test_a_url_is_normalized_before_the_lookup(client):
    doc = client.get("/documents", params={"url": "HTTP://WEB.test:80/espresso.html#top"}).json()
    assert doc["url"] == BASE + "espresso.html"


def test_a_gone_page_is_known_but_no_document(client):
    doc = client.get("/documents", params={"url": BASE + "gone.html"}).json()
    assert doc["status"] == 404 and doc["content_hash"] is None and not doc["indexed"]


@pytest.mark.parametrize("url", [BASE + "never-crawled.html", "not a url", "http://elsewhere.test/"])
def test_unknown_urls_get_404(client, url):
    r = client.get("/documents", params={"url": url})
    assert r.status_code == 404 and "no crawled page" in r.json()["detail"]
    assert client.get("/dups", params={"url": url}).status_code == 404


# -- /dups -----------------------------------------------------------------------------------

def test_the_cluster_of_a_url(client):
    by_url = client.get("/dups", params={"url": BASE + "dup-a.html"}).json()
    assert by_url["canonical_url"] == BASE + "dup-b.html" and by_url["size"] == 3
    assert client.get(f"/dups/{by_url['fingerprint']}").json() == by_url


@pytest.mark.parametrize("fp, status", [("0" * 32, 404), ("XYZ", 422), ("A" * 32, 422), ("0" * 33, 422)])
def test_unknown_or_malformed_fingerprints(client, fp, status):
    assert client.get(f"/dups/{fp}").status_code == status


# -- /stats, /healthz, /docs -----------------------------------------------------------------

def test_stats_count_documents_clusters_and_terms(client, indexed, want):
    reader = client.app.state.connections.reader(indexed)
    reader.refresh_slow()
    stats = client.get("/stats").json()
    assert stats["documents"] == len(want["docs"])
    assert stats["average_length"] == pytest.approx(sum(want["docs"].values()) / len(want["docs"]), abs=1e-3)
    assert stats["clusters"] == len(want["dups"])
    assert stats["clustered_pages"] == sum(len(m) for _, m in want["dups"].values())
    assert stats["terms"] == len(want["postings"])
    assert stats["pending_notifications"]["count"] == 0
    assert 0 <= stats["freshness"]["age_s"] < 3600
    before = stats["search_cache"]
    client.get("/search", params={"q": "espresso marmot"})
    after = client.get("/stats").json()["search_cache"]
    assert after["terms"] >= 2 and after["postings"] >= 1
    assert sum(after[k] for k in ("hits", "change_reads", "whole_reads")) == \
        sum(before[k] for k in ("hits", "change_reads", "whole_reads")) + 2
    # The same query again: its ranked answer is reused, and /stats says so.
    client.get("/search", params={"q": "espresso marmot"})
    again = client.get("/stats").json()["search_cache"]
    assert again["ranked_hits"] == after["ranked_hits"] + 1 and again["ranked_held"] >= 1


def test_healthz_reports_each_dependency(client):
    r = client.get("/healthz")
    assert r.status_code == 200, r.text
    assert r.json()["ok"] and set(r.json()["checks"]) == {"hbase", "oracle"}


def test_healthz_names_what_is_down(indexed):
    class DeadOracle:
        def get_timestamp(self):
            raise OSError("connection refused")

        def status(self):
            raise ConnectionRefusedError(111, "connection refused")

    class Wrapped:  # the indexed cluster, but with an unreachable oracle
        def __init__(self, inner):
            self._inner = inner
            self.oracle = DeadOracle()

        def __getattr__(self, name):
            return getattr(self._inner, name)

    app = create_app(SearchSettings(stats_refresh_s=3600, health_timeout_s=2))
    broken = Wrapped(indexed)
    app.dependency_overrides[get_cluster] = lambda: broken
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/healthz")
        assert r.status_code == 503
        checks = r.json()["checks"]
        assert checks["hbase"]["ok"] and not checks["oracle"]["ok"]
        assert "ConnectionRefusedError" in checks["oracle"]["detail"]


@pytest.mark.parametrize("how", ["fails", "hangs"])
def test_without_hbase_the_service_starts_and_healthz_says_so(how):
    """HBase down at start-up: connecting fails (or takes a minute to); nothing hangs."""
    release = threading.Event()

    def connect_to_nothing():
        if how == "hangs":
            release.wait(30)
        raise ConnectionRefusedError(111, "Connection refused: 127.0.0.1:9090")

    app = create_app(SearchSettings(connect_wait_s=0.5), connect=connect_to_nothing)
    started = time.monotonic()
    try:
        with TestClient(app, raise_server_exceptions=False) as c:
            r = c.get("/healthz")
            assert r.status_code == 503
            hbase = r.json()["checks"]["hbase"]
            assert not hbase["ok"]
            assert ("Connection refused" in hbase["detail"]) if how == "fails" else ("still connecting" in hbase["detail"])
            r = c.get("/search", params={"q": "espresso"})
            assert r.status_code == 503 and "/healthz" in r.json()["detail"] and "Traceback" not in r.text
    finally:
        release.set()
    assert time.monotonic() - started < 10


def test_unexpected_errors_reach_clients_without_a_trace(indexed):
    app = create_app(SearchSettings(stats_refresh_s=3600))
    app.dependency_overrides[get_cluster] = lambda: indexed
    with TestClient(app, raise_server_exceptions=False) as c:
        reader = c.app.state.connections.reader(indexed)
        original = reader.search
        reader.search = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("secret internals"))
        try:
            r = c.get("/search", params={"q": "espresso"})
        finally:
            reader.search = original
    assert r.status_code == 500
    assert r.json()["detail"] == "internal error" and r.json()["error_id"]
    assert "secret" not in r.text and "Traceback" not in r.text


def test_openapi_documents_the_endpoints_and_the_formula(client):
    spec = client.get("/openapi.json").json()
    assert {"/search", "/documents", "/dups/{fingerprint}", "/dups", "/stats", "/healthz"} <= set(spec["paths"])
    assert "BM25" in spec["paths"]["/search"]["get"]["description"]
    assert client.get("/docs").status_code == 200


def test_no_endpoint_writes(client, indexed):
    """Every table's newest cell timestamp is unchanged by a round of every endpoint."""
    store = indexed.store

    def newest():
        out = {}
        for table in store.list_tables():
            if table == "owners":  # the client's liveness heartbeat, not index data
                continue
            cells = [c.ts for row in store.scan(table, batch_size=1024) for c in row]
            out[table] = (len(cells), max(cells, default=0))
        return out

    before = newest()
    for path, params in [("/search", {"q": "zanzibar marmot"}), ("/documents", {"url": BASE + "dup-a.html"}),
                         ("/dups", {"url": BASE + "dup-a.html"}), ("/stats", {}), ("/healthz", {}),
                         ("/", {"q": "quokka"})]:
        assert client.get(path, params=params).status_code == 200
    assert newest() == before


# -- the HTML pages (rendering; the browser test drives them for real) -----------------------

def test_the_search_page_renders_results_and_links(client):
    r = client.get("/", params={"q": "zanzibar"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "/page/document?url=http%3A%2F%2Fweb.test%2Fdup-b.html" in r.text
    assert "2 similar pages" in r.text and "<mark>zanzibar</mark>" in r.text.lower()
    assert client.get("/", params={"q": "   "}).status_code == 400
    escaped = client.get("/", params={"q": "xylophone"}).text
    assert "Markup &lt;b&gt; in text" in escaped and "<script>alert" not in escaped


def test_detail_pages(client):
    doc = client.get("/page/document", params={"url": BASE + "dup-a.html"})
    assert doc.status_code == 200 and "dup-b.html" in doc.text
    fp = client.get("/dups", params={"url": BASE + "dup-a.html"}).json()["fingerprint"]
    assert client.get(f"/page/dups/{fp}").status_code == 200
    assert client.get("/page/document", params={"url": BASE + "nope.html"}).status_code == 404
    assert client.get("/page/dups/" + "0" * 32).status_code == 404
