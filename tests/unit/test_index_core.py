"""The pure indexing core (caffeine.index): URLs, parsing, text, postings, canonical, scoring.

No I/O: these run in milliseconds and pin the rules docs/INDEXING.md and the module
docstrings state, byte for byte where bytes are stored.
"""

from __future__ import annotations

import math
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import caffeine.index as index
from caffeine.index import (
    SIMILARITY,
    ParsedDocument,
    Posting,
    decode_posting,
    document_record,
    elect_canonical,
    encode_posting,
    fingerprint,
    normalize_text,
    normalize_url,
    outlinks_record,
    parse_html,
    postings,
    tokenize,
)

PAGE = "http://example.com/dir/page.html"


def must_parse(html: bytes | str, url: str = PAGE, content_type: str | None = "text/html") -> ParsedDocument:
    if isinstance(html, str):
        html = html.encode("utf-8")
    return parse_html(html, url, content_type)


def test_public_names_are_pinned():
    assert sorted(index.__all__) == sorted([
        "normalize_url", "ParsedDocument", "parse_html", "parse_links", "normalize_text", "tokenize", "fingerprint",
        "MAX_TOKEN_CHARS", "Posting", "postings", "encode_posting", "decode_posting", "MAX_POSITIONS",
        "elect_canonical", "Similarity", "SIMILARITY", "document_record", "outlinks_record",
        "fetch_outcome", "is_html", "posting_counts", "posting_positions", "url_words", "anchor_record", "anchor_text",
        "anchor_votes", "field_lengths", "field_postings",
    ])


# -- urls ----------------------------------------------------------------------------------


@pytest.mark.parametrize("url, want", [
    ("HTTP://Example.COM/a", "http://example.com/a"),
    ("http://example.com", "http://example.com/"),
    ("http://example.com:80/a", "http://example.com/a"),
    ("https://example.com:443/a", "https://example.com/a"),
    ("http://example.com:8080/a", "http://example.com:8080/a"),
    ("http://example.com/a#frag", "http://example.com/a"),
    ("http://example.com/a/./b/../c", "http://example.com/a/c"),
    ("http://example.com/../../a", "http://example.com/a"),
    ("http://example.com/a/..", "http://example.com/"),
    ("http://example.com/a?b=1&a=2", "http://example.com/a?b=1&a=2"),
    ("http://example.com/a?", "http://example.com/a"),
    ("http://example.com/a b/ü", "http://example.com/a%20b/%C3%BC"),
    ("http://example.com/%7e", "http://example.com/~"),
    ("http://example.com/%3f%2f", "http://example.com/%3F%2F"),
    ("http://user:secret@example.com/", "http://example.com/"),
    ("http://example.com./", "http://example.com/"),
    ("http://bücher.de/", "http://xn--bcher-kva.de/"),
    ("http://[::1]:8080/x", "http://[::1]:8080/x"),
    ("  http://example.com/a\n", "http://example.com/a"),
])
def test_normalize_url(url, want):
    assert normalize_url(url) == want


@pytest.mark.parametrize("url", [
    "javascript:alert(1)", "mailto:someone@example.com", "tel:+123", "ftp://example.com/f", "data:text/html,x",
    "http://[bad", "http://", "http:///path", "http://exa mple.com/", "http://host:99999/", "http://host:port/",
    "/relative/without/base", "", "   ", "http://[::1:2/",
])
def test_normalize_url_rejects_what_is_not_an_http_url(url):
    assert normalize_url(url) is None


@pytest.mark.parametrize("href, want", [
    ("other.html", "http://example.com/dir/other.html"),
    ("../up.html", "http://example.com/up.html"),
    ("/abs", "http://example.com/abs"),
    ("//cdn.example.org/x", "http://cdn.example.org/x"),
    ("?q=1", "http://example.com/dir/page.html?q=1"),
    ("#top", "http://example.com/dir/page.html"),
    ("HTTPS://Other.ORG", "https://other.org/"),
])
def test_normalize_url_resolves_against_a_base(href, want):
    assert normalize_url(href, PAGE) == want


def test_normalize_url_never_raises_on_junk():
    for junk in ["http://[", "http://]", "http://a:b:c", "\x00", "http://\ud800/", "http://x/\ud800", "%", "http://%zz/"]:
        normalize_url(junk)
        normalize_url("x", junk)


