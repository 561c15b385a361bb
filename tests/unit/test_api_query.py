"""The search service's pure parts: query parsing, snippets, ranking, HTML (no HBase).

Property tests (hypothesis) pin the contracts in the module docstrings: parsing raises only
QueryError and yields terms spelled as the index spells them; snippets are HTML-safe excerpts
of the document with exactly the query terms marked; ranking is BM25 x inlink boost with a
total order.
"""

from __future__ import annotations

import html
import math
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from caffeine.index import (
    Posting,
    decode_posting,
    encode_posting,
    normalize_text,
    postings,
    tokenize,
)

from api.html import search_page
from caffeine.search.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, ParsedQuery, QueryError, parse_query
from caffeine.search.ranking import DocStats, corpus_weights, posting_counts, posting_tf, rank, rank_scored, score_term, term_contributions
from caffeine.index import SIMILARITY
from support import reference_scoring
from support.reference_scoring import bm25
from caffeine.search.snippets import _MAX_HITS, ELLIPSIS, _hits, make_snippet, token_spans

# Text that exercises the tokenizer: letters of several scripts, digits, marks, punctuation,
# markup characters, whitespace and control characters, and arbitrary code points.
texty = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("abcxyz ÄéßİıΣσ日本 \t\n\u00a0\u0301_-'<>&\"!?.,0123456789")),
        st.characters(),
    ),
    max_size=300,
)


# -- query parsing ---------------------------------------------------------------------------

@settings(max_examples=500, deadline=None)
@given(texty)
@example("İstanbul")           # lowercasing adds a combining mark
@example("ǅ ǆ")
@example("\ud800 lone surrogate")
@example("a" * 65 + " short")   # an over-long token is dropped, as the index drops it
def test_parsing_raises_only_query_errors_and_terms_are_index_terms(text):
    try:
        parsed = parse_query(text)
    except QueryError as exc:
        assert str(exc)
        return
    assert isinstance(parsed, ParsedQuery)
    assert parsed.terms and len(parsed.terms) <= MAX_QUERY_TERMS
    assert len(set(parsed.terms)) == len(parsed.terms)
    if '"' in text or "-" in text or "site:" in text:
        return  # operators: tests/unit/test_query_language.py pins those
    # Exactly the index's tokens of the text, deduplicated in order: a document whose text
    # is the query is indexed under exactly these terms (the export observer's postings).
    assert list(parsed.terms) == list(dict.fromkeys(tokenize(text)))
    assert set(parsed.terms) == set(postings(tokenize(text)))
    # (A term is not always a fixed point of tokenize: "İ" lowercases to "i" + U+0307, a mark
    # that \w does not match. Query and document go through the same function from the same
    # text, so they still agree.)


@given(st.lists(st.sampled_from(["coffee", "Tea", "TEA", "tea", "naïve", "x1"]), min_size=1, max_size=10),
       st.sampled_from([" ", ", ", " / ", "\t", "—"]))
def test_duplicates_and_punctuation_do_not_change_the_terms(words, sep):
    parsed = parse_query(sep.join(words))
    assert list(parsed.terms) == list(dict.fromkeys(w.lower() for w in words))


@pytest.mark.parametrize("text, message", [
    ("", "empty"), ("   \n\t", "empty"), ("!!! ...", "no searchable words"),
    ("x" * (MAX_QUERY_CHARS + 1), "too long"),
    (" ".join(f"w{i}" for i in range(MAX_QUERY_TERMS + 1)), "too many"),
])
def test_unsearchable_queries_say_why(text, message):
    with pytest.raises(QueryError, match=message):
        parse_query(text)


def test_the_term_limit_counts_distinct_terms():
    assert len(parse_query(" ".join(["same"] * 50)).terms) == 1
    assert len(parse_query(" ".join(f"w{i}" for i in range(MAX_QUERY_TERMS))).terms) == MAX_QUERY_TERMS


# -- snippets --------------------------------------------------------------------------------

def _plain(snippet: str) -> str:
    """The document text a snippet shows: marks removed, escapes undone, ellipses dropped."""
    return html.unescape(snippet.replace("<mark>", "").replace("</mark>", "")).strip(ELLIPSIS)


