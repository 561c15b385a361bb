"""Cold queries (caffeine/search/cold.py): a query's first answer from the heads of its terms'
impact-ordered rows is exactly the answer of the whole posting lists, or none is given.

Against the real HBase: the web of ``support.search_web`` is fed through the whole observer
chain, then every query is asked of a fresh ``IndexReader`` (nothing in memory) with tiny heads
(so that common terms are cold and partial) and of one that reads whole lists; the results must
be the same, to the score. Also: the impacts table holds exactly the postings table's live
postings, after re-exports that change levels and a page that leaves the index.
"""

from __future__ import annotations

import dataclasses
import random
import uuid

import pytest

from caffeine.index import SIMILARITY, anchor_record
from caffeine.index import impacts
from caffeine.index.impacts import impact_level, length_ratio, split_impact_qualifier, unread_bound
from caffeine.index.schema import (
    DOCSTATS, DOCSTATS_FAMILY, IMPACTS, IMPACTS_FAMILY, POSTINGS, POSTINGS_FAMILY, S_IMPACTS, counted_families,
)
from caffeine.observers.export import plan_export
from caffeine.percolator import connect
from support import reference_scoring
from support.session import SESSION_PREFIX
from support.search_web import build_web, index_web, page

import caffeine.search.cold as cold_module
import caffeine.search.cold_reads as cold_reads_module
import caffeine.search.ranking as ranking_module
import caffeine.search.searcher as search_module
from caffeine.search.reader import IndexReader
from caffeine.search.cold import common_order
from caffeine.search.query import parse_query
from caffeine.search.settings import SearchSettings

QUERIES = [
    "marmot", "amber", "cedar moss", "walrus marmot", "quokka", "granite heath inlet", "zanzibar",
    "amber -basalt", '"cedar dune"', "site:web.test marmot", "sage willow yarrow", "oak", "espresso marmot",
    "nonexistentword", "kelp -nonexistentword", "reed umber",
]


def test_the_unread_bound_holds_for_any_document_and_corpus():
    """c(t, d) <= idf·(k1+1)·R·level/SCALE for random postings, lengths, votes and corpus means."""
    rng = random.Random(7)
    for _ in range(20_000):
        counts = (rng.randint(0, 40), rng.randint(0, 5), rng.randint(0, 30), rng.randint(0, 4))
        if not any(counts):
            continue
        lengths = (rng.randint(max(1, counts[0]), 20_000), rng.randint(counts[1], 40),
                   rng.randint(counts[2], 200), rng.randint(counts[3], 12))
        votes = rng.choice([0, 1, 3, 40, 10_000])
        averages = (rng.uniform(1, 30_000), rng.uniform(0.5, 60), rng.uniform(0.5, 300), rng.uniform(0.5, 15))
        n = rng.randint(10, 100_000)
        df = rng.randint(1, n)
        score = reference_scoring.bm25f(counts, lengths, averages, df, n) * reference_scoring.prior(votes)
        # R: this document's own ratio (the tightest a corpus holding it can have), or more.
        ratio = length_ratio(lengths, averages) * rng.choice([1.0, 1.0, 1.5])
        bound = unread_bound(SIMILARITY.term_weight(df, n), ratio, impact_level(counts, lengths, votes))
        assert score <= bound * (1 + 1e-12), (counts, lengths, votes, averages)


def _live(cluster, table, family):
    out = {}
    for row, cells in cluster.serving(table, [family], create=False).scan(batch_size=256):
        out[row] = cells
    return out


def _impacts_equal_postings(cluster):
    postings = _live(cluster, POSTINGS, POSTINGS_FAMILY)
    impacts = _live(cluster, IMPACTS, IMPACTS_FAMILY)
    as_postings = {}
    for row, cells in impacts.items():
        for column, value in cells.items():
            level, url = split_impact_qualifier(column.partition(":")[2])
            assert url not in as_postings.get(row, {}), f"{url} twice in impacts[{row!r}]"
            as_postings.setdefault(row, {})[f"{POSTINGS_FAMILY}:{url}"] = value
    assert as_postings == postings


@pytest.fixture(scope="module", autouse=True)
def references_of_this_web():
    """Reference means near this small web's (pages of ~20 words): the bound is valid for any,
    tight near the corpus's own, and the test wants the cold path taken, not only given up."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(impacts, "REFERENCE_AVERAGES", (20.0, 2.0, 2.0, 1.0))
        yield


@pytest.fixture
def heads_path(monkeypatch):
    """Cold queries of several words read heads, never the rows' intersection: for the tests
    of the heads' reads, pruning and proofs (which the intersection would skip)."""
    monkeypatch.setattr(cold_module, "COMMON_EXPECTED", -1)


@pytest.fixture(scope="module")
def indexed(hbase_store):
    sub_prefix = f"cold{uuid.uuid4().hex[:6]}_"
    cluster = connect(table_prefix=SESSION_PREFIX + sub_prefix)
    try:
        index_web(cluster, build_web())
        yield cluster
    finally:
        cluster.close()
        for table in hbase_store.list_tables():
            if table.startswith(sub_prefix):
                hbase_store.drop_table(table)


