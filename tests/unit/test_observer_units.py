"""Each observer of the indexing chain on its own, on the in-memory cluster: its inputs written
by hand, one run called directly in a transaction (no worker), its outputs read back.

The chain as a whole runs in tests/test_observer_map.py (in memory) and tests/test_api.py
(on HBase); these pin what each step does with its own row.
"""

from __future__ import annotations

import pytest

from caffeine.index import normalize_url
from caffeine.index.schema import (
    CLUSTER_STATE,
    DOC_ANCHORS,
    DOC_DIRECTIVES,
    DOC_FINGERPRINT,
    DOC_OUTLINKS,
    DOC_PARSED,
    DOCSTATS,
    DOCSTATS_FAMILY,
    DUPS,
    EXPORT_STATE,
    INLINKS,
    INLINKS_NOTIFY,
    PAGE_META,
    POSTINGS,
    POSTINGS_FAMILY,
    REPOSITORY,
    S_DONE,
    S_TITLE,
    decode_anchors,
    decode_cluster_state,
    decode_declared,
    decode_document,
    decode_export_state,
    decode_inlinks,
    decode_members,
    decode_outlinks,
    encode_cluster_state,
)
from caffeine.observers import document, dup_clusters, export
from caffeine.observers.app import application
from caffeine.percolator.serving import TOMBSTONE
from caffeine.percolator.testing import memory_cluster
from support.search_web import feed, page

BASE = "http://unit.test/"
WORDS = "quokka smiles on rottnest island while the walrus naps near a marmot burrow"


@pytest.fixture
def cluster():
    c = memory_cluster()
    application.install(c)
    yield c
    c.close()


def fetched(cluster, name: str, title: str, body: str, links=(), head: str = "", status: int = 200) -> bytes:
    """Write a page as the crawler does; its row key."""
    feed(cluster, dict([page(BASE + name, title, body, [(BASE + t, a) for t, a in links], status, head)]))
    return (BASE + name).encode()


def run(cluster, observer, row: bytes, column: str) -> None:
    cluster.run(lambda txn: observer(txn, row, column))


def read(cluster, table: str, row, columns):
    with cluster.begin() as txn:
        return txn.get_row(table, row, columns)


def test_document_parses_fingerprints_and_inverts_links(cluster):
    row = fetched(cluster, "a.html", "Quokka facts", WORDS, links=[("b.html", "walrus page")])
    run(cluster, document.observe, row, PAGE_META)
    cols = read(cluster, REPOSITORY, row, [DOC_PARSED, DOC_OUTLINKS, DOC_FINGERPRINT])
    assert decode_document(cols[DOC_PARSED])["title"] == "Quokka facts"
    assert decode_outlinks(cols[DOC_OUTLINKS]) == [[BASE + "b.html", "walrus page"]]
    assert cols[DOC_FINGERPRINT]
    with cluster.begin() as txn:
        assert decode_inlinks(txn.get_all(INLINKS, BASE + "b.html")) == {BASE + "a.html": "walrus page"}


def test_document_of_a_gone_page_has_no_fingerprint_and_takes_its_links_back(cluster):
    row = fetched(cluster, "a.html", "Quokka facts", WORDS, links=[("b.html", "walrus page")])
    run(cluster, document.observe, row, PAGE_META)
    fetched(cluster, "a.html", "Gone", "", status=404)
    run(cluster, document.observe, row, PAGE_META)
    assert read(cluster, REPOSITORY, row, [DOC_FINGERPRINT]).get(DOC_FINGERPRINT) is None
    with cluster.begin() as txn:
        assert decode_inlinks(txn.get_all(INLINKS, BASE + "b.html")) == {}


def _documents(cluster, *pages) -> list[bytes]:
    rows = [fetched(cluster, *page) for page in pages]
    for row in rows:
        run(cluster, document.observe, row, PAGE_META)
    return rows


