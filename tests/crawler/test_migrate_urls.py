"""``caffeine migrate-urls``: rows keyed under the earlier URL rules move to their new key.

Rows are written the way the crawler wrote them before UTS46 and unreserved-escape
decoding (``%7Euser`` kept escaped), in the in-memory store and real HBase.
"""

from __future__ import annotations

import json
import uuid

import pytest

from caffeine.index import fetch_outcome
from crawler.frontier import RUN_ROW
from crawler.migrate import migrate_urls

OLD = "http://example.com/%7Euser/"
NEW = "http://example.com/~user/"
LINKER = "http://example.com/links.html"


@pytest.fixture
def tables():
    suffix = uuid.uuid4().hex[:8]
    return dict(repository=f"repo_{suffix}", frontier=f"front_{suffix}")


def meta(url, fetched_at=100.0):
    return json.dumps({"url": url, "status": 200, "content_type": "text/html", "fetched_at": fetched_at,
                       "final_url": url, "error": None, "truncated": False, "bytes": 5})


def test_old_keys_move_and_the_old_row_becomes_gone(cluster, tables):
    repo, front = tables["repository"], tables["frontier"]
    cluster.create_table(repo)
    cluster.create_table(front)

    def write(txn):
        txn.set(repo, OLD, "page:meta", meta(OLD))
        txn.set(repo, OLD, "page:content", b"<p>tilde</p>")
        txn.set(repo, LINKER, "page:meta", meta(LINKER))
        txn.set(repo, LINKER, "page:content", b'<a href="/%7Euser/">u</a>')
        txn.set(repo, LINKER, "doc:outlinks", json.dumps([[OLD, "u"]]))
        txn.set(front, OLD, "state", "done")
        txn.set(front, OLD, "depth", "1")
        txn.set(front, OLD, "run", "r1")
        txn.set(front, RUN_ROW, "config", json.dumps({"origins": ["http://EXAMPLE.com"], "depth": 1}))

    cluster.run(write)
    dry = migrate_urls(cluster, dry_run=True, **tables)
    assert (dry.counts["repository"], dry.counts["relinked"], dry.counts["frontier"]) == (1, 1, 1)
    with cluster.begin() as txn:
        assert txn.get_row(repo, NEW, ["page:meta"])["page:meta"] is None, "a dry run writes nothing"

    report = migrate_urls(cluster, **tables)
    assert report.moved == [(OLD, NEW)]
    with cluster.begin() as txn:
        new = txn.get_row(repo, NEW, ["page:meta", "page:content"])
        old = txn.get_row(repo, OLD, ["page:meta", "page:content"])
        frontier_new = txn.get_row(front, NEW, ["state", "depth", "run"])
        frontier_old = txn.get_row(front, OLD, ["state"])
        config = json.loads(txn.get_row(front, RUN_ROW, ["config"])["config"])
    moved = json.loads(new["page:meta"])
    assert (moved["url"], moved["final_url"], new["page:content"]) == (NEW, NEW, b"<p>tilde</p>")
    gone = json.loads(old["page:meta"])
    assert fetch_outcome(gone) == "gone" and gone["final_url"] == NEW and old["page:content"] is None
    assert frontier_new == {"state": b"done", "depth": b"1", "run": b"r1"} and frontier_old["state"] is None
    assert config["origins"] == ["http://example.com"]
    again = migrate_urls(cluster, **tables)
    assert (again.counts["repository"], again.counts["frontier"]) == (0, 0)


def test_a_later_fetch_under_the_new_key_is_not_overwritten(cluster, tables):
    repo = tables["repository"]
    cluster.create_table(repo)

    def write(txn):
        txn.set(repo, OLD, "page:meta", meta(OLD, fetched_at=100.0))
        txn.set(repo, OLD, "page:content", b"<p>old</p>")
        txn.set(repo, NEW, "page:meta", meta(NEW, fetched_at=200.0))
        txn.set(repo, NEW, "page:content", b"<p>new</p>")

    cluster.run(write)
    migrate_urls(cluster, **tables)
    with cluster.begin() as txn:
        assert txn.get_row(repo, NEW, ["page:content"])["page:content"] == b"<p>new</p>"
        assert fetch_outcome(json.loads(txn.get_row(repo, OLD, ["page:meta"])["page:meta"])) == "gone"


def test_rows_keyed_with_session_ids_move_to_one_key_and_the_latest_fetch_wins(cluster, tables):
    repo, front = tables["repository"], tables["frontier"]
    cluster.create_table(repo)
    cluster.create_table(front)
    new = "http://example.com/cart?item=7"
    olds = {"http://example.com/cart?item=7&PHPSESSID=0f1e2d3c4b5a6978": 100.0,
            "http://example.com/cart;jsessionid=A1B2C3?item=7": 300.0,
            "http://example.com/cart?jsessionid=FFEE&item=7": 200.0}

    def write(txn):
        for old, at in olds.items():
            txn.set(repo, old, "page:meta", meta(old, fetched_at=at))
            txn.set(repo, old, "page:content", f"<p>{at}</p>".encode())
            txn.set(front, old, "state", "done")
            txn.set(front, old, "depth", "1")
            txn.set(front, old, "run", "r1")

    cluster.run(write)
    report = migrate_urls(cluster, **tables)
    assert sorted(report.moved) == sorted((old, new) for old in olds)
    with cluster.begin() as txn:
        row = txn.get_row(repo, new, ["page:meta", "page:content"])
        gone = [json.loads(txn.get_row(repo, old, ["page:meta"])["page:meta"]) for old in olds]
        frontier = [key.decode() for key, _ in txn.scan(front, columns=["state"])]
    assert json.loads(row["page:meta"])["fetched_at"] == 300.0 and row["page:content"] == b"<p>300.0</p>"
    assert all(fetch_outcome(g) == "gone" and g["final_url"] == new for g in gone)
    assert frontier == [new]
    assert migrate_urls(cluster, **tables).counts["repository"] == 0