def _search(cluster, width: int, text: str, page_no: int = 1, size: int = 5):
    reader = IndexReader(cluster, SearchSettings(stats_refresh_s=3600, cold_width=width))
    reader.refresh()
    try:
        return reader.search(parse_query(text), page_no, size), dict(reader.cold_counts)
    finally:
        reader.close()


def _rank(cluster, width: int, text: str, limit: int):
    """The best ``limit`` hits (url, score, all words, words matched) and the document
    frequencies, from a fresh reader; and its cold counts."""
    reader = IndexReader(cluster, SearchSettings(stats_refresh_s=3600, cold_width=width))
    reader.refresh()
    try:
        matched = reader.rank(parse_query(text), limit)
        hits = [(mh.hit.url, mh.score, mh.all_terms, mh.hit.matched) for mh in matched.hits]
        return (hits, matched.doc_freq), dict(reader.cold_counts)
    finally:
        reader.close()


def _ranked(result):
    return [(r["url"], r["score"], r["all_terms"], r["matched_terms"]) for r in result["results"]]


def test_cold_answers_equal_whole_list_answers(indexed):
    answered = deeper = 0
    for text in QUERIES:
        for page_no in (1, 2):
            whole, counts = _search(indexed, 0, text, page_no)
            assert counts == {"answered": 0, "given_up": 0, "deeper": 0, "intersected": 0}
            for width in (2, 4, 16):
                cold, counts = _search(indexed, width, text, page_no)
                assert _ranked(cold) == _ranked(whole), (text, page_no, width)
                assert cold["doc_freq"] == whole["doc_freq"]
                deeper += counts["deeper"]
                if counts["answered"]:
                    answered += 1
                    assert cold["total_exact"] is False
                else:
                    assert (cold["total"], cold["total_exact"]) == (whole["total"], whole["total_exact"])
    # The path must actually be taken, not always given up, and deeper heads tried too.
    assert answered >= 5 and deeper >= 1


@pytest.fixture
def qualifiers_weigh(monkeypatch):
    """A qualified name's qualifier weighs 3 (whatever ``Similarity.qualifier_weight`` is):
    every weight the cold path bounds with comes from ``ranking.term_multipliers``."""
    monkeypatch.setattr(ranking_module, "SIMILARITY", dataclasses.replace(SIMILARITY, qualifier_weight=3.0))


QUALIFIED = ["walrus.marmot", "marmot::walrus", "cedar.moss", "granite.heath::inlet", "amber::reed umber",
             "sage.willow -basalt"]


def test_cold_answers_of_qualified_names_equal_whole_list_answers(indexed, qualifiers_weigh):
    answered = 0
    for text in QUALIFIED:
        assert parse_query(text).qualifiers
        whole, _ = _search(indexed, 0, text)
        for width in (2, 4, 16):
            cold, counts = _search(indexed, width, text)
            assert _ranked(cold) == _ranked(whole), (text, width)
            answered += counts["answered"]
    assert answered >= 3


def test_a_qualified_name_is_not_answered_with_its_plain_words_ranking(indexed, qualifiers_weigh):
    """The ranking cache tells ``walrus.marmot`` from ``walrus marmot``: the same words, but
    the qualifier weighs more."""
    reader = IndexReader(indexed, SearchSettings(stats_refresh_s=3600, cold_width=0))
    reader.refresh()
    try:
        plain = reader.rank(parse_query("walrus marmot"), 10)
        qualified = reader.rank(parse_query("walrus.marmot"), 10)
    finally:
        reader.close()
    fresh, _ = _rank(indexed, 0, "walrus.marmot", 10)
    assert [(mh.hit.url, mh.score) for mh in qualified.hits] == [(url, score) for url, score, _, _ in fresh[0]]
    assert [mh.score for mh in qualified.hits] != [mh.score for mh in plain.hits]


def test_a_common_term_is_answered_from_its_head(indexed):
    cold, counts = _search(indexed, 8, "marmot")
    whole, _ = _search(indexed, 0, "marmot")
    assert counts["answered"] == 1 and counts["given_up"] == 0
    assert _ranked(cold) == _ranked(whole)
    assert cold["total"] == whole["total"] and cold["doc_freq"] == whole["doc_freq"]


