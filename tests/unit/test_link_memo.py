"""``normalize_link`` remembers links across pages by the base's directory: it must return
exactly what ``normalize_url`` does, whichever page of a directory resolved a link first."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caffeine.index import urls
from caffeine.index.urls import normalize_link, normalize_url

# Pages of one directory, spelled every way a base can differ past its last slash.
SIBLING_BASES = [
    "http://Example.com:80/docs/a/page.html",
    "http://example.com/docs/a/other.html?x=1&PHPSESSID=9",
    "http://example.com/docs/a/",
    "http://example.com/docs/a/index.html;params",
    "http://example.com/docs/a/q.html#frag",
    " http://example.com/docs/a/tab\t.html\n",
    "http://user:pw@example.com/docs/a/x.html",
]
LINKS = [
    "page2.html", "./page2.html", "../up.html", "../../../../root.html", "sub/dir/", "sub/./x/../y.html",
    "p.html#section", "p.html?q=1#s", "p.html?PHPSESSID=abc&k=v", "p.html;jsessionid=XYZ", "a%7eb.html",
    "%2E%2E/x.html", "ünï.html", "sp ace.html", "p.html;params?q", ".", "..", "./", "x?", "#only",
    "", "?q=1", "/abs/path.html", "//other.org/x", "http://abs.example/y", "HTTP:rel", "mailto:a@b",
    ";p", " lead.html", "tab\tbed.html", "javascript:void(0)", "p.html#a#b", "~user/", "a:b.html",
    "a #", "a\t#x", "a\n", "trail.html ", "back\\slash.html", "A%2ea/B.html",
]


@pytest.fixture(autouse=True)
def _empty_memo():
    urls._LINKS.clear()
    urls._DIRECTORIES.clear()
    yield
    urls._LINKS.clear()
    urls._DIRECTORIES.clear()


@pytest.mark.parametrize("first", range(len(SIBLING_BASES)))
def test_a_link_resolves_as_normalize_url_does_whichever_sibling_page_saw_it_first(first):
    order = SIBLING_BASES[first:] + SIBLING_BASES[:first]
    for base in order:
        for link in LINKS:
            assert normalize_link(link, base) == normalize_url(link, base), (link, base)


@pytest.mark.parametrize("link", ["\x01?q=1", "\x01#frag", "\x1f;p", "\u3000?q", "\x00", " ?q", "\x0b#x"])
def test_a_link_whose_leading_controls_or_spaces_are_stripped_is_resolved_from_its_own_page(link):
    # Python's urlsplit drops leading C0 controls and spaces (WHATWG), and normalize_url strips
    # whitespace: what is left may be a query or an empty reference, which keep the page's own
    # last segment, so such a link must not be shared between pages of a directory.
    for base in ("http://example.com/d/one.html", "http://example.com/d/two.html?x"):
        assert normalize_link(link, base) == normalize_url(link, base), (link, base)


def test_pages_of_other_directories_or_hosts_do_not_share_a_link():
    assert normalize_link("x.html", "http://example.com/a/p.html") == "http://example.com/a/x.html"
    assert normalize_link("x.html", "http://example.com/b/p.html") == "http://example.com/b/x.html"
    assert normalize_link("x.html", "https://example.com/a/p.html") == "https://example.com/a/x.html"
    assert normalize_link("x.html", "http://example.org/a/p.html") == "http://example.org/a/x.html"
    assert normalize_link("x.html", None) is None


def test_the_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(urls, "_LINKS_MAX", 8)
    for i in range(50):
        assert normalize_link(f"p{i}.html", "http://example.com/d/index.html") == f"http://example.com/d/p{i}.html"
    assert len(urls._LINKS) <= 8 and len(urls._DIRECTORIES) <= 8


_link_text = st.lists(st.sampled_from(list("aB./?#;:%~=&2eE \t\n\\@ü\x01\x1f\u3000") + ["..", "PHPSESSID=1"]), max_size=10).map("".join)
_base_tail = st.lists(st.sampled_from(list("ab.?#;=&/") + [".."]), max_size=8).map("".join)


@settings(max_examples=400, deadline=None)
@given(_link_text, _base_tail, _base_tail, st.sampled_from(["http://h.example/d/", "https://h.example/", "http://h.example"]))
def test_any_link_from_any_two_bases_equals_normalize_url(link, tail1, tail2, prefix):
    urls._LINKS.clear()
    urls._DIRECTORIES.clear()
    for base in (prefix + tail1, prefix + tail2):
        assert normalize_link(link, base) == normalize_url(link, base), (link, base)
