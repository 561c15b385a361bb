"""The batch job's transforms on a local Spark session (no HBase): small and fast.

``build_index`` over an RDD of pages must equal ``reference_index.reference`` (an independent
from-scratch computation of the dups table and the inverted index) and the link inversion
docs/INDEXING.md describes; its postings and impacts must be what the export observer's plan
(``export.plan_export``) writes for the same documents; the pure helpers are checked one by one.
"""

from __future__ import annotations

import json
import random

import pytest

from caffeine.index import fingerprint
from caffeine.index.impacts import split_impact_qualifier
from caffeine.index.documents import anchors_value
from caffeine.observers.export import plan_export
from support.reference_index import reference
from spark.transforms import (
    IMPACT_PREFIX,
    POSTING_PREFIX,
    Document,
    build_index,
    effective_version,
    index_cells,
    key_ranges,
    link_pairs,
    page_document,
    split_points,
)

WORDS = "red green blue cyan magenta yellow black white grey olive navy teal".split()
BASE = "http://batch.test/"


@pytest.fixture(scope="session")
def spark_session():
    from spark.job import spark_session as make

    session = make("local[2]", "caffeine-tests", {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    yield session
    session.stop()


def meta(url, status=200, content_type="text/html; charset=utf-8", error=None):
    return {"url": url, "status": status, "content_type": content_type, "fetched_at": 1.0,
            "final_url": url, "error": error, "truncated": False, "bytes": 0}


def small_web(n=24, seed=3) -> dict[str, tuple[dict, bytes]]:
    """Pages with duplicates, dangling links, links without text, self-links, empty titles,
    a non-HTML page and a 404."""
    rng = random.Random(seed)
    pages = {}
    for i in range(n):
        url = f"{BASE}{i}"
        links = [f"{BASE}{rng.randrange(n + 6)}" for _ in range(rng.randrange(0, 4))]
        if i == 1:
            links.append("http://elsewhere.test/")
        anchors = "".join(f'<a href="{l}">{"" if j % 2 else "see " + l[-2:]}</a>' for j, l in enumerate(links))
        title = "" if i % 5 == 0 else f"<title>T{i}</title>"
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(3, 20)))
        html = f"<html><head>{title}</head><body><p>{body}</p>{anchors}<a href='{url}'>me</a></body></html>"
        if i % 6 == 4:
            html = pages[f"{BASE}{i - 1}"][1].decode()  # exact duplicate of the previous page
        pages[url] = (meta(url), html.encode())
    pages[f"{BASE}{n}"] = (meta(f"{BASE}{n}", content_type="application/pdf"), b"%PDF")
    pages[f"{BASE}{n + 1}"] = (meta(f"{BASE}{n + 1}", status=404), b"gone")
    return pages


def collect(result, sc) -> dict:
    tables = {name: {} for name in result.tables()}
    for name, (row, cells) in result.tagged(sc).collect():
        assert row not in tables[name], f"{name}: row {row} twice"
        tables[name][row] = cells
    return tables


def as_reference_shape(tables: dict) -> dict:
    dups = {}
    for fp, cells in tables["dups"].items():
        members = {c[len("member:"):]: int(v) for c, v in cells.items() if c.startswith("member:")}
        dups[fp] = (cells["canonical-url"].decode(), members)
    postings = {term: {c[len("p:"):]: v for c, v in cells.items()} for term, cells in tables["postings"].items()}
    docs = {url: int(cells["s:length"]) for url, cells in tables["docstats"].items() if "s:length" in cells}
    return {"dups": dups, "postings": postings, "docs": docs}


def export_writes(url: str, record: dict, fp: str, anchors: bytes) -> dict:
    """The postings and impacts rows a first export of a canonical document writes."""
    _, rows, impact_rows, _ = plan_export(url, record, fp, None, 0, 1, json.loads(anchors))
    return {"postings": rows, "impacts": impact_rows}


def merge_rows(into: dict, rows: dict) -> None:
    for row, cells in rows.items():
        into.setdefault(row, {}).update(cells)