def test_impacts_hold_exactly_the_live_postings_through_re_exports(hbase_store):
    sub_prefix = f"coldre{uuid.uuid4().hex[:6]}_"
    cluster = connect(table_prefix=SESSION_PREFIX + sub_prefix)
    try:
        web = build_web(fillers=12, seed=5)
        index_web(cluster, web)
        _impacts_equal_postings(cluster)
        # Changed text (levels move), a page gone, and new anchor text for a page.
        urls = sorted(web)
        changed = dict([page(urls[0], "Marmot marmot", "marmot marmot marmot cedar"),
                        page(urls[1], "gone", "", status=404),
                        page(urls[2], "Linker", "links", links=[(urls[3], "marmot walrus quokka")])])
        index_web(cluster, changed)
        _impacts_equal_postings(cluster)
        # A document whose docstats lacks s:impacts (exported before impacts existed): heads
        # could miss its postings, so no query is answered from them.
        cold, counts = _search(cluster, 2, "marmot")
        assert counts["answered"] + counts["given_up"] == 1
        docstats = cluster.serving(DOCSTATS, [DOCSTATS_FAMILY], create=False)
        some = next(row for row, cells in docstats.scan() if cells.get(S_IMPACTS))
        docstats.put({some: {S_IMPACTS: b""}}, ts=2**62)
        again, counts = _search(cluster, 2, "marmot")
        assert counts == {"answered": 0, "given_up": 0, "deeper": 0, "intersected": 0}
        assert _ranked(again) == _ranked(cold)
    finally:
        cluster.close()
        for table in hbase_store.list_tables():
            if table.startswith(sub_prefix):
                hbase_store.drop_table(table)


def _write_documents(cluster, docs) -> None:
    """``(url, title, text, {linking page: anchor text})`` documents written straight into the
    serving tables (created as export creates them: ``impacts`` counted) with the export
    observer's own pure planning, as ``bench/bench_cold.py`` does."""
    _write_into({name: cluster.serving(name, [family], counted=counted_families(name)) for name, family in
                 ((POSTINGS, POSTINGS_FAMILY), (IMPACTS, IMPACTS_FAMILY), (DOCSTATS, DOCSTATS_FAMILY))}, docs)


def _write_into(tables, docs) -> None:
    """``_write_documents`` into ``{table name: ServingTable}`` (created here if need be)."""
    for table in tables.values():
        table.create()
    pending: dict[str, dict] = {name: {} for name in tables}
    for i, (url, title, text, links) in enumerate(docs):
        doc = {"title": title, "text": text, "canonical": None, "length": len(text.split())}
        _, rows, impact_rows, stats = plan_export(url, doc, f"{i:016x}", None, 0, 1_000 + i, anchor_record(links))
        for name, new in ((POSTINGS, rows), (IMPACTS, impact_rows), (DOCSTATS, {url: stats})):
            for row, cells in new.items():
                pending[name].setdefault(row, {}).update(cells)
    for name, rows in pending.items():
        tables[name].put(rows, ts=1_000_000)


def _write_generated_index(cluster, count: int, seed: int) -> list[str]:
    """``count`` generated documents (``_write_documents``): a Zipf-like vocabulary of 400
    words and bodies of 20-300 words, so that two- and three-word queries of common words have
    well over 50 documents holding every word, and rare words have short lists. Returns the
    vocabulary."""
    rng = random.Random(seed)
    vocab = [f"w{i:03d}x" for i in range(400)]
    weights = [1.0 / (rank + 1) for rank in range(len(vocab))]
    docs = []
    for i in range(count):
        text = " ".join(rng.choices(vocab, weights, k=rng.randrange(20, 300)))
        title = " ".join(rng.choices(vocab, weights, k=2))
        links = {f"http://site{rng.randrange(9)}.test/p{j}": rng.choice(vocab) for j in range(rng.choice((0, 0, 1, 3)))}
        docs.append((f"http://gen.test/s{i % 7}/p{i}.html", title, text, links))
    _write_documents(cluster, docs)
    return vocab


def test_a_page_filled_past_the_rarest_words_list_is_proved_against_the_whole_heads(hbase_store):
    """The rarest word's whole list as the only candidates proves only its all-words
    documents: a page that the ranked fallback fills must also beat the documents the other
    words' heads hold outside that list, which can score far above the heads' unread bound.

    Here the rare word's 6 documents hold no common word; the common word's 4 strong
    documents are in its head, 30 weak ones not. The whole lists rank the strong ones first;
    an answer from the rare word's documents alone would rank the rare ones first.
    """
    sub_prefix = f"coldfb{uuid.uuid4().hex[:6]}_"
    cluster = connect(table_prefix=SESSION_PREFIX + sub_prefix)
    rng = random.Random(3)
    filler = [f"f{i:03d}x" for i in range(300)]
    docs = []
    for _ in range(6):
        docs.append(("f001x f002x", " ".join(rng.choices(filler, k=80)) + " rarew", {}))
    for _ in range(4):
        docs.append(("commw", "commw commw commw " + " ".join(rng.choices(filler, k=5)),
                     {f"http://s{j}.test/": "commw" for j in range(20)}))
    for _ in range(30):
        docs.append(("f003x", " ".join(rng.choices(filler, k=300)) + " commw", {}))
    for _ in range(150):
        docs.append(("f004x", " ".join(rng.choices(filler, k=100)), {}))
    try:
        _write_documents(cluster, [(f"http://gen.test/p{i}.html", *doc) for i, doc in enumerate(docs)])
        for limit in (3, 5):
            whole, counts = _rank(cluster, 0, "rarew commw", limit)
            assert [hit[0] for hit in whole[0][:3]] == [f"http://gen.test/p{i}.html" for i in (6, 7, 8)]
            for width in (10, 12):
                cold, counts = _rank(cluster, width, "rarew commw", limit)
                assert cold == whole, (limit, width, counts)
    finally:
        cluster.close()
        for table in hbase_store.list_tables():
            if table.startswith(sub_prefix):
                hbase_store.drop_table(table)