@settings(max_examples=300, deadline=None)
@given(texty)
def test_token_spans_are_the_tokenizers_tokens(text):
    text = normalize_text(text)  # doc:parsed text is normalized
    assert [t for _, _, t in token_spans(text)] == tokenize(text)
    for start, end, token in token_spans(text):
        assert text[start:end].lower() == token


@settings(max_examples=300, deadline=None)
@given(texty, st.lists(st.sampled_from(["abc", "xyz", "é", "日本", "σ", "0"]), max_size=3),
       st.integers(1, 40), st.integers(10, 400))
def test_snippets_are_escaped_excerpts_with_the_terms_marked(text, terms, max_tokens, max_chars):
    text = normalize_text(text)
    snippet = make_snippet(text, terms, max_tokens, max_chars)
    # Only <mark> markup; every other "<", ">" and "&" of the document is escaped.
    without_marks = snippet.replace("<mark>", "").replace("</mark>", "")
    assert "<" not in without_marks and ">" not in without_marks
    assert re.sub(r"&(amp|lt|gt|quot|#x27);", "", without_marks).count("&") == 0
    # It is a piece of the document, at most max_chars of it (plus ellipses).
    plain = _plain(snippet).strip()
    assert plain in text
    assert len(plain) <= max_chars
    # Marked words are exactly query terms, whole tokens.
    for marked in re.findall(r"<mark>(.*?)</mark>", snippet):
        assert html.unescape(marked).lower() in terms


def test_the_snippet_window_holds_the_most_distinct_terms():
    text = " ".join(["filler"] * 100 + ["alpha"] + ["filler"] * 50 + ["alpha", "beta", "gamma"] + ["filler"] * 50)
    snippet = make_snippet(text, ["alpha", "beta", "gamma"], max_tokens=10)
    assert "<mark>alpha</mark> <mark>beta</mark> <mark>gamma</mark>" in snippet
    assert snippet.startswith(ELLIPSIS) and snippet.endswith(ELLIPSIS)


def test_a_snippet_without_matches_is_the_beginning():
    assert make_snippet("one two three", ["zzz"]) == "one two three"
    assert make_snippet("", ["zzz"]) == ""
    assert make_snippet("<b>bold</b> & more", ["bold"]) == "&lt;b&gt;<mark>bold</mark>&lt;/b&gt; &amp; more"


# -- ranking ---------------------------------------------------------------------------------

@given(st.integers(1, 10**6), st.lists(st.integers(0, 5000), max_size=70, unique=True))
def test_posting_tf_reads_the_tf_decode_posting_reads(tf, positions):
    positions = tuple(sorted(positions))[: min(tf, 64)]
    value = encode_posting(Posting(tf, positions))
    assert posting_tf(value) == decode_posting(value).tf == tf


@pytest.mark.parametrize("bad", [b"", b"\x80", b"\xff\xff", b"\x00"])
def test_posting_tf_refuses_what_decode_posting_refuses(bad):
    with pytest.raises(ValueError):
        posting_tf(bad)


def test_rank_is_bm25_times_the_inlink_boost_with_or_semantics():
    docs = {"a": DocStats(10, 0), "b": DocStats(20, 5, votes=5), "c": DocStats(5, 0)}
    postings = {"x": {"a": 2, "b": 1, "gone": 3}, "y": {"b": 4}}
    ranking = rank(postings, docs.get, num_docs=3, avg_len=35 / 3, limit=10)
    assert ranking.total == 2  # "gone" has no docstats: not in the index
    assert ranking.doc_freq == {"x": 3, "y": 1}
    want = {
        "a": reference_scoring.score([bm25(2, 10, 35 / 3, 3, 3)], 0),
        "b": reference_scoring.score([bm25(1, 20, 35 / 3, 3, 3), bm25(4, 20, 35 / 3, 1, 3)], 5),
    }
    assert {h.url: h.score for h in ranking.hits} == pytest.approx(want)
    assert [h.url for h in ranking.hits] == sorted(want, key=lambda u: -want[u])
    assert dict((h.url, h.matched) for h in ranking.hits) == {"a": ("x",), "b": ("x", "y")}