def test_cluster_groups_exact_copies_under_one_canonical(cluster):
    a, c = _documents(cluster, ("a.html", "Quokka facts", WORDS), ("c.html", "Quokka facts", WORDS))
    for row in (a, c):
        run(cluster, dup_clusters.on_fingerprint, row, DOC_FINGERPRINT)
    states = [decode_cluster_state(read(cluster, REPOSITORY, row, [CLUSTER_STATE])[CLUSTER_STATE]) for row in (a, c)]
    assert states[0].fingerprint == states[1].fingerprint is not None
    assert sorted(s.canonical for s in states) == [False, True]
    with cluster.begin() as txn:
        members = decode_members(txn.get_all(DUPS, states[0].fingerprint))
    assert set(members) == {BASE + "a.html", BASE + "c.html"}


def test_cluster_declared_records_a_changed_canonical_declaration(cluster):
    (d,) = _documents(cluster, ("d.html", "Quokka facts", WORDS))
    run(cluster, dup_clusters.on_fingerprint, d, DOC_FINGERPRINT)
    fetched(cluster, "d.html", "Quokka facts", WORDS, head=f'<link rel="canonical" href="{BASE}a.html">')
    run(cluster, document.observe, d, PAGE_META)
    assert read(cluster, REPOSITORY, d, [DOC_DIRECTIVES]).get(DOC_DIRECTIVES)
    run(cluster, dup_clusters.on_directives, d, DOC_DIRECTIVES)
    fp = decode_cluster_state(read(cluster, REPOSITORY, d, [CLUSTER_STATE])[CLUSTER_STATE]).fingerprint
    with cluster.begin() as txn:
        assert decode_declared(txn.get_all(DUPS, fp)) == {BASE + "d.html": normalize_url(BASE + "a.html")}


def test_inlinks_counts_links_and_writes_anchor_text(cluster):
    rows = _documents(cluster, ("b.html", "Walrus notes", "walrus tusks " + WORDS),
                      ("f1.html", "Fan", "fan one", [("b.html", "tusk heaven")]),
                      ("f2.html", "Fan two", "fan two words", [("b.html", "walrus home")]))
    b = rows[0]
    run(cluster, dup_clusters.on_fingerprint, b, DOC_FINGERPRINT)
    run(cluster, dup_clusters.on_inlinks, b, INLINKS_NOTIFY)
    anchors = decode_anchors(read(cluster, REPOSITORY, b, [DOC_ANCHORS])[DOC_ANCHORS])
    assert sorted(text for _, text in anchors) == ["tusk heaven", "walrus home"]
    fp = decode_cluster_state(read(cluster, REPOSITORY, b, [CLUSTER_STATE])[CLUSTER_STATE]).fingerprint
    with cluster.begin() as txn:
        assert decode_members(txn.get_all(DUPS, fp)) == {BASE + "b.html": 2}


def test_export_indexes_a_canonical_page_and_removes_it_when_it_stops_being_one(cluster):
    (a,) = _documents(cluster, ("a.html", "Quokka facts", WORDS))
    run(cluster, dup_clusters.on_fingerprint, a, DOC_FINGERPRINT)
    run(cluster, export.observe, a, CLUSTER_STATE)
    state = decode_export_state(read(cluster, REPOSITORY, a, [EXPORT_STATE])[EXPORT_STATE])
    assert {"quokka", "walrus", "facts"} <= set(state["terms"])
    postings = cluster.serving(POSTINGS, [POSTINGS_FAMILY], create=False)
    docstats = cluster.serving(DOCSTATS, [DOCSTATS_FAMILY], create=False)
    assert set(postings.get(b"quokka")) == {f"{POSTINGS_FAMILY}:{BASE}a.html"}
    stats = docstats.get(a)
    assert stats[S_TITLE] == b"Quokka facts" and int(stats[S_DONE]) == state["seq"]
    # No longer canonical: the next export takes its postings out.
    fp = decode_cluster_state(read(cluster, REPOSITORY, a, [CLUSTER_STATE])[CLUSTER_STATE]).fingerprint
    cluster.run(lambda txn: txn.set(REPOSITORY, a, CLUSTER_STATE, encode_cluster_state(fp, canonical=False)))
    run(cluster, export.observe, a, CLUSTER_STATE)
    state = decode_export_state(read(cluster, REPOSITORY, a, [EXPORT_STATE])[EXPORT_STATE])
    assert state["terms"] == [] and "quokka" in state["removed"]
    assert all(value == TOMBSTONE for value in postings.get(b"quokka").values())
    assert docstats.get(a).get(S_TITLE, TOMBSTONE) == TOMBSTONE