def test_pruned_and_rarest_word_answers_equal_whole_list_answers(heads_path, hbase_store, monkeypatch, qualifiers_weigh):
    """The two ways a cold query reads fewer candidates (caffeine.search.cold.prune: the rest of the heads
    pruned by the exact scores of the best-shown ones; the rarest word's whole list as the
    only candidates) give the whole lists' answer, to the score, and are both taken; also
    for qualified names, whose qualifier weighs more."""
    sub_prefix = f"coldpr{uuid.uuid4().hex[:6]}_"
    cluster = connect(table_prefix=SESSION_PREFIX + sub_prefix)
    taken = {"pruned": 0, "rarest": 0}
    real_prune, real_answer = cold_reads_module.prune, cold_reads_module.answer

    def prune(query, planned, *args):
        kept, left_out = real_prune(query, planned, *args)
        taken["pruned"] += len(kept) < len(planned.candidates)
        return kept, left_out

    def answer(query, heads, whole, whole_raw, candidates, *args):
        matched = real_answer(query, heads, whole, whole_raw, candidates, *args)
        source = [t for t in query.terms if (t in heads and heads[t].complete) or t in whole]
        taken["rarest"] += matched is not None and bool(source) and len(candidates) < sum(
            len(h.postings) for h in heads.values())
        return matched

    monkeypatch.setattr(cold_reads_module, "prune", prune)
    monkeypatch.setattr(cold_reads_module, "answer", answer)
    # Reference means near this corpus's (bodies of ~160 words, 2-word titles, 1-word anchors,
    # 3 URL words), so that heads of a tenth of a list often prove their answers.
    monkeypatch.setattr(impacts, "REFERENCE_AVERAGES", (160.0, 2.0, 1.0, 3.0))
    try:
        vocab = _write_generated_index(cluster, 1500, seed=11)
        rng = random.Random(5)
        common, rare = vocab[2:30], vocab[150:]
        texts = [" ".join(rng.sample(common, rng.choice((2, 3)))) for _ in range(12)]
        texts += [f"{rng.choice(rare)} {' '.join(rng.sample(common, 2))}" for _ in range(6)]
        texts += [".".join(rng.sample(common, 2)) for _ in range(4)] + [f"{rng.choice(rare)}::{rng.choice(common)}"]
        answered = 0
        for text in texts:
            for limit in (10, 20):
                whole, counts = _rank(cluster, 0, text, limit)
                for width in (150, 300):
                    cold, counts = _rank(cluster, width, text, limit)
                    assert cold == whole, (text, limit, width)
                    answered += counts["answered"]
        assert answered >= 10
        assert taken["pruned"] >= 1 and taken["rarest"] >= 1, taken
    finally:
        cluster.close()
        for table in hbase_store.list_tables():
            if table.startswith(sub_prefix):
                hbase_store.drop_table(table)


def test_intersected_answers_equal_whole_list_answers(hbase_store, monkeypatch):
    """Queries of several cold words with few documents holding them all read those
    documents as the intersection of the words' rows (inside HBase): their pages equal the
    whole lists', to the score, with the all-words total exact; phrases and site filters
    apply to them; when more documents hold every word than an intersection returns
    (``COMMON_MAX``), the heads answer instead, and the same."""
    sub_prefix = f"coldin{uuid.uuid4().hex[:6]}_"
    cluster = connect(table_prefix=SESSION_PREFIX + sub_prefix)
    monkeypatch.setattr(impacts, "REFERENCE_AVERAGES", (160.0, 2.0, 1.0, 3.0))
    # At 1,500 documents, COMMON_SHARE of them is a few dozen: this test wants the path taken.
    monkeypatch.setattr(cold_module, "COMMON_SHARE", 0.5)
    try:
        vocab = _write_generated_index(cluster, 1500, seed=12)
        rng = random.Random(6)
        common, middle = vocab[3:25], vocab[25:120]
        texts = [" ".join(rng.sample(middle, rng.choice((2, 3)))) for _ in range(8)]
        texts += [f"{rng.choice(middle)} {rng.choice(common)}" for _ in range(4)]
        texts += [f'"{vocab[3]} {vocab[4]}" {rng.choice(middle)}', f"site:gen.test {rng.choice(middle)} {vocab[5]}"]
        outcomes = []
        for text in texts:
            for limit in (10, 20):
                whole, _ = _rank(cluster, 0, text, limit)
                cold, counts = _rank(cluster, 150, text, limit)
                assert cold == whole, (text, limit, counts)
                outcomes.append(counts["intersected"])
        assert sum(outcomes) >= len(texts), outcomes
        reader = IndexReader(cluster, SearchSettings(stats_refresh_s=3600, cold_width=150))
        reader.refresh()
        try:
            text = f"{middle[0]} {middle[1]}"
            matched = reader.rank(parse_query(text), 10)
            assert reader.cold_counts["intersected"] == 1
            full = IndexReader(cluster, SearchSettings(stats_refresh_s=3600, cold_width=0))
            full.refresh()
            try:
                assert matched.strict_total == full.rank(parse_query(text), 10).strict_total > 10   # exact
            finally:
                full.close()
        finally:
            reader.close()
        monkeypatch.setattr(cold_reads_module, "COMMON_MAX", 5)
        for text in texts[:6]:
            whole, _ = _rank(cluster, 0, text, 10)
            cold, counts = _rank(cluster, 150, text, 10)
            assert cold == whole and counts["intersected"] == 0, (text, counts)
    finally:
        cluster.close()
        for table in hbase_store.list_tables():
            if table.startswith(sub_prefix):
                hbase_store.drop_table(table)


