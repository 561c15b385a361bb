"""What pages say about themselves, parsed: robots meta tags, X-Robots-Tag values, meta refresh.

Pure (no HBase): ``caffeine.index.directives`` and what both HTML walks collect with it, and
``caffeine.index.documents.page_rules``/``derive``/``crawl_links`` that decide what a page is
to the index and the crawler. The served-site tests are in
``tests/crawler/test_page_directives.py``.
"""

from __future__ import annotations

import json

import pytest

from caffeine.index.directives import header_directives, parse_refresh, robots_directives
from caffeine.index.documents import crawl_links, derive, page_rules
from caffeine.index.parse import parse_html
from caffeine.index.parse_soup import parse_soup

URL = "http://site.test/dir/page.html"
META = {"url": URL, "final_url": URL, "content_type": "text/html; charset=utf-8", "status": 200}


def html(head: str, body: str = '<p>words here</p><a href="/next.html">next</a>') -> bytes:
    return f"<html><head><title>T</title>{head}</head><body>{body}</body></html>".encode()


@pytest.mark.parametrize("content, expected", [
    ("noindex", {"noindex"}), ("NOINDEX, NOFOLLOW", {"noindex", "nofollow"}), ("none", {"noindex", "nofollow"}),
    ("all", set()), ("index, follow", set()), ("nosnippet,noarchive", {"nosnippet", "noarchive"}),
    ("max-snippet:0", {"nosnippet"}), ("max-snippet: 0", {"nosnippet"}), ("max-snippet:20", set()),
    (" noindex ,  ", {"noindex"}), ("no index", set()), ("noimageindex, notranslate", set()), ("", set()),
])
def test_robots_directives(content, expected):
    assert robots_directives(content) == expected


@pytest.mark.parametrize("values, expected", [
    (["noindex"], {"noindex"}),
    (["googlebot: noindex"], set()),
    (["caffeinebot: nofollow"], {"nofollow"}),
    (["CaffeineBot: none"], {"noindex", "nofollow"}),
    (["noarchive", "googlebot: noindex", "caffeinebot: nosnippet"], {"noarchive", "nosnippet"}),
    (["unavailable_after: 25 Jun 2010 15:00:00 PST"], set()),  # a directive with a value, no user agent
    (["max-snippet:0"], {"nosnippet"}),
    (["noindex, nofollow"], {"noindex", "nofollow"}),
])
def test_x_robots_tag_values(values, expected):
    assert header_directives(values) == expected


@pytest.mark.parametrize("content, expected", [
    ("0; url=http://a.test/x", (0.0, "http://a.test/x")), ("0;URL='x.html'", (0.0, "x.html")),
    ('3; url="y.html"', (3.0, "y.html")), ("5,z.html", (5.0, "z.html")), ("0 ; URL = w.html", (0.0, "w.html")),
    ("2.9; url=v.html", (2.0, "v.html")), ("5", None), ("url=x.html", None), ("0;", None), ("", None),
])
def test_refresh_content(content, expected):
    assert parse_refresh(content) == expected


def both_walks(content: bytes):
    parsed = parse_html(content, URL, "text/html; charset=utf-8")
    assert parse_soup(content.decode(), URL, "utf-8") == parsed
    return parsed


def test_both_walks_collect_the_tags_aimed_at_this_crawler():
    parsed = both_walks(html('<meta name="ROBOTS" content="noindex"><meta name="googlebot" content="nofollow">'
                             '<meta name="CaffeineBot" content="nosnippet"><meta content="noarchive">'))
    assert parsed.robots == {"noindex", "nosnippet"}
    assert parsed.refresh is None


def test_the_first_refresh_counts_and_one_inside_noscript_is_not_seen():
    parsed = both_walks(html('<noscript><meta http-equiv="refresh" content="0; url=/js-off.html"></noscript>'
                             '<meta http-equiv="Refresh" content="0; URL=../moved.html">'
                             '<meta http-equiv="refresh" content="0; url=/second.html">'))
    assert parsed.refresh == (0.0, "http://site.test/moved.html")
    only_noscript = both_walks(html('<noscript><meta http-equiv="refresh" content="0; url=/js-off.html"></noscript>'))
    assert only_noscript.refresh is None


def rules_of(content: bytes, **meta):
    parsed = parse_html(content, URL, "text/html")
    return page_rules(URL, {**META, **meta}, parsed), parsed


def test_noindex_pages_are_no_documents_but_their_links_count():
    derived = derive(URL, META, html('<meta name="robots" content="noindex">'))
    assert derived.parsed is None and derived.fingerprint is None
    assert derived.outlinks == [["http://site.test/next.html", "next"]]
    assert json.loads(derived.directives) == {"robots": ["noindex"]}


def test_nofollow_from_the_header_or_the_page_drops_the_links():
    for content, meta in ((html('<meta name="robots" content="nofollow">'), {}),
                          (html(""), {"robots": ["nofollow"]})):
        derived = derive(URL, {**META, **meta}, content)
        assert derived.parsed is not None and derived.outlinks == []
        assert crawl_links(URL, {**META, **meta}, parse_html(content, URL, "text/html")) == []


def test_a_header_noindex_is_a_page_noindex():
    derived = derive(URL, {**META, "robots": ["noindex"]}, html(""))
    assert derived.parsed is None and json.loads(derived.directives) == {"robots": ["noindex"]}


def test_nosnippet_and_noarchive_stay_with_the_document():
    derived = derive(URL, META, html('<meta name="robots" content="nosnippet, noarchive">'))
    assert json.loads(derived.parsed)["robots"] == ["nosnippet", "noarchive"]
    plain = derive(URL, META, html(""))
    assert "robots" not in json.loads(plain.parsed) and plain.directives is None


def test_an_instant_refresh_is_a_redirect_stub_and_a_late_one_a_link():
    stub, parsed = rules_of(html('<meta http-equiv="refresh" content="0; url=/target.html">'))
    assert stub.redirect and not stub.document and stub.refresh == "http://site.test/target.html"
    derived = derive(URL, META, html('<meta http-equiv="refresh" content="0; url=/target.html">'))
    assert derived.parsed is None
    assert ["http://site.test/target.html", ""] in derived.outlinks
    assert json.loads(derived.directives) == {"redirect": True, "refresh": "http://site.test/target.html"}
    late, _ = rules_of(html('<meta http-equiv="refresh" content="30; url=/later.html">'))
    assert late.document and not late.redirect and late.refresh == "http://site.test/later.html"


def test_a_refresh_to_the_page_itself_is_a_reload():
    rules, _ = rules_of(html('<meta http-equiv="refresh" content="0; url=page.html">'))
    assert rules.refresh is None and rules.document


def test_the_crawler_follows_a_refresh_even_when_nofollow_or_at_the_last_depth():
    content = html('<meta name="robots" content="nofollow"><meta http-equiv="refresh" content="0; url=/t.html">')
    parsed = parse_html(content, URL, "text/html")
    assert crawl_links(URL, META, parsed) == ["http://site.test/t.html"]
    content = html('<meta http-equiv="refresh" content="0; url=/t.html">')
    parsed = parse_html(content, URL, "text/html")
    assert crawl_links(URL, META, parsed, links=False) == ["http://site.test/t.html"]
    assert crawl_links(URL, META, parsed) == ["http://site.test/next.html", "http://site.test/t.html"]
