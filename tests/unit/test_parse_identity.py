"""``parse_html`` walks lxml's own tree and must return exactly what the BeautifulSoup
implementation it replaced returned (``parse_reference``): on the edge cases, on random HTML
fragments, and on real pages when Debian's python3.11-doc is installed.
``bench/bench_parse.py --compare`` runs the same comparison over larger corpora."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from caffeine.index import parse_html
from support.parse_reference import EDGE_CASES, random_fragment, reference_parse_html

URL = "http://site.test/dir/page.html"
DOCS = Path("/usr/share/doc/python3.11/html")


@pytest.mark.parametrize("case", range(len(EDGE_CASES)))
def test_edge_cases_parse_as_before(case):
    body = EDGE_CASES[case].encode("utf-8", "surrogatepass")
    for content_type in ("text/html", None):
        assert parse_html(body, URL, content_type) == reference_parse_html(body, URL, content_type)


@settings(max_examples=400, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(1, 40))
def test_random_fragments_parse_as_before(rng, size):
    body = random_fragment(rng, size).encode("utf-8")
    assert parse_html(body, URL, "text/html") == reference_parse_html(body, URL, "text/html")


@pytest.mark.skipif(not DOCS.is_dir(), reason="needs Debian's python3.11-doc (apt: python3.11-doc)")
def test_real_pages_parse_as_before():
    files = sorted(DOCS.rglob("*.html"))
    for f in random.Random(0).sample(files, min(25, len(files))):
        url = f"http://docs.test/{f.relative_to(DOCS)}"
        body = f.read_bytes()
        assert parse_html(body, url, "text/html") == reference_parse_html(body, url, "text/html"), f