def test_common_order_intersects_only_all_cold_words_seldom_together():
    n = 60_000
    assert common_order(parse_query("aa bb cc"), {"aa": 12_000, "bb": 3_000, "cc": 30_000}, n) == ["bb", "aa", "cc"]
    assert common_order(parse_query("aa bb"), {"aa": 20_000, "bb": 20_000}, n) is None      # ~6,700 expected
    assert common_order(parse_query("aa bb"), {"aa": 9_000, "bb": 9_000}, n) == ["aa", "bb"]   # 1,350: 2.25%
    assert common_order(parse_query("aa bb"), {"aa": 4_000, "bb": 4_000}, 20_000) is None   # 800: 4%
    assert common_order(parse_query("aa bb"), {"aa": 2_000, "bb": 2_000}, 20_000) == ["aa", "bb"]
    assert common_order(parse_query("aa"), {"aa": 20}, n) is None                             # one word
    assert common_order(parse_query("aa bb"), {"aa": 20}, n) is None                          # bb is warm
    assert common_order(parse_query("aa bb -cc"), {"aa": 20, "bb": 30, "cc": 5}, n) is None   # an exclusion
    assert common_order(parse_query('"aa bb"'), {"aa": 20, "bb": 30}, n) == ["aa", "bb"]


def _page(matched):
    """A ``Match``'s results as compared: (url, score) in rank order."""
    return [(mh.hit.url, mh.score) for mh in matched.hits]


def _memory_index(docs):
    """The serving tables of ``docs`` (``(title, text)``) on the in-memory store, written as
    ``_write_documents`` writes them: for the searcher's own decisions, which need no HBase."""
    from caffeine.percolator.serving import ServingTable
    from caffeine.storage.memory import MemoryStore

    store = MemoryStore()
    tables = {name: ServingTable(store, name, [family], counted=counted_families(name)) for name, family in
              ((POSTINGS, POSTINGS_FAMILY), (IMPACTS, IMPACTS_FAMILY), (DOCSTATS, DOCSTATS_FAMILY))}
    _write_into(tables, [(f"http://mem.test/p{i}.html", title, text, {}) for i, (title, text) in enumerate(docs)])
    return tables


def _memory_searcher(tables, width: int):
    from caffeine.search.statistics import CorpusStatistics

    settings = SearchSettings(stats_refresh_s=3600, cold_width=width)
    statistics = CorpusStatistics(tables[DOCSTATS], settings)
    statistics.refresh()
    return search_module.Searcher(tables[POSTINGS], tables[IMPACTS], statistics, None, settings)


def _cold_and_whole(searcher, text: str, limit: int = 10):
    """The cold path's match of ``text`` (every posting list dropped first) and the whole
    lists' match of it."""
    whole = searcher._match(parse_query(text), searcher.statistics.current, limit)
    searcher.drop_postings()
    return searcher.rank(parse_query(text), limit), whole


def _spy_lookups(searcher) -> list[tuple[bytes, str]]:
    """The (row, column) pairs the searcher's lookups by URL ask for, as they are asked."""
    asked: list[tuple[bytes, str]] = []
    real = searcher.postings.get_cells

    def counting(wanted):
        asked.extend((row, column) for row, columns in wanted.items() for column in columns)
        return real(wanted)

    searcher.postings.get_cells = counting
    return asked


def test_heads_are_never_read_deeper_than_the_store_summarizes(heads_path, monkeypatch):
    """A cold query whose heads keep failing to prove its answer is given up (read whole)
    before its next deeper read would pass the store's prefix limit, which the server refuses;
    and cold reads stay on for the queries after it."""
    monkeypatch.setattr(cold_reads_module, "MAX_PREFIX", 24)
    rng = random.Random(1)
    # Two words, each on 300 equal documents: flat scores that no head proves.
    docs = [("t", " ".join(rng.choices(["flat", "even", "x1", "x2"], k=20))) for _ in range(400)]
    searcher = _memory_searcher(_memory_index(docs), 2)
    try:
        matched, whole = _cold_and_whole(searcher, "flat even")
        assert _page(matched) == _page(whole)
        assert (searcher.cold_counts["given_up"], searcher.cold_counts["deeper"]) == (1, 1), searcher.cold_counts
        assert searcher.cold.enabled
    finally:
        searcher.close()