def test_index_cells_are_the_export_observers_postings_and_impacts():
    pages = small_web()
    docs = [d for d in (page_document(u, m, c) for u, (m, c) in sorted(pages.items())) if d is not None]
    inlinks = {}
    for doc in docs:
        for target, (source, anchor) in link_pairs(doc):
            inlinks.setdefault(target, {})[f"in:{source}"] = anchor.encode()
    levels, voted = set(), 0
    for doc in docs:
        anchors = anchors_value(inlinks.get(doc.url, {}))
        voted += anchors != anchors_value({})
        got = {"postings": {}, "impacts": {}}
        for term, (column, value) in index_cells(doc, anchors):
            table = "postings" if column.startswith(POSTING_PREFIX) else "impacts"
            assert column not in got[table].get(term, {}), f"{table}[{term}] {column} twice"
            got[table].setdefault(term, {})[column] = value
        assert got == export_writes(doc.url, doc.record, doc.fingerprint, anchors)
        assert got["postings"].keys() == got["impacts"].keys()
        for cells in got["impacts"].values():
            (column,) = cells
            level, url = split_impact_qualifier(column[len(IMPACT_PREFIX):])
            assert url == doc.url
            levels.add(level)
    assert voted and len(levels) > 10, "documents with anchor text, postings at many levels"


def test_build_index_writes_the_exports_impacts(spark_session):
    pages = small_web()
    rdd = spark_session.sparkContext.parallelize([(u, m, c) for u, (m, c) in pages.items()], 3)
    tables = collect(build_index(rdd, 2, persist=lambda r: r.cache()), spark_session.sparkContext)
    want = {"postings": {}, "impacts": {}}
    for url, cells in tables["documents"].items():
        if cells["cluster:state"].startswith(b"1 "):
            written = export_writes(url, json.loads(cells["doc:parsed"]), cells["doc:fingerprint"].decode(),
                                    cells["doc:anchors"])
            for table, rows in written.items():
                merge_rows(want[table], rows)
    assert tables["postings"] == want["postings"]
    assert tables["impacts"] == want["impacts"]
    assert any(len(cells) > 1 for cells in tables["impacts"].values()), "terms in several documents"


def test_key_ranges_cover_the_key_space_without_gaps():
    keys = sorted(f"k{i:03d}".encode() for i in range(10))
    points = split_points(keys, 4)
    assert points == [b"k002", b"k005", b"k007"]
    ranges = key_ranges(points)
    assert ranges[0][0] == b"" and ranges[-1][1] is None
    assert all(ranges[i][1] == ranges[i + 1][0] for i in range(len(ranges) - 1))
    assert key_ranges(split_points([], 4)) == [(b"", None)]
    assert key_ranges(split_points([b"a", b"a", b"a"], 3)) == [(b"", b"a"), (b"a", None)]


def test_effective_version_skips_fetches_that_keep_the_last_good_one():
    good, error, gone = meta("u"), meta("u", status=503, error="server error"), meta("u", status=404)
    assert effective_version([(error, b""), (good, b"<p>x</p>")]) == (good, b"<p>x</p>")
    assert effective_version([(error, b""), (gone, b""), (good, b"<p>x</p>")]) == (gone, b"")
    assert effective_version([(error, b""), (None, None)]) is None

    def lazy():
        yield good, b"new"
        raise AssertionError("older versions are not read once a good one is found")

    assert effective_version(lazy()) == (good, b"new")


def test_page_document_follows_the_fetch_outcome_rule():
    url = f"{BASE}x"
    doc = page_document(url, meta(url), b"<title>A</title><p>Hello world</p><p><a href='/y'>Y</a></p><a href='x'>self</a>")
    assert isinstance(doc, Document)
    assert json.loads(doc.parsed) == {"title": "A", "text": "A Hello world Y self", "canonical": None, "length": 5}
    assert doc.outlinks == [[f"{BASE}y", "Y"]]  # the self-link is no inlink
    # The title, the text and the main region (none here), as caffeine.index.documents hashes them.
    assert doc.fingerprint == fingerprint("A\x00A Hello world Y self\x00", normalized=True)
    assert link_pairs(doc) == [(f"{BASE}y", (url, "Y"))]
    assert page_document(url, meta(url, content_type="image/png"), b"png") is None
    assert page_document(url, meta(url, status=410), b"") is None
    assert page_document(url, None, None) is None