_url_parts = st.builds(
    lambda scheme, host, port, path, query, frag: f"{scheme}://{host}{port}{path}{query}{frag}",
    st.sampled_from(["http", "https", "HTTP", "ftp"]),
    st.one_of(st.from_regex(r"[A-Za-z0-9-]{1,10}(\.[A-Za-z]{2,5}){0,2}\.?", fullmatch=True), st.just("[::1]"),
              st.text(max_size=8)),
    st.sampled_from(["", ":80", ":443", ":8080", ":", ":99999"]),
    st.text(max_size=30).map(lambda t: "/" + t),
    st.one_of(st.just(""), st.text(max_size=15).map(lambda t: "?" + t)),
    st.one_of(st.just(""), st.text(max_size=5).map(lambda t: "#" + t)),
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(_url_parts, st.text(max_size=40)))
def test_normalize_url_is_idempotent(url):
    once = normalize_url(url)
    if once is not None:
        assert normalize_url(once) == once
        assert once.startswith(("http://", "https://"))


# -- parsing -------------------------------------------------------------------------------


def test_parse_title_text_links_and_canonical():
    doc = must_parse(
        "<html><head><title> My  Page </title><link rel='canonical' href='/canon.html'>"
        "<script>var hidden = 'scriptword';</script><style>p { color: red }</style></head>"
        "<body><h1>Head</h1><p>Hello <b>bold</b>world</p><p>next</p>"
        "<noscript>noscriptword</noscript><template>templateword</template><!-- commentword -->"
        "<a href='other.html'>Other  page</a> <a href='https://x.org/'>X</a></body></html>"
    )
    assert doc.title == "My Page"
    assert doc.text == "My Page Head Hello boldworld next Other page X"
    assert doc.links == [("http://example.com/dir/other.html", "Other page"), ("https://x.org/", "X")]
    assert doc.canonical == "http://example.com/canon.html"
    for hidden in ("scriptword", "color", "noscriptword", "templateword", "commentword"):
        assert hidden not in doc.text


def test_links_resolve_against_base_href_even_when_base_comes_later():
    doc = must_parse("<a href='a.html'>a</a><base href='http://mirror.example.net/sub/'><a href='/b'>b</a>")
    assert doc.links == [("http://mirror.example.net/sub/a.html", "a"), ("http://mirror.example.net/b", "b")]


def test_a_non_http_base_href_is_ignored():
    doc = must_parse("<base href='javascript:void(0)'><a href='a.html'>a</a>")
    assert doc.links == [("http://example.com/dir/a.html", "a")]


def test_unparseable_and_non_http_links_are_dropped_and_self_links_kept():
    doc = must_parse(
        "<a href='javascript:alert(1)'>js</a><a href='mailto:a@b.c'>mail</a><a href='http://[bad'>bad</a>"
        "<a href='tel:1'>tel</a><a href='http://exa mple.com/'>space</a><a>no href</a>"
        "<a href='page.html#top'>me</a><area href='/map' alt='m'>"
    )
    assert doc.links == [(PAGE, "me"), ("http://example.com/map", "")]


def test_a_link_inside_a_link_keeps_the_page_and_each_links_anchor():
    # An <area href> (a void element) opened inside an <a href> before any text: both
    # anchors were equal (empty) then, and releasing the inner one released the outer one.
    doc = must_parse("<title>T</title><p>Hello <a href='/x'><area href='/y'>word</a> end</p>"
                     "<a href='/z'>inner <a href='/w'>second</a></a>")
    assert doc.title == "T"
    assert doc.text == "T Hello word end inner second"
    assert doc.links == [("http://example.com/x", "word"), ("http://example.com/y", ""),
                         ("http://example.com/z", "inner"), ("http://example.com/w", "second")]


def test_malformed_html_is_parsed_as_far_as_it_goes():
    doc = must_parse(
        b"<html><head><title>Broken <b>title</title><body><p>unclosed <div><table><tr><td>cell"
        b"</i></b></span> <<>> &&&; &bogus; <a href='/x'>first</a<a href=\"/y\">second<p>after"
        b"<!-- unclosed comment"
    )
    assert doc.title == "Broken <b>title"  # a title is raw text: tags inside are text
    assert "unclosed cell <<>> &&&; &bogus; first" in doc.text
    assert [t for t, _ in doc.links] == ["http://example.com/x"]