def test_a_failed_head_read_gives_up_that_query_only():
    """A head read that fails for another reason than a missing table (a timeout, an
    overloaded server) sends that query to the whole lists, and leaves cold reads on."""
    from caffeine.storage import StorageUnavailable

    rng = random.Random(2)
    docs = [("t", " ".join(rng.choices(["flat", "even", "x1", "x2"], k=20))) for _ in range(200)]
    searcher = _memory_searcher(_memory_index(docs), 4)
    real = searcher.impacts.read_prefix
    failures = [StorageUnavailable("thrift2 did not answer")]

    def flaky(*args, **kwargs):
        if failures:
            raise failures.pop()
        return real(*args, **kwargs)

    searcher.impacts.read_prefix = flaky
    try:
        assert searcher.rank(parse_query("flat"), 10).hits
        assert searcher.cold.enabled
        searcher.drop_postings()
        searcher.rank(parse_query("flat"), 10)
        assert searcher.cold_counts["answered"] + searcher.cold_counts["given_up"] >= 1
    finally:
        searcher.close()


def test_a_deeper_try_reads_by_url_only_what_earlier_tries_did_not(heads_path, monkeypatch):
    """When a query's heads are read again deeper, the postings its earlier tries read by URL
    are not read again (each term's column is asked once per query), and the answer is still
    the whole lists'."""
    monkeypatch.setattr(cold_reads_module, "MAX_PREFIX", 10_000)
    rng = random.Random(1)
    docs = [("t", " ".join(rng.choices(["flat", "even", "x1", "x2"], k=20))) for _ in range(400)]
    searcher = _memory_searcher(_memory_index(docs), 2)
    asked = _spy_lookups(searcher)
    try:
        matched, whole = _cold_and_whole(searcher, "flat even")
        assert _page(matched) == _page(whole)
        assert searcher.cold_counts["deeper"] >= 1 and asked
        assert len(asked) == len(set(asked)), "a posting read by URL twice in one query"
    finally:
        searcher.close()


def test_only_the_words_holding_most_of_the_bound_are_read_deeper():
    """``deeper_terms``: of a failed proof's partial heads, those whose unread bound is at
    least half the largest; not a word on every document (idf near 0), nor one whose head is
    its whole row."""
    from caffeine.search.cold import Head, deeper_terms
    from caffeine.search.ranking import DocStats, corpus_weights

    from caffeine.index.impacts import IMPACT_FORMAT

    weights = corpus_weights({f"u{i}": DocStats(100, impacts=IMPACT_FORMAT) for i in range(100)})
    rare = Head({}, 40_000, df=10, complete=False)      # high idf, high level: most of B
    near = Head({}, 30_000, df=12, complete=False)      # close behind
    common = Head({}, 40_000, df=90, complete=False)    # low idf: a small part of B
    everywhere = Head({}, 50_000, df=100, complete=False)
    whole = Head({}, 50_000, df=5, complete=True)
    heads = {"rare": rare, "near": near, "common": common, "everywhere": everywhere, "whole": whole}
    ratio = cold_reads_module.corpus_ratio(weights)
    tails = {t: h.tail(100, ratio) for t, h in heads.items()}
    assert tails["whole"] == 0.0 and tails["everywhere"] < tails["common"] / 10
    assert tails["near"] >= tails["rare"] / 2 > tails["common"] > 0.0, tails
    query = parse_query("rare near common everywhere whole")
    assert deeper_terms(query, heads, weights, 100) == ["rare", "near"]
    # Only query words count: an excluded word's head bounds nothing.
    assert deeper_terms(parse_query("common -rare"), heads, weights, 100) == ["common"]


def test_a_deeper_try_rereads_only_the_heads_it_deepens(heads_path):
    """A query of a rare and a very common word whose heads fail to prove the answer reads
    the rare word's head deeper and keeps the common word's, and still answers exactly."""
    rng = random.Random(3)
    docs = [("t", " ".join(rng.choices(["rare"] * 1 + ["x1", "x2", "x3"] * 10, k=20) + ["common"]))
            for _ in range(400)]
    searcher = _memory_searcher(_memory_index(docs), 2)
    reads: list[tuple[bytes, int]] = []
    real = searcher.impacts.read_prefix

    def counting(rows, limit, since=None):
        rows = list(rows)
        reads.extend((row, limit) for row in rows)
        return real(rows, limit, since)

    searcher.impacts.read_prefix = counting
    try:
        matched, whole = _cold_and_whole(searcher, "rare common")
        assert _page(matched) == _page(whole)
        assert searcher.cold_counts["deeper"] >= 1, searcher.cold_counts
        # A query of several words reads its words' narrow heads first (the width here, 2,
        # is under NARROW): the common word's is kept, the rare word's read deeper.
        assert [limit for row, limit in reads if row == b"common"] == [2], reads
        assert [limit for row, limit in reads if row == b"rare"][:2] == [2, 8], reads
    finally:
        searcher.close()