def test_build_index_equals_the_from_scratch_reference(spark_session):
    pages = small_web()
    rdd = spark_session.sparkContext.parallelize([(u, m, c) for u, (m, c) in pages.items()], 3)
    tables = collect(build_index(rdd, 2, persist=lambda r: r.cache()), spark_session.sparkContext)
    want = reference(pages)
    assert any(len(members) > 1 for _, members in want["dups"].values()), "the web has duplicates"
    got = as_reference_shape(tables)
    assert got["dups"] == want["dups"]
    assert got["docs"] == want["docs"]
    assert got["postings"] == want["postings"]

    # Link inversion: one in:<source> per (target, source), crawled target or not.
    parsed = want["parsed"]
    docs = {u: page_document(u, *pages[u]) for u in parsed}
    expected_inlinks = {}
    for url, doc in docs.items():
        for target, anchor in doc.outlinks:
            expected_inlinks.setdefault(target, {})[f"in:{url}"] = anchor.encode()
    assert tables["inlinks"] == expected_inlinks
    assert any(anchor == b"" for cells in expected_inlinks.values() for anchor in cells.values())
    assert set(expected_inlinks) - set(pages), "some links dangle"

    # Documents: what the document and cluster observers leave in repository.
    assert set(tables["documents"]) == set(parsed)
    for url, cells in tables["documents"].items():
        fp = docs[url].fingerprint
        canonical = want["dups"][fp][0] == url
        assert cells["doc:fingerprint"] == fp.encode()
        assert cells["cluster:state"] == f"{1 if canonical else 0} {fp}".encode()
        assert json.loads(cells["doc:parsed"])["text"] == parsed[url].text
        assert ("doc:outlinks" in cells) == bool(docs[url].outlinks)

    # docstats: inlink counts of documents, export columns for canonical documents.
    for url in parsed:
        count = len(expected_inlinks.get(url, ()))
        assert tables["docstats"].get(url, {}).get("s:inlinks") == (str(count).encode() if count else None)
    assert set(tables["docstats"]) <= set(parsed)
    untitled = [u for u in want["docs"] if not parsed[u].title]
    assert untitled and all("s:title" not in tables["docstats"][u] for u in untitled)


def test_canonical_rule_most_inlinks_then_shortest_then_smallest(spark_session):
    html = b"<p>same text everywhere</p>"

    def page(url, links=()):
        body = html if not links else b"<p>linker %s</p>" % url.encode() + b"".join(b"<a href='%s'>x</a>" % l.encode() for l in links)
        return url, meta(url), body

    a, b, c = "http://d.test/aaaa", "http://d.test/bb", "http://d.test/cc"
    rows = [page(a), page(b), page(c), page("http://d.test/l1", [a]), page("http://d.test/l2", [a, c])]
    sc = spark_session.sparkContext
    dups = dict(build_index(sc.parallelize(rows, 2), 2).dups.collect())
    fp = fingerprint("\x00same text everywhere\x00", normalized=True)  # no title, no main region
    assert dups[fp]["canonical-url"] == a.encode()  # 2 inlinks beat 1 and 0
    rows = [page(a), page(b), page(c)]
    dups = dict(build_index(sc.parallelize(rows, 2), 2).dups.collect())
    assert dups[fp]["canonical-url"] == b.encode()  # all 0: shortest, then smallest


def test_stage_progress_reports_finished_tasks_while_a_job_runs(spark_session):
    import time

    from spark.progress import StageProgress

    lines = []
    with StageProgress(spark_session.sparkContext, lines.append, every_s=0.1):
        spark_session.sparkContext.parallelize(range(8), 8).map(lambda x: time.sleep(0.4) or x).collect()
    assert lines, "no progress while an 8-task job ran for about 2 s"
    figures = [tuple(map(int, line.split()[1].split("/"))) for line in lines]
    assert all(total == 8 and 0 <= done <= 8 for done, total in figures), lines
    assert [done for done, _ in figures] == sorted(done for done, _ in figures)
