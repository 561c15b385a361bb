"""A crawl over a real HTML documentation tree nobody here wrote (Debian's python3.11-doc).

The tree is served by ``TestWeb(directory=...)`` and crawled from its index with the observer
chain running; afterwards every HTML page of the tree is in the repository, and the dups table
and the inverted index equal a from-scratch computation over the fetched pages. The tree's
pages are all different, but served as a web it has exact duplicates as real sites do: a
folder's URL serves the same bytes as its ``index.html``. CI installs the package (``apt-get install python3.11-doc``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from caffeine.observers.app import application
from caffeine.index import fetch_outcome
from caffeine.index.schema import DUPS, MEMBER_PREFIX, PAGE_CONTENT, PAGE_META, REPOSITORY
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.percolator.worker import Worker
from crawler.crawl import crawl
from testweb import TestWeb
from support.reference_index import incremental, reference

DOCS = Path("/usr/share/doc/python3.11/html")
pytestmark = [pytest.mark.hbase, pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_a_real_documentation_tree_is_indexed_with_its_exact_duplicates(fresh_cluster):
    if not DOCS.is_dir():
        message = f"{DOCS} is missing: apt-get install python3.11-doc"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    cluster = fresh_cluster
    application.install(cluster)
    with TestWeb(directory=DOCS) as base_url, Worker(cluster, application, threads=8):
        # Seeds as people link to a documentation site: the site and a few sections by their
        # folder URLs, which serve the same bytes as the index.html the pages link to.
        seeds = [base_url + path for path in ("/", "/index.html", "/tutorial/", "/library/", "/howto/")]
        report = crawl(cluster, seeds, depth=100, delay=0.0, timeout=30.0, max_bytes=4 * 1024 * 1024, workers=8)
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=1500, poll_s=0.5)

    pages = {}
    with cluster.begin() as txn:
        for row, cols in txn.scan(REPOSITORY, columns=[PAGE_META, PAGE_CONTENT]):
            pages[row.decode()] = (json.loads(cols[PAGE_META]), cols.get(PAGE_CONTENT, b""))
    documents = {u for u, (meta, _) in pages.items() if fetch_outcome(meta) == "document"}

    # Every HTML file of the tree that links reach was fetched and became a document.
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.html") if "_sources" not in p.parts}
    fetched = {u[len(base_url) + 1:] for u in documents}
    assert len(on_disk & fetched) >= 0.95 * len(on_disk), sorted(on_disk - fetched)[:20]
    assert not [u for u, (m, _) in pages.items() if m["status"] >= 500], "no server errors"

    want = reference(pages)
    got = incremental(cluster)
    assert got["dups"] == want["dups"]
    assert got["docs"] == want["docs"]
    assert got["postings"] == want["postings"]
    members = set()
    with cluster.begin() as txn:
        for _, cols in txn.scan(DUPS):
            members |= {c[len(MEMBER_PREFIX):] for c in cols if c.startswith(MEMBER_PREFIX)}
    assert members == documents, "every document is in exactly the cluster of its content"
    duplicates = {fp: sorted(m) for fp, (_, m) in want["dups"].items() if len(m) > 1}
    for folder in ("", "tutorial/", "library/", "howto/"):
        pair = sorted([f"{base_url}/{folder}", f"{base_url}/{folder}index.html"])
        assert pair in duplicates.values(), f"{pair} are exact duplicates"
    # The canonical rule picks the page the tree links to (more inlinks), not the folder URL.
    for fp, members in duplicates.items():
        canonical = got["dups"][fp][0]
        assert canonical.endswith("index.html"), (canonical, members)
    print(f"{len(documents)} documents, {len(want['dups'])} clusters, {len(duplicates)} with duplicates, "
          f"{len(want['postings'])} terms; crawl: {report.counts()}")