def test_a_warm_words_candidates_grow_by_tries_not_by_a_head_read_whole(monkeypatch):
    """A warm word's best documents among the candidates grow ``DEEPER``-fold per try, also
    when a cold head is read whole (its width then its row's length, which can be huge)."""
    monkeypatch.setattr(cold_reads_module, "MAX_PREFIX", 100_000)
    # "flat" once on 150 equal documents: equal scores, which no partial head proves, so its
    # head is read deeper until it is read whole.
    docs = [("t", " ".join(["flat" if i < 150 else "x1", "even" if i % 4 else "x2"] + ["x3"] * 18)) for i in range(400)]
    searcher = _memory_searcher(_memory_index(docs), 2)
    reaches: list[int] = []
    real_plan = cold_reads_module.plan

    def plan(query, heads, whole, width, weights, n):
        reaches.append(width)
        return real_plan(query, heads, whole, width, weights, n)

    monkeypatch.setattr(cold_reads_module, "plan", plan)
    try:
        searcher.rank(parse_query("even"), 10)   # "even" is then read whole, in the background
        searcher.wait_for_background_reads()
        reaches.clear()
        matched = searcher.rank(parse_query("flat even"), 10)
        whole = searcher._match(parse_query("flat even"), searcher.statistics.current, 10)
        assert _page(matched) == _page(whole)
        assert reaches and reaches == [2 * cold_reads_module.DEEPER ** i for i in range(len(reaches))], reaches
    finally:
        searcher.close()


def test_a_head_is_parsed_from_its_stored_cells():
    """``parse_head`` over cells as the store returns them: the last first cell's level, URLs
    decoded as every key is (bytes that are not UTF-8 kept), a URL's first cell kept, the
    recent cells added, and a cell that is no impact posting refused."""
    from caffeine.search.cold import parse_head
    from caffeine.index.impacts import impact_qualifier
    from caffeine.index.schema import decode_key

    def cell(level, url: bytes, value=b"\x02"):
        return impact_qualifier(level, "").encode() + url, value

    odd = b"http://x/\xff"
    cells = [cell(900, b"http://a/"), cell(700, odd, b"\x03"), cell(650, b"http://a/", b"\x09")]
    head = parse_head(cells, 5, [cell(10, b"http://new/")])
    assert head.last_level == 650 and head.df == 5 and not head.complete
    assert head.postings == {"http://a/": b"\x02", decode_key(odd): b"\x03", "http://new/": b"\x02"}
    assert parse_head(cells, 3).complete and parse_head([], 0).complete
    # No first cells although the row counts some: bounded as if its best were unread.
    empty = parse_head([], 3)
    assert not empty.complete and empty.tail(100, 1.0) == unread_bound(SIMILARITY.term_weight(3, 100), 1.0, impacts.MAX_LEVEL)
    for bad in (b"12", b"12a45http://a/", b" 1234http://a/"):
        with pytest.raises(ValueError):
            parse_head([(bad, b"\x01")], 1)


def test_head_widths_read_a_non_essential_word_narrow():
    """``head_widths``: a word whose idf is under ``ESSENTIAL_SHARE`` of the query's largest
    is read ``NARROW`` deep; a one-word query,
    and words of like idf, read the full width; never more than the width."""
    from caffeine.search.cold import NARROW, head_widths

    n = 10_000
    assert head_widths(parse_query("rare everywhere"), {"rare": 30, "everywhere": 9_990}, n, 2048) == {
        "rare": 2048, "everywhere": NARROW}
    assert head_widths(parse_query("everywhere"), {"everywhere": 9_990}, n, 2048) == {"everywhere": 2048}
    assert head_widths(parse_query("some other"), {"some": 3_000, "other": 5_000}, n, 2048) == {
        "some": 2048, "other": 2048}
    assert head_widths(parse_query("rare everywhere"), {"rare": 30, "everywhere": 9_990}, n, 16) == {
        "rare": 16, "everywhere": 16}


def _rare_and_every_word_searcher(monkeypatch):
    """A memory searcher over 3,000 documents that all hold ``everyw`` and a tenth hold
    ``rarew``, and the list its head reads are recorded in: ``(terms, width)`` each."""
    rng = random.Random(4)
    docs = [("t", " ".join(rng.choices(["everyw", "x1", "x2", "x3"], k=30)) + " everyw" +
             (" rarew" * rng.randint(1, 3) if i % 10 == 0 else "")) for i in range(3000)]
    searcher = _memory_searcher(_memory_index(docs), 512)
    reads: list[tuple[tuple[str, ...], int]] = []
    real_read = searcher.cold._read_heads

    def spying(terms, width, since):
        reads.append((tuple(terms), width))
        return real_read(terms, width, since)

    monkeypatch.setattr(searcher.cold, "_read_heads", spying)
    return searcher, reads