@given(st.dictionaries(st.sampled_from("abcdefgh"), st.integers(1, 5), min_size=1), st.integers(1, 8))
def test_rank_orders_totally_and_pages_are_prefixes(row, limit):
    docs = {u: DocStats(10, 0) for u in row}  # equal lengths: many ties, broken by URL
    full = rank({"t": row}, docs.get, len(docs), 10.0, limit=100).hits
    assert [(h.score, h.url) for h in full] == sorted(((h.score, h.url) for h in full), key=lambda p: (-p[0], p[1]))
    assert rank({"t": row}, docs.get, len(docs), 10.0, limit=limit).hits == full[:limit]


_URLS = [f"u{i}" for i in range(40)]


@st.composite
def corpora(draw):
    """A snapshot of documents, documents newer than it, the gone, and a query's postings."""
    urls = draw(st.lists(st.sampled_from(_URLS), min_size=1, max_size=40, unique=True))
    # Few distinct lengths and inlink counts: many exact score ties, broken by URL.
    stats = {u: DocStats(draw(st.sampled_from([5, 10, 10, 40])), draw(st.sampled_from([0, 0, 3, 100]))) for u in urls}
    where = {u: draw(st.sampled_from(["snapshot", "snapshot", "fresh", "gone"])) for u in urls}
    terms = draw(st.lists(st.sampled_from(["x", "y", "z"]), min_size=1, max_size=3, unique=True))
    postings = {t: draw(st.dictionaries(st.sampled_from(urls), st.integers(1, 8), max_size=40)) for t in terms}
    return stats, where, postings


_BOTH_BEATS_EITHER = (  # c, second in both lists, outscores a and b, first in one each
    {u: DocStats(10, 0) for u in "abcd"}, dict.fromkeys("abcd", "snapshot"),
    {"x": {"a": 4, "c": 3, "d": 1}, "y": {"b": 4, "c": 3, "d": 1}},
)


@settings(max_examples=300, deadline=None)
@given(corpora(), st.integers(0, 12))
@example(_BOTH_BEATS_EITHER, 1)
def test_rank_scored_gives_exactly_rank(corpus, limit):
    """The threshold algorithm over precomputed term scores returns rank's hits: the same
    documents, scores equal to the bit, the same order and total."""
    stats, where, postings = corpus
    snapshot = {u: s for u, s in stats.items() if where[u] == "snapshot"}
    fresh = {u: s for u, s in stats.items() if where[u] == "fresh"}
    avg = sum(s.length for s in snapshot.values()) / len(snapshot) if snapshot else 0.0
    num_docs = len(snapshot)

    def lookup(url):
        return snapshot.get(url) or fresh.get(url)

    want = rank(postings, lookup, num_docs, avg, limit)
    n = max([num_docs, *(len(row) for row in postings.values())])
    weights = corpus_weights(snapshot, avg)
    got = rank_scored({t: score_term(row, weights, n) for t, row in postings.items()}, weights, fresh.get, n, limit)
    assert got == want


@settings(max_examples=300, deadline=None)
@given(corpora(), st.integers(0, 12), st.lists(st.sampled_from([1.0, 1.5, 2.0, 3.5]), min_size=4, max_size=4))
@example(_BOTH_BEATS_EITHER, 1, [2.0, 1.0, 1.0, 1.0])
def test_rank_scored_gives_exactly_rank_with_a_qualifiers_weight(corpus, limit, factors):
    """With terms of the query weighted (a qualified name's qualifier, ``term_multipliers``),
    the threshold algorithm's bound scales with each list's weight, and its hits are still
    rank's to the bit."""
    stats, where, postings = corpus
    snapshot = {u: s for u, s in stats.items() if where[u] == "snapshot"}
    fresh = {u: s for u, s in stats.items() if where[u] == "fresh"}
    avg = sum(s.length for s in snapshot.values()) / len(snapshot) if snapshot else 0.0
    num_docs = len(snapshot)
    multipliers = dict(zip(sorted(postings), factors))

    def lookup(url):
        return snapshot.get(url) or fresh.get(url)

    want = rank(postings, lookup, num_docs, avg, limit, multipliers=multipliers)
    n = max([num_docs, *(len(row) for row in postings.values())])
    weights = corpus_weights(snapshot, avg)
    got = rank_scored({t: score_term(row, weights, n) for t, row in postings.items()}, weights, fresh.get, n, limit,
                      multipliers=multipliers)
    assert got == want