def test_latin1_with_declared_charset():
    doc = parse_html("<p>café naïve</p>".encode("latin-1"), PAGE, "text/html; charset=ISO-8859-1")
    assert doc.text == "café naïve"
    assert doc.encoding == "windows-1252"  # browsers read latin-1 labels as windows-1252


def test_windows_1252_quotes_under_a_latin1_label():
    doc = parse_html(b"<p>\x93quoted\x94</p>", PAGE, "text/html; charset=latin1")
    assert doc.text == "\u201cquoted\u201d"


def test_meta_charset_is_used_when_the_header_has_none():
    doc = parse_html('<meta charset="windows-1252"><p>smörgås</p>'.encode("cp1252"), PAGE, "text/html")
    assert doc.text == "smörgås"
    doc = parse_html('<meta http-equiv="Content-Type" content="text/html; charset=koi8-r"><p>мир</p>'.encode("koi8-r"), PAGE, None)
    assert doc.text == "мир"


def test_header_charset_wins_over_meta_and_bom_wins_over_both():
    body = '<meta charset="koi8-r"><p>café</p>'.encode("utf-8")
    assert parse_html(body, PAGE, "text/html; charset=utf-8").text == "café"
    assert parse_html(b"\xef\xbb\xbf" + body, PAGE, "text/html; charset=koi8-r").text == "café"


def test_undeclared_non_utf8_bytes_decode_as_windows_1252_when_the_detector_is_unsure():
    # Too short for a confident guess: the WHATWG default, not UTF-8 with replacements.
    doc = parse_html("<p>smörgåsbord</p>".encode("latin-1"), PAGE, "text/html")
    assert doc.text == "smörgåsbord" and doc.encoding == "windows-1252"
    assert tokenize(doc.text) == ["smörgåsbord"]


@pytest.mark.parametrize("charset", ["no-such-charset", "base64", "rot13", "zlib", "\x00", "utf-8\"><script>"])
def test_unknown_or_non_text_charsets_are_ignored(charset):
    assert parse_html(b"<p>plain</p>", PAGE, f"text/html; charset={charset}").text == "plain"


def test_binary_content_served_as_html_does_not_raise():
    junk = os.urandom(20000) + bytes(range(256)) * 8
    doc = parse_html(junk, PAGE, "text/html")
    assert isinstance(doc.text, str)
    assert "\x00" not in doc.text
    assert all(len(t) <= 64 for t in tokenize(doc.text))


@pytest.mark.parametrize("content", [b"", b" ", b"<", b"<html>", b"\x00\x00\x00", b"<!--", b"<![CDATA[", b"</>" * 3])
def test_empty_and_degenerate_pages(content):
    doc = parse_html(content, PAGE, "text/html")
    assert doc.links == [] and doc.canonical is None
    assert doc.title == ""


def test_deeply_nested_markup_does_not_recurse():
    doc = parse_html(b"<div>" * 50000 + b"deep" + b"<a href='/z'>z</a>", PAGE, "text/html")
    assert isinstance(doc.text, str)


def test_parse_html_never_raises_on_any_bytes():
    for n in range(50):
        parse_html(os.urandom(n * 37), PAGE, "text/html; charset=utf-16")
        parse_html(os.urandom(n * 37), "not a url at all", None)


# -- text ----------------------------------------------------------------------------------


def test_normalize_text_collapses_whitespace_and_controls():
    assert normalize_text("  a\u00a0 b\n\t c\x00d\x85e  ") == "a b c d e"
    assert normalize_text("cafe\u0301") == "café"  # NFC
    assert normalize_text(normalize_text(" x  y ")) == "x y"


def test_tokenize_rules():
    assert tokenize("Hello, WORLD! it's 42 and snake_case") == ["hello", "world", "it", "s", "42", "and", "snake_case"]
    assert tokenize("Ärger ÖL straße café") == ["ärger", "öl", "straße", "café"]
    assert tokenize("cafe\u0301") == ["café"]  # decomposed input still one token
    assert tokenize("İstanbul") == ["i\u0307stanbul"]  # lowercased after matching: one token
    assert tokenize("東京 タワー") == ["東京", "タワー"]
    assert tokenize("a" * 64 + " " + "b" * 65 + " c") == ["a" * 64, "c"]  # over 64: dropped, not cut
    assert tokenize("") == [] and tokenize(" \n ") == []


