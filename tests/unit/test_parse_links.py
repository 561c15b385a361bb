"""``parse_links`` (what the crawler follows) must return exactly what ``parse_html`` returns
for everything a crawler reads of a page: the links' targets in order, the canonical, the
robots directives, the meta refresh, the encoding; on the parser's edge cases, on random
HTML fragments, on deep trees lxml cannot hold, and on real pages when Debian's
python3.11-doc is installed. ``bench/bench_parse.py --compare`` runs the same comparison over
larger corpora."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caffeine.index import parse_html, parse_links
from support.parse_reference import EDGE_CASES, followed, random_fragment

URL = "http://site.test/dir/page.html"
DOCS = Path("/usr/share/doc/python3.11/html")
CONTENT_TYPES = ("text/html", None, "text/html; charset=windows-1252")


def assert_links_as_parsed(body: bytes, url: str = URL, content_type: str | None = "text/html") -> None:
    links = parse_links(body, url, content_type)
    assert followed(links) == followed(parse_html(body, url, content_type))
    assert (links.title, links.text, links.main) == ("", "", None)
    assert all(anchor == "" for _, anchor in links.links)


@pytest.mark.parametrize("case", range(len(EDGE_CASES)))
def test_edge_cases_give_the_links_of_the_whole_parse(case):
    body = EDGE_CASES[case].encode("utf-8", "surrogatepass")
    for content_type in CONTENT_TYPES:
        assert_links_as_parsed(body, URL, content_type)


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 40))
def test_random_fragments_give_the_links_of_the_whole_parse(rng, size):
    assert_links_as_parsed(random_fragment(rng, size).encode("utf-8"))


def test_hidden_links_and_directives_are_skipped_as_the_whole_parse_skips_them():
    body = (b"<html><head><base href='http://other.test/b/'>"
            b"<noscript><link rel=canonical href='/hidden'><meta name=robots content=nofollow></noscript>"
            b"<link rel='alternate canonical' href='c.html'><meta name=robots content='noindex'>"
            b"<meta http-equiv=refresh content='0; url=next.html'></head><body>"
            b"<script>document.write('<a href=\"/in-script\">x</a>')</script>"
            b"<template><a href='/in-template'>t</a></template><!-- <a href='/in-comment'>c</a> -->"
            b"<p><a href='one.html#top'>one</a> <map><area href='/area'></map><a name=x>no href</a>"
            b"<a href='javascript:void(0)'>js</a><a href='one.html'>again</a></p></body></html>")
    doc = parse_links(body, URL, "text/html")
    assert followed(doc)[:4] == (["http://other.test/b/one.html", "http://other.test/area", "http://other.test/b/one.html"],
                                 "http://other.test/b/c.html", frozenset({"noindex"}), (0.0, "http://other.test/b/next.html"))
    assert_links_as_parsed(body)


def test_a_tree_too_deep_for_lxml_gives_the_links_of_the_whole_parse():
    depth = 400
    body = ("<a href='/first'>f</a>" + "<span>" * depth + "<a href='/deep'>d</a>" + "</span>" * depth
            + "<a href='/last'>l</a>").encode()
    assert [t for t, _ in parse_links(body, URL, "text/html").links] == [
        "http://site.test/first", "http://site.test/deep", "http://site.test/last"]
    assert_links_as_parsed(body)


def test_bytes_that_are_no_html_give_no_links():
    for body in (b"", b"\x00\xff\xfe garbage", b"%PDF-1.4 binary"):
        assert_links_as_parsed(body)
        assert parse_links(body, URL, None).links == []


@pytest.mark.skipif(not DOCS.is_dir(), reason="needs Debian's python3.11-doc (apt: python3.11-doc)")
def test_real_pages_give_the_links_of_the_whole_parse():
    files = sorted(DOCS.rglob("*.html"))
    for f in random.Random(1).sample(files, min(25, len(files))):
        assert_links_as_parsed(f.read_bytes(), f"http://docs.test/{f.relative_to(DOCS)}")