def test_a_qualifiers_weight_multiplies_its_terms_score():
    docs = {"a": DocStats(10), "b": DocStats(10)}
    postings = {"x": {"a": 3}, "y": {"b": 3}}
    plain = rank(postings, docs.get, 2, 10.0, 2)
    weighted = rank(postings, docs.get, 2, 10.0, 2, multipliers={"y": 2.5})
    assert [h.url for h in plain.hits] == ["a", "b"]   # a tie, broken by URL
    assert [h.url for h in weighted.hits] == ["b", "a"]
    assert weighted.hits[0].score == plain.hits[0].score * 2.5


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 300),
                          st.one_of(st.just((0, 0, 0)), st.tuples(st.integers(0, 3), st.integers(0, 200), st.integers(0, 2))),
                          st.booleans(), st.integers(0, 40)), min_size=1, max_size=12),
       st.integers(1, 40))
def test_term_contributions_of_stored_postings_are_each_postings_bm25f(docs, extra_df):
    """Stored postings of every form (body-only with one- and two-byte tfs, field counts,
    documents outside the snapshot) score to the bit as ``Similarity.contribution`` of their
    ``posting_counts``, and outside documents keep those counts."""
    stats, postings = {}, {}
    for i, (tf, (title, anchor, url), indexed, length) in enumerate(docs):
        name = f"u{i}"
        postings[name] = encode_posting(Posting(tf, tuple(range(1, min(tf, 64) + 1)), title, anchor, url))
        if indexed:
            stats[name] = DocStats(length + tf, fields=(title, anchor, url), votes=3)
    weights = corpus_weights(stats)
    n = len(docs) + extra_df
    df = len(docs)
    contributions, outside = term_contributions(postings, weights, n, df)
    weight = SIMILARITY.term_weight(df, n)
    assert set(contributions) == set(stats) and set(outside) == set(postings) - set(stats)
    for name, value in postings.items():
        if name in stats:
            assert contributions[name] == SIMILARITY.contribution(weight, posting_counts(value), weights.norms[name])
        else:
            assert outside[name] == posting_counts(value)


@given(st.lists(st.sampled_from(["a", "b", "c", "dd"]), max_size=_MAX_HITS + 40), st.sets(st.sampled_from(["a", "b", "x"])))
def test_hits_are_every_occurrence_in_text_order(tokens, wanted):
    want = [(i, t) for i, t in enumerate(tokens) if t in wanted][:_MAX_HITS]
    assert _hits(tuple(tokens), wanted) == want


def test_idf_never_sees_a_df_above_n():
    """Postings newer than the cached N (df > N) still score positively and finitely."""
    ranking = rank({"t": {"a": 1, "b": 1, "c": 1}}, lambda u: DocStats(3), num_docs=1, avg_len=3.0, limit=5)
    assert all(h.score > 0 and math.isfinite(h.score) for h in ranking.hits)


# -- HTML ------------------------------------------------------------------------------------

def test_the_page_escapes_everything_from_the_index():
    evil = '"><script>alert(1)</script>'
    result = {"total": 1, "page": 1, "size": 10, "took_ms": 1.0, "results": [{
        "rank": 1, "url": "http://x.test/" + evil, "title": evil, "snippet": "safe <mark>x</mark>",
        "score": 1.0, "inlinks": 0, "fingerprint": "0" * 32, "cluster_size": 2, "matched_terms": ["x"],
    }]}
    page = search_page(evil, result, None, 1)
    assert "<script>" not in page
    assert "&lt;script&gt;" in page and "safe <mark>x</mark>" in page


def test_the_page_marks_fallback_hits_and_estimated_totals():
    hit = {"rank": 1, "url": "http://x.test/a", "title": "A", "snippet": "a", "score": 1.0, "inlinks": 0,
           "fingerprint": "0" * 32, "cluster_size": 1, "matched_terms": ["csv"], "all_terms": False}
    result = {"total": 1234, "page": 1, "size": 10, "took_ms": 1.0, "total_exact": False, "results": [hit]}
    page = search_page("csv <file>", result, None, 1)
    assert "of about 1,234" in page and "some words only: csv" in page
    exact = search_page("csv", {**result, "total_exact": True, "results": [{**hit, "all_terms": True}]}, None, 1)
    assert "of 1,234" in exact and "about" not in exact and "some words only" not in exact