def test_a_non_essential_words_head_is_read_narrow_and_the_answer_is_exact(heads_path, monkeypatch):
    """A query of a rare word and a word on every document: the common word's head is read
    ``NARROW`` deep (every word's is, first: it gives the counts), the rare word's then at
    the full width, and the page is the
    whole lists', to the score. A narrow head that a failed proof names grows to the full
    width."""
    from caffeine.search.cold import NARROW

    searcher, reads = _rare_and_every_word_searcher(monkeypatch)
    real_answer = cold_reads_module.answer

    def refusing_until_read_deeper(*args):
        if [w for terms, w in reads if "everyw" in terms] == [NARROW]:
            return None  # as a failed proof
        return real_answer(*args)

    try:
        for text in ("rarew everyw", "everyw rarew x1"):
            whole = searcher._match(parse_query(text), searcher.statistics.current, 10)
            searcher.drop_postings()
            reads.clear()
            matched = searcher.rank(parse_query(text), 10)
            assert _page(matched) == _page(whole), text
            assert reads[0][1] == NARROW, reads     # every word's narrow head (and count) first
            assert [w for terms, w in reads if "everyw" in terms] == [NARROW], reads
            assert [w for terms, w in reads if "rarew" in terms] == [NARROW, 512], reads
        assert searcher.cold_counts["answered"] == 2
        # The rare word's head is its whole row, so the narrow head is the only one a failed
        # proof can name: it is read again at the full width, not NARROW × DEEPER.
        monkeypatch.setattr(cold_reads_module, "answer", refusing_until_read_deeper)
        whole = searcher._match(parse_query("rarew everyw"), searcher.statistics.current, 10)
        searcher.drop_postings()
        reads.clear()
        assert _page(searcher.rank(parse_query("rarew everyw"), 10)) == _page(whole)
        assert [w for terms, w in reads if "everyw" in terms] == [NARROW, 512], reads
    finally:
        searcher.close()


def test_a_query_of_short_lists_reads_them_whole():
    """When every cold word's row is at most the head width, the lists are read whole (their
    first narrow heads showed it): no cold answer, and exact totals."""
    rng = random.Random(6)
    docs = [("t", " ".join(rng.choices(["commonw", "x1", "x2"], k=20)) + (" rarew" if i % 7 == 0 else ""))
            for i in range(120)]
    searcher = _memory_searcher(_memory_index(docs), 2048)
    try:
        matched, whole = _cold_and_whole(searcher, "rarew commonw")
        assert _page(matched) == _page(whole) and matched.total_exact
        assert searcher.cold_counts == {"answered": 0, "given_up": 0, "deeper": 0, "intersected": 0}
    finally:
        searcher.close()


def test_the_rarest_words_documents_are_pruned_too(heads_path):
    """A rare word whose head is its whole list and a word on every document: of the rare
    word's documents, the common word's postings are read for those the heads show most of
    first, and the others whose upper bound cannot reach the page's floor are not read at
    all; the page is still the whole lists', to the score."""
    rng = random.Random(8)
    docs = [("t", " ".join(rng.choices(["everyw", "x1", "x2", "x3"], k=rng.randrange(20, 60))) + " everyw" +
             (" rarew" * rng.choice((1, 1, 1, 2, 6)) if i % 6 == 0 else "")) for i in range(3000)]
    searcher = _memory_searcher(_memory_index(docs), 1024)
    asked = _spy_lookups(searcher)
    try:
        matched, whole = _cold_and_whole(searcher, "rarew everyw")
        assert _page(matched) == _page(whole)
        assert searcher.cold_counts["answered"] == 1 and searcher.cold_counts["deeper"] == 0
        rare = len(docs) // 6
        assert 0 < len(asked) < rare / 2, (len(asked), rare)
    finally:
        searcher.close()


def test_dropped_postings_stay_dropped_when_a_background_whole_read_lands_after_the_drop(monkeypatch):
    """``drop_postings`` makes the next query of every term cold, also when the whole-list
    read that a cold query started in the background was still on its way at the drop."""
    import threading

    from caffeine.search.cold import NARROW

    searcher, reads = _rare_and_every_word_searcher(monkeypatch)
    gate = threading.Event()
    try:
        searcher.drop_postings()
        searcher.cold._warmer.submit(gate.wait)   # the query's whole-list reads queue behind this
        searcher.rank(parse_query("rarew everyw"), 10)
        assert searcher.cold_counts["answered"] == 1
        threading.Timer(0.3, gate.set).start()    # they run 0.3 s after, during or after the drop
        searcher.drop_postings()
        searcher.wait_for_background_reads()
        reads.clear()
        searcher.rank(parse_query("rarew everyw"), 10)
        assert [w for terms, w in reads if "everyw" in terms] == [NARROW], reads
    finally:
        gate.set()
        searcher.close()
