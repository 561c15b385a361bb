"""Field-aware scoring and the query language, pure parts (no HBase).

Pins: the posting encoding with field counts; the fields a document is indexed under (title,
anchor text with site-template links counted once, URL words); BM25F's agreement with BM25
for a body-only index; the query parser's operators and its 4xx-worthy errors; and
``caffeine.search.matching``: all words required with a ranked fallback, phrases on positions,
exclusions, site filters, and the proximity bonus.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from caffeine.index import (
    Posting,
    anchor_record,
    anchor_text,
    anchor_votes,
    decode_posting,
    encode_posting,
    field_lengths,
    field_postings,
    posting_counts,
    posting_positions,
    tokenize,
    url_words,
)

from caffeine.index import SIMILARITY

from support import reference_scoring
from caffeine.search.matching import match, min_distance, on_site, phrase_at
from caffeine.search.query import QueryError, parse_query
from caffeine.search.ranking import DocStats, corpus_weights, rank, rank_scored, score_term


# -- postings with fields ----------------------------------------------------------------------

@pytest.mark.parametrize("posting, encoded", [
    (Posting(2, (1, 3), 2, 1, 1), b"\x00\x02\x02\x01\x01\x01\x02"),
    (Posting(0, (), 1, 0, 0), b"\x00\x00\x01\x00\x00"),
    (Posting(1, (0,)), b"\x01\x00"),   # body only: the encoding it always had
])
def test_field_postings_encode_byte_exactly(posting, encoded):
    assert encode_posting(posting) == encoded
    assert decode_posting(encoded) == posting
    assert posting_counts(encoded) == (posting.tf, posting.title, posting.anchor, posting.url)


@pytest.mark.parametrize("bad", [b"\x00", b"\x00\x01\x00\x00", b"\x00\x01\x00\x00\x00"])
def test_field_form_without_field_counts_is_malformed(bad):
    with pytest.raises(ValueError):
        decode_posting(bad)


@given(st.integers(0, 300), st.integers(0, 5), st.integers(0, 5), st.integers(0, 5), st.data())
def test_field_postings_round_trip(tf, title, anchor, url, data):
    if tf + title + anchor + url == 0:
        tf = 1
    positions = sorted(data.draw(st.sets(st.integers(0, 10_000), max_size=min(tf, 64))))
    p = Posting(tf, tuple(positions), title, anchor, url)
    assert decode_posting(encode_posting(p)) == p
    assert posting_counts(encode_posting(p)) == (tf, title, anchor, url)
    assert posting_positions(encode_posting(p)) == p.positions


@pytest.mark.parametrize("bad", [b"", b"\x80", b"\x00\x01\x00", b"\x02\x01\x80"])
def test_posting_positions_refuses_truncated_values(bad):
    with pytest.raises(ValueError):
        posting_positions(bad)


def test_a_posting_counts_its_term_at_least_once():
    with pytest.raises(ValueError):
        Posting(0, ())


# -- fields ------------------------------------------------------------------------------------

def test_url_words_are_the_path_without_its_web_extension():
    assert url_words("http://docs.test:8000/library/csv.html?q=1#x") == ["library", "csv"]
    assert url_words("http://h/whatsnew/3.11.html") == ["whatsnew", "3", "11"]
    assert url_words("http://h/a%20b/") == ["a", "b"]
    assert url_words("http://h/") == []


def test_a_link_every_page_of_a_site_carries_counts_once():
    inlinks = {f"http://docs.test/p{i}.html": "Python 3.11 Documentation »" for i in range(500)}
    inlinks["http://docs.test/library/io.html"] = "csv module"
    inlinks["http://other.test/blog"] = "the CSV docs"
    record = anchor_record(inlinks)
    assert record == [["docs.test", "csv module"], ["docs.test", "python 3 11 documentation"],
                      ["other.test", "the csv docs"]]
    assert anchor_votes(record) == 3
    assert anchor_text(record) == "csv module python 3 11 documentation the csv docs"
    assert anchor_record({"http://a.test/x": "", "http://a.test/y": "Next"}) == [["a.test", ""], ["a.test", "next"]]


def test_field_postings_add_title_anchor_and_url_counts_to_the_body():
    got = field_postings(tokenize("reading csv files"), "csv — CSV File Reading", "csv module", "http://h/library/csv.html")
    assert got["csv"] == Posting(1, (1,), 2, 1, 1)
    assert got["module"] == Posting(0, (), 0, 1, 0)        # only in the anchor text
    assert got["library"] == Posting(0, (), 0, 0, 1)       # only in the URL
    assert got["files"] == Posting(1, (2,))
    assert field_lengths("csv — CSV File Reading", "csv module", "http://h/library/csv.html") == (4, 2, 2)


def test_bm25f_with_the_body_alone_is_bm25():
    norms = SIMILARITY.field_norms((20, 0, 0, 0), (35 / 3, 0.0, 0.0, 0.0))
    assert SIMILARITY.term_score((4, 0, 0, 0), norms, 1, 3) == pytest.approx(reference_scoring.bm25(4, 20, 35 / 3, 1, 3))


def test_a_title_match_outweighs_a_body_match_in_a_long_page():
    docs = {"answer": DocStats(300, fields=(3, 2, 2)), "hub": DocStats(5000, fields=(2, 1, 1)),
            "other": DocStats(300, fields=(3, 0, 2))}
    postings = {"csv": {"answer": (3, 1, 1, 1), "hub": (6, 0, 0, 0), "other": (1, 0, 0, 0)}}
    ranking = rank(postings, docs.get, 3, corpus_weights(docs).averages, 10)
    # The title match first; then six occurrences in a long page over one in a short page (the
    # body's b = 0.5 normalises length less than BM25's 0.75, which put "other" second).
    assert [h.url for h in ranking.hits] == ["answer", "hub", "other"]


def test_rank_scored_equals_rank_with_fields_and_votes():
    docs = {f"u{i}": DocStats(10 + 7 * i, fields=(i % 4, i % 3, 2), votes=i % 5) for i in range(30)}
    rows = {"x": {f"u{i}": ((i % 5), i % 2, i % 3, 1 if i % 4 == 0 else 0) for i in range(0, 30, 2)},
            "y": {f"u{i}": (1 + i % 3, 0, 0, 0) for i in range(0, 30, 3)}}
    rows = {t: {u: c for u, c in row.items() if sum(c)} for t, row in rows.items()}
    weights = corpus_weights(docs)
    want = rank(rows, docs.get, len(docs), weights.averages, 7)
    encoded = {t: {u: encode_posting(Posting(c[0], tuple(range(min(c[0], 64))), *c[1:])) for u, c in row.items()}
               for t, row in rows.items()}
    scored = {t: score_term(row, weights, len(docs)) for t, row in encoded.items()}
    got = rank_scored(scored, weights, lambda u: None, len(docs), 7)
    assert [(h.url, h.score) for h in got.hits] == [(h.url, h.score) for h in want.hits]
    assert got.total == want.total


# -- the query language ------------------------------------------------------------------------

@pytest.mark.parametrize("text, terms, qualifiers", [
    ("TypeId::fmt", ("typeid", "fmt"), ("typeid",)),
    ("java.util.ArrayList.add", ("java", "util", "arraylist", "add"), ("arraylist",)),   # the innermost
    ("std::vector<T>::push_back", ("std", "vector", "t", "push_back"), ("vector",)),
    ("os.PathLike_T.x", ("os", "pathlike_t", "x"), ("pathlike_t",)),
    ("str.join() bytes", ("str", "join", "bytes"), ("str",)),
    ("python 3.11", ("python", "3", "11"), ()),            # numbers are no names
    ("v1.2 release", ("v1", "2", "release"), ()),
    ("a.b b.c", ("a", "b", "c"), ("a", "b")),              # b qualifies the second name
    ('"os.path join" x', ("os", "path", "join", "x"), ()),  # a phrase's words are its own
    ("-os.path walk", ("walk",), ()),                      # an excluded name weighs nothing
    ("3abc.def", ("3abc", "def"), ()),                     # no name starts inside a word
])
def test_a_qualified_names_qualifiers_are_named(text, terms, qualifiers):
    q = parse_query(text)
    assert (q.terms, q.qualifiers) == (terms, qualifiers)
    assert set(q.qualifiers) <= set(q.terms)


def test_operators_are_parsed():
    q = parse_query('"Standard Library" json -python2 -x-y site:Docs.Python.org')
    assert q.terms == ("standard", "library", "json")
    assert q.phrases == (("standard", "library"),)
    assert q.excluded == ("python2", "x", "y")
    assert q.sites == ("docs.python.org",)
    assert q.lookups == ("standard", "library", "json", "python2", "x", "y")


def test_hyphens_inside_words_and_a_lone_dash_are_not_exclusions():
    q = parse_query("e-mail - header")
    assert q.terms == ("e", "mail", "header") and q.excluded == ()


def test_a_one_word_quote_is_a_word():
    q = parse_query('"csv" reader')
    assert q.terms == ("csv", "reader") and q.phrases == ()


@pytest.mark.parametrize("text, message", [
    ('csv "reader', "unbalanced quote"),
    ('"" csv', "no searchable words"),
    ('-"a b" c', "exclude single words"),
    ("-python", "nothing to search for"),
    ("site:docs.python.org", "nothing to search for"),
    ("json site:", "site: needs a host"),
    ("json site:bad/host", "site: needs a host"),
    ("json -json", "both searched for and excluded"),
    ("a " + " ".join(f"-w{i}" for i in range(16)), "too many distinct words"),
])
def test_malformed_queries_say_what_is_wrong(text, message):
    with pytest.raises(QueryError, match=message):
        parse_query(text)


@given(st.text(alphabet=st.sampled_from(list('ab "-:site.xy\u00e9 ')), max_size=40))
def test_any_text_parses_or_raises_a_query_error(text):
    try:
        q = parse_query(text)
    except QueryError as exc:
        assert str(exc)
        return
    assert q.terms and not set(q.terms) & set(q.excluded)
    assert all(len(p) >= 2 and set(p) <= set(q.terms) for p in q.phrases)


# -- matching ----------------------------------------------------------------------------------

def test_phrase_and_distance_helpers():
    assert phrase_at([(3, 10), (4, 20)]) and not phrase_at([(3, 10), (5, 20)])
    assert phrase_at([(1, 5), (2, 6), (7,)]) and not phrase_at([(1,), ()])
    assert min_distance([(1, 50), (10, 48)]) == 2 and min_distance([(1, 2)]) is None
    bonus = SIMILARITY.proximity_bonus
    assert bonus(1) == pytest.approx(math.log((0.3 + math.exp(-1)) / 0.3))
    assert bonus(None) == 0.0 and bonus(1) > bonus(2) > bonus(9) > 0
    assert on_site("http://docs.python.org/3/", ("python.org",)) and on_site("http://127.0.0.1:8800/x", ("127.0.0.1:8800",))
    assert not on_site("http://notpython.org/", ("python.org",))


def _index(docs_tokens: dict[str, list[str]]):
    docs = {url: DocStats(len(tokens)) for url, tokens in docs_tokens.items()}
    weights = corpus_weights(docs)
    rows: dict[str, dict[str, bytes]] = {}
    for url, tokens in docs_tokens.items():
        for term, posting in field_postings(tokens, "", "", "http://x/").items():
            rows.setdefault(term, {})[url] = encode_posting(posting)
    return docs, weights, rows


def _search(text, docs_tokens, limit=10):
    docs, weights, rows = _index(docs_tokens)
    q = parse_query(text)
    scored = {t: score_term(rows.get(t, {}), weights, len(docs)) for t in q.lookups}
    return match(q, scored, {t: rows.get(t, {}) for t in q.lookups}, weights, lambda u: None, len(docs), limit)


CORPUS = {
    "http://a.test/both-near": "read the csv file here".split(),
    "http://a.test/both-far": ("csv " + "filler " * 30 + "file").split(),
    "http://a.test/only-csv": "csv csv csv csv".split(),
    "http://b.test/both": "a csv file on another site".split(),
    "http://a.test/none": "nothing to see".split(),
}


def test_all_words_first_nearer_first_then_the_ranked_fallback():
    m = _search("csv file", CORPUS)
    assert m.strict_total == 3 and m.total == 4
    urls = [h.hit.url for h in m.hits]
    assert set(urls[:3]) == {"http://a.test/both-near", "http://a.test/both-far", "http://b.test/both"}
    assert urls[3] == "http://a.test/only-csv" and [h.all_terms for h in m.hits] == [True] * 3 + [False]
    assert urls.index("http://a.test/both-near") < urls.index("http://a.test/both-far")


def test_no_fallback_when_the_strict_matches_fill_the_page():
    m = _search("csv file", CORPUS, limit=2)
    assert len(m.hits) == 2 and all(h.all_terms for h in m.hits)
    assert m.strict_total == 3 and m.total == 4   # the same total as a page that reaches the fallback


def test_phrase_exclusion_and_site():
    assert {h.hit.url for h in _search('"csv file"', CORPUS).hits} == {"http://a.test/both-near", "http://b.test/both"}
    assert {h.hit.url for h in _search('"file csv"', CORPUS).hits} == set()
    assert {h.hit.url for h in _search("csv -file", CORPUS).hits} == {"http://a.test/only-csv"}
    m = _search("csv file site:a.test", CORPUS)
    assert {h.hit.url for h in m.hits} == {"http://a.test/both-near", "http://a.test/both-far", "http://a.test/only-csv"}
    assert m.strict_total == 2


def test_the_walk_and_direct_scoring_agree(monkeypatch):
    import caffeine.search.matching as matching

    corpus = {f"http://a.test/{i}": (["csv", "file"] if i % 3 else ["file", "csv"]) + ["pad"] * (i % 7)
              for i in range(60)}
    for q in ("csv file", '"csv file"', "csv -pad", "csv site:a.test"):
        direct = _search(q, corpus)
        monkeypatch.setattr(matching, "DIRECT_MAX", 0)
        walked = _search(q, corpus)
        monkeypatch.undo()
        assert [(h.hit.url, h.score) for h in walked.hits] == [(h.hit.url, h.score) for h in direct.hits]
        assert (walked.total, walked.strict_total) == (direct.total, direct.strict_total)


def test_a_phrase_total_over_many_pages_is_estimated_from_a_sample(monkeypatch):
    import caffeine.search.matching as matching

    corpus = {f"http://a.test/{i:03d}": ["csv", "file"] if i % 2 else ["file", "csv"] for i in range(200)}
    exact = _search('"csv file"', corpus)
    assert exact.total_exact and exact.strict_total == 100
    monkeypatch.setattr(matching, "PHRASE_COUNT_MAX", 40)
    monkeypatch.setattr(matching, "DIRECT_MAX", 0)
    estimated = _search('"csv file"', corpus)
    assert not estimated.total_exact and 60 <= estimated.strict_total <= 140
    assert {h.hit.url for h in estimated.hits} <= {u for u, t in corpus.items() if t[0] == "csv"}
