"""The indexing chain, fed directly (no crawler), against a from-scratch computation.

Pages are written into ``repository`` the way the crawler writes them; workers run the chain
in-process; the dups table and the inverted index must equal ``reference_index.reference``.
"""

from __future__ import annotations

import json
import random

import pytest

from caffeine.observers.app import application
from caffeine.index.schema import PAGE_CONTENT, PAGE_META, REPOSITORY
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.percolator.worker import Worker
from support.reference_index import incremental, reference

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma".split()


def make_web(n: int, seed: int, version: int = 0) -> dict[str, tuple[dict, bytes]]:
    rng = random.Random(seed * 1000 + version)
    base = "http://web.test/"
    pages = {}
    bodies = {}
    for i in range(n):
        url = f"{base}p{i}.html"
        links = [f"{base}p{rng.randrange(n)}.html" for _ in range(rng.randrange(1, 5))]
        title = f"Page {i}"
        body = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(5, 30)))
        if i % 7 == 5:  # page i-1 with one more word: a near-duplicate when its text is long enough
            title, body, links = bodies[i - 1][0], bodies[i - 1][1] + " " + rng.choice(WORDS), bodies[i - 1][2]
        bodies[i] = (title, body, links)
        html = (f"<html><head><title>{title}</title></head><body><p>{body}</p>"
                + "".join(f'<a href="{l}">to {l[-8:]}</a>' for l in links) + "</body></html>")
        if i % 7 == 3:  # an exact duplicate of page i-1, served at another URL
            html = pages[f"{base}p{i - 1}.html"][2]
        meta = {"url": url, "status": 200, "content_type": "text/html; charset=utf-8", "fetched_at": 1.0,
                "final_url": url, "error": None, "truncated": False, "bytes": len(html)}
        pages[url] = (meta, html.encode(), html)
    return {u: (m, c) for u, (m, c, _) in pages.items()}


def feed(cluster, pages):
    items = sorted(pages.items())
    for i in range(0, len(items), 10):
        with cluster.begin() as txn:
            for url, (meta, content) in items[i:i + 10]:
                txn.set(REPOSITORY, url, PAGE_META, json.dumps(meta))
                txn.set(REPOSITORY, url, PAGE_CONTENT, content)


def assert_equal(got, want):
    assert got["dups"] == want["dups"]
    assert got["docs"] == want["docs"]
    assert got["postings"].keys() == want["postings"].keys()
    for term in want["postings"]:
        assert got["postings"][term] == want["postings"][term], term


@pytest.mark.timeout(600)
def test_chain_matches_a_from_scratch_computation_before_and_after_changes(fresh_cluster):
    cluster = fresh_cluster
    application.install(cluster)
    pages = make_web(40, seed=7)
    with Worker(cluster, application, threads=4):
        feed(cluster, pages)
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=300, poll_s=0.1)
        want = reference(pages)
        assert len(want["docs"]) > 20 and len(want["postings"]) >= len(WORDS)
        assert any(len(members) > 1 for _, members in want["dups"].values()), "the web has duplicates"
        canonicals = [canonical for canonical, _ in want["dups"].values()]
        assert len(canonicals) > len(set(canonicals)), "the web has near-duplicates"
        assert_equal(incremental(cluster), want)

        # Change some pages, make some disappear (404), leave one erroring (kept as is).
        changed = make_web(40, seed=7, version=1)
        update = {}
        for i, url in enumerate(sorted(pages)):
            if i % 5 == 0:
                update[url] = changed[url]
            elif i % 11 == 1:
                meta = dict(pages[url][0], status=404, content_type="text/html")
                update[url] = (meta, b"not found")
            elif i % 13 == 2:
                meta = dict(pages[url][0], status=503, error="server error")
                update[url] = (meta, b"")
        feed(cluster, update)
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=300, poll_s=0.1)
        after = dict(pages, **update)
        final = reference(after, previous=want)
        assert final["docs"] != want["docs"], "the changes changed the index"
        assert_equal(incremental(cluster), final)


@pytest.mark.timeout(600)
def test_index_writes_that_fail_after_the_commit_are_redone(fresh_cluster, monkeypatch):
    # Export writes the index after its transaction committed. When those writes fail (a
    # storage error here; a worker killed at that moment is the same case) the notification
    # must survive, and the next run must redo them: nothing may be lost from the index.
    from caffeine.percolator.serving import ServingTable
    from caffeine.storage import StorageError

    cluster = fresh_cluster
    application.install(cluster)
    pages = make_web(30, seed=11)
    real_put = ServingTable.put
    failed = []

    def flaky_put(self, rows, ts):
        if self.name.endswith("postings") and len(failed) < 4:
            failed.append(ts)
            raise StorageError("injected: postings write lost after the commit")
        return real_put(self, rows, ts)

    monkeypatch.setattr(ServingTable, "put", flaky_put)
    with Worker(cluster, application, threads=4) as worker:
        feed(cluster, pages)
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=300, poll_s=0.1)
    assert len(failed) == 4
    assert_equal(incremental(cluster), reference(pages))
    assert worker.metrics.redos >= 1