def test_fingerprint_equal_for_duplicates_and_different_otherwise():
    a = must_parse("<html><head><title>T</title></head><body><p>same words here</p></body></html>")
    b = must_parse("<html><head><title>T</title></head>\n<body>\n  <div>same   words here</div></body></html>",
                   url="http://mirror.example.org/x")
    c = must_parse("<html><head><title>T</title></head><body><p>same words there</p></body></html>")
    assert fingerprint(a.text) == fingerprint(b.text)
    assert fingerprint(a.text) != fingerprint(c.text)
    assert len(fingerprint("x")) == 32 and int(fingerprint("x"), 16) >= 0
    assert fingerprint("a  b ") == fingerprint("a b")


def test_fingerprint_is_pinned():
    # MurmurHash3 x64-128, seed 0, over UTF-8, as the unsigned 128-bit value in hex.
    assert fingerprint("") == "0" * 32
    assert fingerprint("a b") == "5760c3f62570cf6e2db63eaffc6cc969"


# -- postings ------------------------------------------------------------------------------


def test_postings_count_and_positions():
    got = postings(["a", "b", "a", "c", "a"])
    assert got == {"a": Posting(3, (0, 2, 4)), "b": Posting(1, (1,)), "c": Posting(1, (3,))}


def test_postings_keep_at_most_64_positions():
    p = postings(["x"] * 100)["x"]
    assert p.tf == 100 and p.positions == tuple(range(64))


@pytest.mark.parametrize("posting, encoded", [
    (Posting(1, (0,)), b"\x01\x00"),
    (Posting(3, (0, 5, 300)), b"\x03\x00\x05\xa7\x02"),
    (Posting(200, (127, 128)), b"\xc8\x01\x7f\x01"),
    (Posting(1, (16384,)), b"\x01\x80\x80\x01"),
    (Posting(5, ()), b"\x05"),
])
def test_posting_encoding_is_pinned(posting, encoded):
    assert encode_posting(posting) == encoded
    assert decode_posting(encoded) == posting


@pytest.mark.parametrize("bad", [b"", b"\x80", b"\x01\x80", b"\x00", b"\x02\x01\x00", b"\xff" * 11])
def test_decode_posting_rejects_malformed_values(bad):
    with pytest.raises(ValueError):
        decode_posting(bad)


@pytest.mark.parametrize("args", [(0, ()), (1, (0, 1)), (2, (3, 1)), (2, (1, 1)), (1, (-1,)), (100, tuple(range(65)))])
def test_posting_rejects_impossible_values(args):
    with pytest.raises(ValueError):
        Posting(*args)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from("abcdefg"), max_size=300))
def test_posting_round_trip(tokens):
    for p in postings(tokens).values():
        assert decode_posting(encode_posting(p)) == p


@settings(max_examples=300, deadline=None)
@given(st.sets(st.integers(0, 2**40), min_size=0, max_size=64), st.integers(0, 1000))
def test_posting_round_trip_of_arbitrary_positions(positions, extra_tf):
    p = Posting(max(1, len(positions)) + extra_tf, tuple(sorted(positions)))
    assert decode_posting(encode_posting(p)) == p


# -- canonical -----------------------------------------------------------------------------


def test_canonical_is_the_member_with_most_inlinks():
    assert elect_canonical({"http://a.com/long/path": 5, "http://b.com/": 2}) == "http://a.com/long/path"


def test_canonical_ties_go_to_the_shortest_url_then_the_smallest():
    assert elect_canonical({"http://a.com/xx": 3, "http://b.com/": 3}) == "http://b.com/"
    assert elect_canonical({"http://b.com/": 3, "http://a.com/": 3, "http://c.com/": 1}) == "http://a.com/"


def test_canonical_does_not_depend_on_order_and_empty_has_none():
    members = {"http://x.org/b": 1, "http://x.org/a": 1, "http://x.org/ccc": 1}
    assert elect_canonical(members) == elect_canonical(dict(reversed(list(members.items())))) == "http://x.org/a"
    assert elect_canonical({}) is None


