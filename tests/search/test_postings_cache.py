"""The search service's near-real-time reads: in-memory posting lists (caffeine.search.postings_cache),
statistics refreshed from changed rows, and the reads they rely on
(``ServingTable.changes_since`` / ``scan_changes``): the reads on the in-memory store and the
real HBase, the cache's rules with hand-driven clocks, then the service end to end on HBase
(an export is searchable within the refresh interval; a straggler at the next whole read).
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from caffeine.search.reader import IndexReader
from caffeine.search.postings_cache import PostingsCache
from caffeine.search.query import parse_query
from caffeine.search.settings import load_search_settings
from caffeine.index import Posting, encode_posting
from caffeine.observers.app import application
from caffeine.oracle.timestamps import compose
from caffeine.index.schema import DOC_PARSED, DOCSTATS, DOCSTATS_FAMILY, POSTINGS, POSTINGS_FAMILY, REPOSITORY


# -- ServingTable.changes_since -------------------------------------------------------------------

def test_changes_since_returns_the_newer_cells_and_their_tombstones(cluster, table_name):
    table = cluster.serving(table_name, ["p"])
    table.create()
    table.put({"oak": {"p:a": b"old-a", "p:b": b"old-b", "p:c": b"old-c"}}, ts=100)
    table.put({"oak": {"p:b": b"new-b", "p:c": b""}, "elm": {"p:d": b"new-d"}}, ts=200)
    table.put({"oak": {"p:a": b"late-a"}}, ts=150)  # lands after ts 200, below it

    assert table.changes_since(["oak", "elm", "ash"], 200) == {
        b"oak": {"p:b": b"new-b", "p:c": b""}, b"elm": {"p:d": b"new-d"}, b"ash": {}}
    assert table.changes_since(["oak"], 150) == {b"oak": {"p:a": b"late-a", "p:b": b"new-b", "p:c": b""}}
    assert table.changes_since(["oak"], 201) == {b"oak": {}}
    # What readers of live cells see is unchanged: the tombstone hides c.
    assert table.get("oak") == {"p:a": b"late-a", "p:b": b"new-b"}
    # The scan form: which rows changed, with the same cells.
    assert dict(table.scan_changes(200)) == {b"oak": {"p:b": b"new-b", "p:c": b""}, b"elm": {"p:d": b"new-d"}}
    assert dict(table.scan_changes(150, start="f")) == {b"oak": {"p:a": b"late-a", "p:b": b"new-b", "p:c": b""}}
    assert dict(table.scan_changes(201)) == {}


def test_count_rows_counts_rows_with_a_live_cell(cluster, table_name):
    table = cluster.serving(table_name, ["p"])
    table.create()
    table.put({"ash": {"p:a": b"1"}, "elm": {"p:a": b"", "p:b": b"2"}, "fir": {"p:a": b"", "p:b": b""},
               "oak": {"p:b": b"3"}}, ts=100)
    table.put({"oak": {"p:b": b""}, "yew": {"p:c": b"4"}}, ts=200)  # oak loses its last posting
    # ash: first cell live; elm: first cell a tombstone, a later one live; fir, oak: tombstones only.
    assert table.count_rows() == len(list(table.scan())) == 3
    assert table.count_rows(start="b", stop="g") == 1
    # Rows whose first cell is a tombstone are settled in batches; more than one batch of them.
    table.put({f"t{i:03d}": {"p:a": b"", "p:b": b"x" if i % 3 == 0 else b""} for i in range(150)}, ts=300)
    assert table.count_rows() == 3 + 50


# -- PostingsCache, with hand-driven clocks ---------------------------------------------------------

class FakeRows:
    """Rows {term: {url: (value, wall time written)}} and a log of the reads made."""

    def __init__(self):
        self.rows: dict[str, dict[str, tuple[bytes, float]]] = {}
        self.reads: list[tuple] = []

    def write(self, term, url, value, at):
        self.rows.setdefault(term, {})[url] = (value, at)

    def read_whole(self, terms):
        self.reads.append(("whole", tuple(terms)))
        return {t: {u: v for u, (v, _) in self.rows.get(t, {}).items() if v} for t in terms}

    def read_since(self, terms, min_ts):
        self.reads.append(("since", tuple(terms), min_ts))
        return {t: {u: v for u, (v, at) in self.rows.get(t, {}).items() if compose(int(at * 1000)) >= min_ts}
                for t in terms}


class Clock:
    def __init__(self, now=1_000_000.0):
        self.now = now

    def __call__(self):
        return self.now


def make_cache(rows, clock, **kw):
    kw = {"refresh_s": 1.0, "margin_s": 30.0, "full_reload_s": 300.0, **kw}
    return PostingsCache(rows.read_whole, rows.read_since, clock=clock, monotonic=clock, **kw)


def test_a_term_is_read_whole_once_then_only_its_changes_after_the_refresh_interval():
    rows, clock = FakeRows(), Clock()
    rows.write("oak", "a", b"1", clock.now - 100)
    cache = make_cache(rows, clock)

    first = cache.get(["oak", "elm"])
    assert first["oak"].postings == {"a": b"1"} and first["elm"].postings == {}
    assert rows.reads == [("whole", ("oak", "elm"))]

    clock.now += 0.5
    rows.write("oak", "b", b"2", clock.now)
    assert cache.get(["oak"])["oak"].postings == {"a": b"1"}  # within refresh_s: as read
    assert len(rows.reads) == 1

    clock.now += 0.6
    again = cache.get(["oak", "elm"])
    assert again["oak"].postings == {"a": b"1", "b": b"2"}
    assert again["oak"].version != first["oak"].version
    assert again["elm"].version == first["elm"].version  # nothing changed: same version
    kind, terms, min_ts = rows.reads[1]
    assert (kind, set(terms)) == ("since", {"oak", "elm"})
    assert min_ts == compose(int((clock.now - 1.1 - 30.0) * 1000))  # first read's time - margin


def test_a_tombstone_removes_a_posting_and_a_straggler_is_seen_at_the_next_whole_read():
    rows, clock = FakeRows(), Clock()
    rows.write("oak", "a", b"1", clock.now)
    rows.write("oak", "b", b"2", clock.now)
    cache = make_cache(rows, clock, margin_s=5.0, full_reload_s=60.0)
    cache.get(["oak"])

    clock.now += 2
    rows.write("oak", "a", b"", clock.now)                  # removed
    rows.write("oak", "c", b"3", clock.now - 20)            # lands now, written 20 s "ago"
    assert cache.get(["oak"])["oak"].postings == {"b": b"2"}  # beyond the margin: not seen yet

    clock.now += 60
    assert cache.get(["oak"])["oak"].postings == {"b": b"2", "c": b"3"}
    assert rows.reads[-1] == ("whole", ("oak",))


def test_terms_in_use_are_brought_up_to_date_ahead_of_their_queries():
    """refresh_used reads, in one batch, the changes of the held terms queried in the last
    ahead_window_s once they are half of refresh_s old; queries then find them fresh and read
    nothing. A term nobody queried for longer is left to age, and its next query reads its
    changes itself."""
    rows, clock = FakeRows(), Clock()
    for term in ("oak", "elm", "ash"):
        rows.write(term, "a", b"1", clock.now - 100)
    cache = make_cache(rows, clock, ahead_window_s=10.0)
    cache.get(["ash"])
    clock.now += 11                            # ash: queried longer ago than the window
    cache.get(["oak", "elm"])
    assert cache.refresh_used() == 0           # oak, elm just read: not half refresh_s old
    clock.now += 0.6
    rows.write("oak", "b", b"2", clock.now)
    assert cache.refresh_used() == 2
    kind, terms, _ = rows.reads[-1]
    assert (kind, sorted(terms)) == ("since", ["elm", "oak"])
    reads = len(rows.reads)
    clock.now += 0.6                           # 1.2 s after their first read, 0.6 after the refresh
    got = cache.get(["oak", "elm"])
    assert got["oak"].postings == {"a": b"1", "b": b"2"} and len(rows.reads) == reads
    assert cache.get(["ash"])["ash"].postings == {"a": b"1"}
    assert rows.reads[-1][:2] == ("since", ("ash",))
    report = cache.report()
    assert (report["ahead_reads"], report["change_reads"]) == (2, 1)
    # Still in use (within the window): kept up to date, pass after pass, with no new query.
    clock.now += 0.6
    assert cache.refresh_used() == 3
    clock.now += 0.6
    assert cache.refresh_used() == 3
    # A term due for its whole read is read whole ahead of its query too.
    due = make_cache(rows, clock)
    due.get(["oak"])
    clock.now += 299.5
    due.get(["oak"])                           # its changes: the whole read is 299.5 s old
    assert rows.reads[-1][:2] == ("since", ("oak",))
    clock.now += 0.6
    assert due.refresh_used() == 1 and rows.reads[-1] == ("whole", ("oak",))
    # Past the window nothing is read; nor are terms no longer held.
    clock.now += 11
    assert cache.refresh_used() == 0
    cache.get(["elm"])
    cache.clear()
    clock.now += 1
    assert cache.refresh_used() == 0
    # At most ahead_max_terms, the most recently queried.
    small = make_cache(rows, clock, ahead_max_terms=1)
    small.get(["oak"])
    small.get(["elm"])
    clock.now += 0.6
    assert small.refresh_used() == 1 and rows.reads[-1][:2] == ("since", ("elm",))
    # Read-ahead off: queried terms are not even tracked.
    off = make_cache(rows, clock, ahead_window_s=0)
    off.get(["oak", "elm"])
    clock.now += 0.6
    assert off.refresh_used() == 0 and len(off._used) == 0


def test_the_cache_keeps_at_most_max_postings_dropping_the_least_recently_used_terms():
    rows, clock = FakeRows(), Clock()
    for term, n in (("oak", 3), ("elm", 3), ("ash", 3), ("big", 9)):
        for i in range(n):
            rows.write(term, f"{term}{i}", b"1", clock.now)
    cache = make_cache(rows, clock, max_postings=7)
    cache.get(["oak"])
    cache.get(["elm"])
    cache.get(["oak"])          # oak is now the most recently used
    cache.get(["ash"])          # 9 > 7: elm goes
    assert len(cache) == 2 and cache.stats.evictions == 1
    reads = len(rows.reads)
    cache.get(["oak", "ash"])
    assert len(rows.reads) == reads  # both still held
    assert cache.get(["big"])["big"].postings == {f"big{i}": b"1" for i in range(9)}  # used, not kept
    assert len(cache) == 2 and cache.stats.postings_held <= 7


def test_concurrent_queries_for_one_term_wait_for_one_read_and_a_failed_read_is_retried():
    rows, clock = FakeRows(), Clock()
    rows.write("oak", "a", b"1", clock.now)
    release = threading.Event()
    calls = []

    def slow_whole(terms):
        calls.append(terms)
        release.wait(5)
        if len(calls) == 1:
            raise ConnectionError("HBase went away")
        return rows.read_whole(terms)

    cache = PostingsCache(slow_whole, rows.read_since, clock=clock, monotonic=clock)
    results, errors = [], []

    def query():
        try:
            results.append(cache.get(["oak"])["oak"].postings)
        except ConnectionError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=query) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    assert len(calls) == 1  # the others wait for the first reader
    release.set()
    for t in threads:
        t.join(5)
    assert len(errors) == 1                   # the reader whose read failed gets the error
    assert results == [{"a": b"1"}] * 3       # the waiters read again, once
    assert len(calls) == 2


def test_a_young_enough_entry_is_used_while_a_background_refresh_reads_its_term_again():
    rows, clock = FakeRows(), Clock()
    rows.write("oak", "a", b"1", clock.now)
    entered, release = threading.Event(), threading.Event()

    def slow_since(terms, min_ts):
        entered.set()
        release.wait(5)
        return rows.read_since(terms, min_ts)

    cache = PostingsCache(rows.read_whole, slow_since, refresh_s=1.0, clock=clock, monotonic=clock)
    cache.get(["oak"])
    clock.now += 0.6  # over half refresh_s: refresh_used reads it again; under refresh_s: still fresh
    ahead = threading.Thread(target=cache.refresh_used)
    ahead.start()
    assert entered.wait(5)
    started = time.monotonic()
    assert cache.get(["oak"])["oak"].postings == {"a": b"1"}
    assert cache.peek(["oak"])["oak"].postings == {"a": b"1"}
    assert time.monotonic() - started < 1.0  # neither waited for the read under way
    clock.now += 0.5  # now too old: a query waits for the read under way, and reads nothing itself
    waiter = threading.Thread(target=cache.get, args=(["oak"],))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()
    assert cache.peek(["oak"]) is None
    release.set()
    ahead.join(5)
    waiter.join(5)
    assert not waiter.is_alive()
    assert [r[0] for r in rows.reads] == ["whole", "since"]  # the waiter took the background read's result
    assert cache.peek(["oak"])["oak"].postings == {"a": b"1"}


def test_peek_reads_nothing_and_answers_only_for_terms_held_and_fresh():
    rows, clock = FakeRows(), Clock()
    rows.write("oak", "a", b"1", clock.now)
    cache = PostingsCache(rows.read_whole, rows.read_since, refresh_s=1.0, clock=clock, monotonic=clock)
    assert cache.peek(["oak"]) is None
    cache.get(["oak"])
    assert set(cache.peek(["oak", "oak"])) == {"oak"}
    assert cache.peek(["oak", "elm"]) is None   # one term not held
    clock.now += 1.5
    assert cache.peek(["oak"]) is None          # held, too old
    assert len(rows.reads) == 1


# -- the search service, end to end on HBase -------------------------------------------------------

def _export(cluster, url, term, tf, ts, length=10):
    cluster.serving(POSTINGS, [POSTINGS_FAMILY]).put({term: {f"p:{url}": encode_posting(Posting(tf, tuple(range(tf))))}}, ts)
    cluster.serving(DOCSTATS, [DOCSTATS_FAMILY]).put({url: {"s:length": str(length), "s:done": str(ts)}}, ts)


def _urls(reader, q):
    return {r["url"] for r in reader.search(parse_query(q), 1, 10)["results"]}


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_an_export_is_searchable_within_the_refresh_interval_and_a_straggler_at_the_whole_read(fresh_cluster):
    cluster = fresh_cluster
    application.install(cluster)  # the index's tables (results' details come from repository)
    now_ts = lambda: compose(int(time.time() * 1000))  # noqa: E731 - what an export's start_ts looks like
    _export(cluster, "http://a.test/", "quokka", 2, now_ts())
    settings = load_search_settings(postings_refresh_s=0.3, change_margin_s=5.0, full_reload_s=6.0, stats_refresh_s=3600)
    reader = IndexReader(cluster, settings).start()
    try:
        assert _urls(reader, "quokka") == {"http://a.test/"}
        assert set(reader.corpus.docs) == {"http://a.test/"}
        _export(cluster, "http://b.test/", "quokka", 1, now_ts())
        # A straggler: written now with a timestamp older than the margin allows.
        _export(cluster, "http://c.test/", "quokka", 1, now_ts() - compose(60_000))
        time.sleep(0.4)
        assert _urls(reader, "quokka") == {"http://a.test/", "http://b.test/"}
        reader.refresh()  # reads only the changed docstats rows: b's, not the straggler's
        assert set(reader.corpus.docs) == {"http://a.test/", "http://b.test/"}
        time.sleep(6.0)
        assert _urls(reader, "quokka") == {"http://a.test/", "http://b.test/", "http://c.test/"}
        reader.refresh()  # full_reload_s passed: a whole scan
        assert set(reader.corpus.docs) == {"http://a.test/", "http://b.test/", "http://c.test/"}
        # A removal (tombstones at a newer sequence) leaves the results within the interval,
        # and the statistics at the next refresh.
        cluster.serving(POSTINGS, [POSTINGS_FAMILY]).put({"quokka": {"p:http://a.test/": b""}}, now_ts())
        cluster.serving(DOCSTATS, [DOCSTATS_FAMILY]).put({"http://a.test/": {"s:length": b""}}, now_ts())
        time.sleep(0.4)
        assert _urls(reader, "quokka") == {"http://b.test/", "http://c.test/"}
        before = reader.corpus
        reader.refresh()
        assert set(reader.corpus.docs) == {"http://b.test/", "http://c.test/"}
        assert reader.corpus.avg_len == 10 and reader.corpus.weights is not before.weights
        unchanged = reader.corpus
        reader.refresh()  # nothing changed: the same snapshot objects (cached scores stay valid)
        assert reader.corpus.docs is unchanged.docs and reader.corpus.weights is unchanged.weights
    finally:
        reader.close()


def test_a_result_text_is_never_read_from_before_the_export_it_is_shown_for(fresh_cluster):
    """Result details come from a snapshot shared for postings_refresh_s; a document exported
    after that snapshot began gets a fresh one (its text is cached per export)."""
    cluster = fresh_cluster
    application.install(cluster)
    url = "http://a.test/"

    def publish(text):
        with cluster.begin() as txn:
            txn.set(REPOSITORY, url, DOC_PARSED, json.dumps({"title": "Quokka", "text": text}))
        _export(cluster, url, "quokka", 1, cluster.oracle.get_timestamp())  # export starts after

    def snippet():
        [result] = reader.search(parse_query("quokka"), 1, 10)["results"]
        return result["snippet"]

    publish("the first quokka text")
    reader = IndexReader(cluster, load_search_settings(postings_refresh_s=600, stats_refresh_s=3600)).start()
    try:
        assert "first" in snippet()
        publish("a second quokka text")
        reader.refresh()  # the statistics now carry the new export's sequence
        assert "second" in snippet()
    finally:
        reader.close()


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_cluster_sizes_in_use_are_read_again_before_they_expire(fresh_cluster):
    """A result's cluster size, once shown, is read again by refresh_used when it is half
    details_cache_s old, so a result in use never waits for a read of it; one nobody shows
    is left to expire."""
    from caffeine.index.schema import DUPS, S_FINGERPRINT, member_column

    cluster = fresh_cluster
    application.install(cluster)
    url, fp = "http://a.test/", "f00d"

    def members(*urls):
        with cluster.begin() as txn:
            for member in urls:
                txn.set(DUPS, fp, member_column(member), "0")

    members(url, "http://copy.test/")
    with cluster.begin() as txn:
        txn.set(REPOSITORY, url, DOC_PARSED, json.dumps({"title": "Quokka", "text": "a quokka"}))
    ts = cluster.oracle.get_timestamp()
    _export(cluster, url, "quokka", 1, ts)
    cluster.serving(DOCSTATS, [DOCSTATS_FAMILY]).put({url: {S_FINGERPRINT: fp}}, ts)
    # Read-ahead on, but its thread's first pass is postings_refresh_s / 2 away: called here.
    settings = load_search_settings(details_cache_s=4.0, postings_refresh_s=600, stats_refresh_s=3600)
    reader = IndexReader(cluster, settings).start()
    details = reader.searcher.details
    try:
        [result] = reader.search(parse_query("quokka"), 1, 10)["results"]
        assert result["cluster_size"] == 2
        assert details.refresh_used() == 0          # just read
        members("http://third.test/")
        time.sleep(2.2)                             # over half details_cache_s
        assert details.refresh_used() == 1
        assert details._sizes.get(fp) == 3          # at hand: the next result shows it unread
        time.sleep(2.2)                             # past details_cache_s since the search
        assert details._sizes.get(fp) == 3
    finally:
        reader.close()


def _answer(reader, q, **kw):
    """A search answer without its timings (which differ between two identical answers)."""
    out = reader.search(parse_query(q), 1, 10, **kw)
    return None if out is None else {k: v for k, v in out.items() if k not in ("took_ms", "stats_age_s")}


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_a_repeated_query_is_ranked_once_until_its_postings_or_the_statistics_change(fresh_cluster):
    cluster = fresh_cluster
    application.install(cluster)
    now_ts = lambda: compose(int(time.time() * 1000))  # noqa: E731
    _export(cluster, "http://a.test/", "quokka", 2, now_ts())
    _export(cluster, "http://a.test/", "walrus", 1, now_ts())
    settings = load_search_settings(postings_refresh_s=0.3, change_margin_s=5.0, stats_refresh_s=3600)
    reader = IndexReader(cluster, settings).start()
    ranked = lambda: {k: v for k, v in reader.stats()["search_cache"].items() if k.startswith("ranked_")}  # noqa: E731
    try:
        assert _answer(reader, "quokka", at_hand_only=True) is None  # never ranked: nothing at hand
        first = _answer(reader, "quokka")
        assert [r["url"] for r in first["results"]] == ["http://a.test/"]
        assert ranked()["ranked_misses"] == 1
        assert _answer(reader, "quokka") == first
        assert _answer(reader, "quokka", at_hand_only=True) == first
        assert ranked()["ranked_hits"] == 2
        # The service's way: at hand first, else a search that may read. A query whose lists
        # are held but which was never ranked counts one miss, not two.
        _answer(reader, "walrus")
        assert ranked() == {"ranked_held": 2, "ranked_hits": 2, "ranked_misses": 2}
        assert _answer(reader, "quokka walrus", at_hand_only=True) is None
        assert _answer(reader, "quokka walrus")["total"] == 1
        assert ranked() == {"ranked_held": 3, "ranked_hits": 2, "ranked_misses": 3}
        # Another term's change leaves the answer in place.
        _export(cluster, "http://z.test/", "walrus", 1, now_ts())
        time.sleep(0.4)
        assert _answer(reader, "quokka") == first and ranked()["ranked_hits"] == 3
        # A new posting of the term: the next query after the refresh interval ranks again,
        # and sees it. Its document is newer than the statistics (its docstats are read at
        # query time), so that answer is not kept.
        _export(cluster, "http://b.test/", "quokka", 1, now_ts())
        time.sleep(0.4)
        second = _answer(reader, "quokka")
        assert [r["url"] for r in second["results"]] == ["http://a.test/", "http://b.test/"]
        assert _answer(reader, "quokka") == second
        assert ranked()["ranked_hits"] == 3
        # New statistics: ranked again, once, then reused.
        reader.refresh()
        third = _answer(reader, "quokka")
        assert [r["url"] for r in third["results"]] == ["http://a.test/", "http://b.test/"]
        assert (second["documents"], third["documents"]) == (1, 3)
        misses = ranked()["ranked_misses"]
        assert _answer(reader, "quokka") == third
        assert ranked() == {**ranked(), "ranked_misses": misses}
        assert ranked()["ranked_hits"] == 4
        # A removal is seen within the interval too.
        cluster.serving(POSTINGS, [POSTINGS_FAMILY]).put({"quokka": {"p:http://a.test/": b""}}, now_ts())
        time.sleep(0.4)
        assert [r["url"] for r in _answer(reader, "quokka")["results"]] == ["http://b.test/"]
    finally:
        reader.close()
