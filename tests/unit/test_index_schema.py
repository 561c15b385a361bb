"""The data contract's codecs (caffeine.index.schema): byte-exact values and their edge cases.

Each stored value is pinned as bytes (what the observers, the Spark job and the crawler have
always written: observers compare stored bytes to decide whether anything changed), and each
decoder's answer for a missing cell, an empty value (a serving table's tombstone) and a
malformed one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import caffeine.index.schema as schema
from caffeine.index.documents import anchors_value, derive, docstats_cells
from caffeine.index.schema import (
    ClusterState,
    DocStats,
    decode_anchors,
    decode_cluster_state,
    decode_docstats,
    decode_document,
    decode_export_state,
    decode_fingerprint,
    decode_int,
    decode_outlinks,
    decode_page_meta,
    encode_anchors,
    encode_cluster_state,
    encode_docstats,
    encode_document,
    encode_export_state,
    encode_int,
    encode_outlinks,
    encode_page_meta,
    is_canonical,
)


def test_the_schema_module_is_pure():
    """Standard library only: no I/O layer, no caffeine.percolator (it is shared by every layer)."""
    tree = ast.parse(Path(schema.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= {"__future__", "json", "dataclasses"}


def test_page_meta_is_compact_sorted_json():
    record = {"url": "http://h/ü", "status": 200, "error": None, "fetched_at": 1.5}
    assert encode_page_meta(record) == '{"error":null,"fetched_at":1.5,"status":200,"url":"http://h/\\u00fc"}'
    assert decode_page_meta(encode_page_meta(record).encode()) == record
    assert decode_page_meta(None) is None and decode_page_meta(b"") is None
    assert decode_page_meta(None, {}) == {}
    with pytest.raises(ValueError):
        decode_page_meta(b"{not json")


def test_document_is_sorted_json_with_raw_unicode():
    record = {"title": "Ü", "text": "a b", "canonical": None, "length": 2}
    assert encode_document(record) == '{"canonical": null, "length": 2, "text": "a b", "title": "Ü"}'.encode()
    assert decode_document(encode_document(record)) == record
    assert decode_document(None) is None and decode_document(b"") is None
    assert decode_document(b"", {}) == {}


def test_outlinks_none_for_no_links():
    links = [["http://a/", "x ü"], ["http://b/", ""]]
    assert encode_outlinks(links) == '[["http://a/", "x ü"], ["http://b/", ""]]'.encode()
    assert encode_outlinks([]) is None
    assert decode_outlinks(encode_outlinks(links)) == links
    assert decode_outlinks(None) == [] and decode_outlinks(b"") == []


def test_anchors_keep_the_empty_list():
    assert encode_anchors([]) == b"[]"
    assert encode_anchors([["h", "ü"]]) == '[["h", "ü"]]'.encode()
    assert decode_anchors(b"[]") == [] and decode_anchors(None) == [] and decode_anchors(b"") == []
    assert anchors_value({}) == b"[]"
    assert anchors_value({"in:http://s.test/a": b"Read more", "other": b"x"}) == b'[["s.test", "read more"]]'


def test_fingerprint():
    assert decode_fingerprint(b"ab12") == "ab12"
    assert decode_fingerprint(None) is None and decode_fingerprint(b"") is None


@pytest.mark.parametrize("fp, canonical, stored", [
    ("ab", True, "1 ab"),
    ("ab", False, "0 ab"),
    (None, False, "0 -"),
    (None, True, "0 -"),
])
def test_cluster_state_encoding(fp, canonical, stored):
    assert encode_cluster_state(fp, canonical) == stored


@pytest.mark.parametrize("value, state", [
    (b"1 ab", ClusterState("ab", True)),
    (b"0 ab", ClusterState("ab", False)),
    (b"0 -", ClusterState(None, False)),
    (None, ClusterState(None, False)),
    (b"", ClusterState(None, False)),
    (b"1 a b", ClusterState("a b", True)),    # everything after the first space
    (b"1", ClusterState(None, False)),        # no writer produces these: no cluster
    (b"x", ClusterState(None, False)),
])
def test_cluster_state_decoding(value, state):
    assert decode_cluster_state(value) == state
    assert is_canonical(value) is state.canonical


def test_is_canonical_takes_bytes_or_str():
    assert is_canonical("1 ab") and is_canonical(b"1 ab")
    assert not is_canonical("0 ab") and not is_canonical(None) and not is_canonical("")


def test_export_state_keeps_key_order_and_raw_unicode():
    state = {"seq": 7, "terms": ["ü"], "removed": [], "inputs": "d"}
    assert encode_export_state(state) == '{"seq": 7, "terms": ["ü"], "removed": [], "inputs": "d"}'
    assert decode_export_state(encode_export_state(state).encode()) == state
    assert decode_export_state(None) is None and decode_export_state(b"") is None


def test_decimals():
    assert encode_int(12) == "12"
    assert decode_int(b"12") == 12 and decode_int(None) == 0 and decode_int(b"") == 0
    with pytest.raises(ValueError):
        decode_int(b"x")


def test_docstats_cells_in_the_export_order():
    stats = DocStats(length=5, title="T", fingerprint="fp", fields=(1, 2, 3), votes=4, inlinks=9, done=8)
    assert list(encode_docstats(stats).items()) == [
        ("s:length", "5"), ("s:title", "T"), ("s:fingerprint", "fp"), ("s:fields", "1 2 3"), ("s:votes", "4"),
        ("s:impacts", "0"),
    ]


def test_docstats_round_trip_with_the_other_writers_cells():
    stats = DocStats(length=5, title="Tü", fingerprint="fp", fields=(1, 2, 3), votes=4, inlinks=9, done=8)
    cells = {c: v.encode() for c, v in encode_docstats(stats).items()}
    cells.update({"s:inlinks": encode_int(9).encode(), "s:done": encode_int(8).encode()})
    assert decode_docstats(cells) == stats


@pytest.mark.parametrize("cells, want", [
    ({}, None),
    ({"s:length": b"", "s:inlinks": b"3"}, None),                   # tombstoned: not in the index
    ({"s:length": b"5"}, DocStats(5)),
    ({"s:length": b"5", "s:fields": b"", "s:votes": b"", "s:title": b"", "s:inlinks": b""}, DocStats(5)),
    ({"s:length": b"5", "s:title": b"\xff"}, DocStats(5, title="\ufffd")),
])
def test_docstats_decoding_edge_cases(cells, want):
    assert decode_docstats(cells) == want


def test_docstats_cells_of_a_document():
    doc = {"title": None, "text": "x", "canonical": None, "length": 1}
    assert docstats_cells("http://h/a/b.html", doc, None, None) == {
        "s:length": "1", "s:title": "", "s:fingerprint": "", "s:fields": "0 0 2", "s:votes": "0", "s:impacts": "3",
    }


def test_derive_stores_the_document_as_encoded():
    html = b"<html><head><title>T</title></head><body>Hello <a href='/b'>next</a></body></html>"
    parsed, outlinks, fp, _, _ = derive("http://h/a", {"content_type": "text/html"}, html)
    assert decode_document(parsed)["title"] == "T"
    assert encode_document(decode_document(parsed)) == parsed
    assert outlinks == [["http://h/b", "next"]]
    assert len(fp) > 0