def test_a_declared_canonical_is_honoured_only_within_the_cluster():
    members = {"http://x.org/a": 1, "http://x.org/a?print=1": 9, "http://x.org/b": 0}
    # Both a and its print version declare a: a wins though print has more inlinks.
    assert elect_canonical(members, {"http://x.org/a": "http://x.org/a",
                                     "http://x.org/a?print=1": "http://x.org/a"}) == "http://x.org/a"
    # A declaration outside the cluster counts for nothing: the inlink rule decides.
    assert elect_canonical(members, {"http://x.org/b": "http://x.org/elsewhere"}) == "http://x.org/a?print=1"
    # Most declarations first, then the inlink rule among equally declared candidates.
    declared = {"http://x.org/a": "http://x.org/b", "http://x.org/a?print=1": "http://x.org/a",
                "http://x.org/b": "http://x.org/b"}
    assert elect_canonical(members, declared) == "http://x.org/b"
    declared["http://x.org/b"] = "http://x.org/a"
    assert elect_canonical(members, declared) == "http://x.org/a"
    # A declaration by a page that is no member is ignored, whatever it names.
    assert elect_canonical(members, {"http://x.org/gone": "http://x.org/b"}) == "http://x.org/a?print=1"


# -- documents -----------------------------------------------------------------------------


def test_document_record_fields():
    doc = must_parse("<title>T t</title><p>one two three</p><link rel=canonical href='/c'>")
    assert document_record(doc) == {"title": "T t", "text": "T t one two three",
                                    "canonical": "http://example.com/c", "length": 5}


def test_outlinks_sorted_deduplicated_anchors_joined_self_links_excluded():
    doc = must_parse(
        "<a href='b.html'>second</a><a href='a.html'>first</a><a href='b.html'>again</a>"
        "<a href='b.html'></a><a href='page.html'>myself</a><a href='#frag'>me too</a><a href='c.html'></a>"
    )
    assert outlinks_record(PAGE, doc) == [
        ["http://example.com/dir/a.html", "first"],
        ["http://example.com/dir/b.html", "second again"],
        ["http://example.com/dir/c.html", ""],
    ]
    assert outlinks_record("HTTP://EXAMPLE.com:80/dir/page.html#x", doc) == outlinks_record(PAGE, doc)


# -- scoring -------------------------------------------------------------------------------


def _body_only(tf: int, dl: int, avg: float, df: int, n: int) -> float:
    """BM25F with the body alone: what classic BM25 gives."""
    return SIMILARITY.term_score((tf, 0, 0, 0), SIMILARITY.field_norms((dl, 0, 0, 0), (avg, 0.0, 0.0, 0.0)), df, n)


def test_bm25_matches_the_documented_formula():
    tf, dl, avg, df, n = 3, 120, 100.0, 5, 1000
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    want = idf * tf * 2.2 / (tf + 1.2 * (1 - 0.5 + 0.5 * dl / avg))   # the body's b = 0.5
    assert _body_only(tf, dl, avg, df, n) == pytest.approx(want)


def test_bm25_properties():
    assert _body_only(0, 10, 10, 1, 10) == 0.0
    assert _body_only(2, 10, 10, 1, 10) > _body_only(1, 10, 10, 1, 10)          # more occurrences, higher
    assert _body_only(1, 10, 10, 1, 10) > _body_only(1, 10, 10, 9, 10)          # rarer term, higher
    assert _body_only(1, 5, 10, 1, 10) > _body_only(1, 50, 10, 1, 10)           # shorter document, higher
    assert _body_only(1, 10, 10, 10, 10) > 0                                    # idf never negative
    assert _body_only(1, 10, 0, 1, 1) > 0                                       # empty index: no division by zero


def test_link_prior_is_damped_and_saturates_and_the_score():
    prior = SIMILARITY.link_prior
    assert prior(0) == 1.0 and prior(-3) == 1.0
    assert prior(10) == pytest.approx(1.25)           # half the weight at K = 10 votes
    assert prior(10) > prior(1)
    assert prior(10**9) < SIMILARITY.prior_ceiling == 1.5     # never more than x(1 + W)
    assert SIMILARITY.score([1.0, 2.0], 0) == pytest.approx(3.0)
    assert SIMILARITY.score([1.0, 2.0], 1000) == pytest.approx(3.0 * prior(1000))
    assert SIMILARITY.score([1.0, 2.0], 0, distance=1) == pytest.approx(3.0 + SIMILARITY.proximity_bonus(1))
