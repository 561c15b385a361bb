"""Ranking: postings rows and corpus statistics -> scored, ordered hits.

Layer: search. Pure (imports ``caffeine.index`` only; no I/O). ``DocStats`` (a document's
``docstats`` row) is defined with its codec in ``caffeine.index.schema`` and named here too. ``caffeine.search.searcher`` reads the rows and
the statistics and calls ``rank_scored``; tests call ``rank`` with hand-made rows.

The formula is ``caffeine.index.scoring.SIMILARITY``'s (docs/RANKING.md): this module applies
it to stored rows, and its inlined fast path is tested against ``Similarity.contribution``.
What it reads:

* ``N``, ``avg_len_f``: number of indexed documents and their mean field lengths (docstats);
* ``df(t)``: the number of live postings in term t's row (every ``p:<url>`` cell that is not
  a tombstone), counted from the row itself, so it is exact for the term even when the
  cached ``N`` lags a few seconds;
* ``tf_f``: the posting's frequency in field f (``caffeine.index.posting_counts``);
  ``len_f(d)``, ``votes(d)``: ``docstats s:length`` (body), ``s:fields`` (title, anchor,
  url), ``s:votes`` (0 when absent).

A document matches a term when the term is in any of its fields. A posting whose document
has no statistics (not, or no longer, in the index: its docstats row lost its ``s:length``)
is not a hit. Ties are broken by URL, so the order is total and pages are stable. Which
documents a query accepts (all terms, phrases, exclusions, a site) is ``caffeine.search.matching``'s
business: it passes ``accept``.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from caffeine.index import posting_counts
from caffeine.index.schema import DocStats  # the docstats row's one definition, with its codec
from caffeine.index.scoring import SIMILARITY

__all__ = ["DocStats", "Hit", "Ranking", "posting_tf", "posting_counts", "rank", "term_multipliers", "term_contributions",
           "CorpusWeights", "corpus_weights", "TermScores", "score_term", "scores_of", "rank_scored"]

Counts = tuple[int, int, int, int]   # a term's (body, title, anchor, url) frequencies in a document


@dataclass(frozen=True, slots=True)
class Hit:
    url: str
    score: float
    stats: DocStats
    matched: tuple[str, ...]   # the query terms the document contains


@dataclass(frozen=True)
class Ranking:
    total: int                 # documents accepted (matching at least one term, and ``accept``)
    hits: list[Hit]            # the best ``limit`` of them, best first
    doc_freq: dict[str, int]   # df of each query term


def posting_tf(value: bytes) -> int:
    """The body term frequency of an encoded posting (``posting_counts``' first value)."""
    return posting_counts(value)[0]


def _counts(value) -> Counts:
    """A posting as stored (bytes), as counts, or a bare body tf (tests' hand-made rows)."""
    if isinstance(value, int):
        return (value, 0, 0, 0)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return posting_counts(bytes(value))
    return tuple(value)


def _averages(docs: Mapping[str, DocStats]) -> tuple[float, float, float, float]:
    if not docs:
        return (0.0, 0.0, 0.0, 0.0)
    sums = [0, 0, 0, 0]
    for stats in docs.values():
        for i, length in enumerate(stats.lengths):
            sums[i] += length
    return tuple(total / len(docs) for total in sums)


def term_multipliers(terms: Sequence[str], qualifiers: Sequence[str]) -> dict[str, float]:
    """Each of ``terms``' ``m(t)`` (``Similarity.multiplier``): γ for those among
    ``qualifiers`` (the query's qualified names' qualifiers), else 1."""
    return {term: SIMILARITY.multiplier(term in qualifiers) for term in terms}


def rank(
    postings: Mapping[str, Mapping[str, object]],
    lookup: Callable[[str], DocStats | None],
    num_docs: int,
    avg_len: float | Sequence[float],
    limit: int,
    multipliers: Mapping[str, float] | None = None,
) -> Ranking:
    """Score every document in ``postings`` ({term: {url: posting}}) and keep the best ``limit``.

    A posting is its stored bytes, its ``(body, title, anchor, url)`` counts, or a bare body
    tf. ``avg_len``: the four fields' mean lengths, or the body's alone (the others then 0).
    ``lookup(url)`` gives the document's statistics or None when it is not in the index.
    ``multipliers``: a term's ``m(t)`` (``term_multipliers``; 1 for a term absent or without
    them), applied to its term score. The reference the service's ``rank_scored`` is tested
    against: it touches every posting.
    """
    averages = tuple(avg_len) if isinstance(avg_len, (tuple, list)) else (avg_len, 0.0, 0.0, 0.0)
    doc_freq = {term: len(row) for term, row in postings.items()}
    # The N the idf uses must cover every df seen (a fresh document may be newer than the
    # cached statistics); otherwise idf would be computed for an impossible df > N.
    n = max([num_docs, *doc_freq.values()]) if doc_freq else num_docs
    scores: dict[str, list[float]] = {}
    matched: dict[str, list[str]] = {}
    known: dict[str, DocStats] = {}
    norms: dict[str, tuple] = {}
    gone: set[str] = set()
    for term, row in postings.items():
        weight = SIMILARITY.term_weight(doc_freq[term], n)
        m = multipliers.get(term, 1.0) if multipliers else 1.0
        for url, value in row.items():
            norm = norms.get(url)
            if norm is None:
                if url in gone:
                    continue
                stats = lookup(url)
                if stats is None:  # not in the index
                    gone.add(url)
                    continue
                known[url] = stats
                norm = norms[url] = SIMILARITY.field_norms(stats.lengths, averages)
                scores[url] = []
                matched[url] = []
            part = SIMILARITY.contribution(weight, _counts(value), norm) * m
            if part > 0:
                scores[url].append(part)
                matched[url].append(term)
    total = len(known)
    scored = ((math.fsum(s) * SIMILARITY.link_prior(known[url].votes), url) for url, s in scores.items())
    best = heapq.nsmallest(limit, scored, key=lambda pair: (-pair[0], pair[1])) if limit > 0 else []
    hits = [Hit(url, score, known[url], tuple(matched[url])) for score, url in best]
    return Ranking(total, hits, doc_freq)


# -- the same ranking from per-term precomputed scores ------------------------------------------
#
# ``rank`` touches every posting of every query term: ~1 µs each in Python, 20-60 ms for a
# query with a common term over 20,000 documents. The search service instead keeps, per term
# and per corpus snapshot, each document's contribution and the term's documents ordered by
# contribution × prior (``TermScores``, built once and reused until the term's postings or the
# snapshot change), and finds the best ``limit`` with Fagin's threshold algorithm: it reads the
# lists in that order, in parallel, scores each new document exactly, and stops when the
# ``limit``-th best exact score beats what any unread document could still reach. The result
# is exactly ``rank``'s (same scores to the bit, same order; tests compare them).

_MARGIN = 1e-9  # relative: covers the rounding between Σ(c·boost) bounds and fsum(c)·boost


@dataclass(frozen=True)
class CorpusWeights:
    """Each indexed document's BM25F field norms and link prior, for one statistics snapshot."""

    docs: Mapping[str, DocStats]
    avg_len: float                         # the body's mean length
    norms: dict[str, tuple[float, ...]]
    boosts: dict[str, float]
    ids: dict[str, int]   # a dense number per document: its bit in ``TermScores.members``
    averages: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0)
    # Bit sets of the documents of a site (``caffeine.search.matching``), computed on first use.
    sites: dict = field(default_factory=dict, compare=False, repr=False)


def corpus_weights(docs: Mapping[str, DocStats], avg_len: float | None = None) -> CorpusWeights:
    """``avg_len`` (the body's mean) is recomputed from ``docs``, as are the other fields'."""
    averages = _averages(docs)
    norms = {url: SIMILARITY.field_norms(stats.lengths, averages) for url, stats in docs.items()}
    boosts = {url: SIMILARITY.link_prior(stats.votes) for url, stats in docs.items()}
    return CorpusWeights(docs, averages[0], norms, boosts, {url: i for i, url in enumerate(docs)}, averages)


@dataclass(frozen=True)
class TermScores:
    """One term's postings scored against one ``CorpusWeights`` and one N."""

    df: int                              # postings in the row (every one counts, as in ``rank``)
    contributions: dict[str, float]      # url -> bm25f(t, d), documents in the snapshot
    # (contribution × boost, url), highest first. A tuple, not a list: the garbage collector
    # stops tracking a tuple of untracked objects, but traverses every list on each full
    # collection, and ~1 M entries over all cached terms made those pauses ~130 ms.
    ordered: tuple[tuple[float, str], ...]
    outside: dict[str, Counts]           # url -> counts: postings of documents the snapshot lacks
    # The documents of ``contributions`` as a bit set over ``CorpusWeights.ids``: a query's
    # total hits is the popcount of its terms' OR, microseconds where a union of URL sets of
    # common terms takes milliseconds.
    members: int


def term_contributions(postings: Mapping[str, object], weights: CorpusWeights, n: int,
                       df: int) -> tuple[dict[str, float], dict[str, Counts]]:
    """``score_term``'s ``contributions`` and ``outside`` alone (no order, no bit set): what
    a caller scoring a few documents, or bounding them, needs."""
    weight = SIMILARITY.term_weight(df, n)
    k1, contribution = SIMILARITY.k1, SIMILARITY.contribution
    norms = weights.norms
    contributions: dict[str, float] = {}
    outside: dict[str, Counts] = {}
    for url, value in postings.items():
        norm = norms.get(url)
        # Why inline: this loop runs once per posting of every term scored (a cold query's
        # heads: thousands), and most postings are body-only with a one-byte tf. Decoding
        # those here, not through ``posting_counts``, cut its time by a third; the sum is the
        # same float as ``Similarity.contribution``'s (the other fields add exact zeros).
        if type(value) is bytes and value and 0 < value[0] < 0x80:
            if norm is None:
                outside[url] = (value[0], 0, 0, 0)
            else:
                pseudo = value[0] * norm[0]
                contributions[url] = weight * pseudo / (pseudo + k1) if pseudo > 0 else 0.0
            continue
        counts = _counts(value)
        if norm is None:
            outside[url] = counts
        else:
            contributions[url] = contribution(weight, counts, norm)
    return contributions, outside


def score_term(postings: Mapping[str, object], weights: CorpusWeights, n: int, df: int | None = None) -> TermScores:
    """``postings`` ({url: posting as stored, or its counts}) under ``weights`` and N=n.
    ``df``: the term's document frequency when ``postings`` is only part of its list (the
    cold path, ``caffeine.search.cold``); by default every posting of the whole list is given."""
    df = len(postings) if df is None else df
    contributions, outside = term_contributions(postings, weights, n, df)
    return scores_of(contributions, outside, df, weights)


def scores_of(contributions: dict[str, float], outside: dict[str, Counts], df: int,
              weights: CorpusWeights) -> TermScores:
    """``score_term``'s answer from ``term_contributions``' (``contributions``, ``outside``)
    of postings scored with the document frequency ``df``."""
    boosts = weights.boosts
    ordered = tuple(sorted(((c * boosts[url], url) for url, c in contributions.items()), reverse=True))
    ids = weights.ids
    bits = bytearray((len(ids) + 7) // 8)
    for url in contributions:
        i = ids[url]
        bits[i >> 3] |= 1 << (i & 7)
    return TermScores(df, contributions, ordered, outside, int.from_bytes(bits, "little"))


def rank_scored(
    terms: Mapping[str, TermScores],
    weights: CorpusWeights,
    lookup_outside: Callable[[str], DocStats | None],
    n: int,
    limit: int,
    accept: Callable[[str], bool] | None = None,
    total: int | None = None,
    candidates: list[str] | None = None,
    multipliers: Mapping[str, float] | None = None,
) -> Ranking:
    """``rank``'s result for the query ``terms`` ({term: its TermScores under ``weights`` and
    N=``n``}, in query order); ``lookup_outside(url)`` gives the statistics of documents the
    snapshot lacks (newer than it), or None when they are not in the index.

    ``accept(url)``, when given, keeps only the documents it accepts (``caffeine.search.matching``: all
    terms, phrases, exclusions, site); ``total`` is then the caller's count of them (the
    snapshot's documents; newer accepted ones are added here). ``candidates``, when given,
    are all the snapshot's accepted documents: they are scored directly instead of walking
    the lists (cheaper when few documents contain every term of a query of common terms).
    ``multipliers``: each term's ``m(t)``, as ``rank``'s (TermScores hold the term's own
    contributions, shared by every query of the term; the query's weight is applied here).
    """
    doc_freq = {term: ts.df for term, ts in terms.items()}
    scored = list(terms.values())
    # Each list's m(t), in ``scored``'s order; None when every one is 1 (most queries): the
    # sums are then the plain ones, to the bit.
    factors = None
    if multipliers and any(multipliers.get(term, 1.0) != 1.0 for term in terms):
        factors = [multipliers.get(term, 1.0) for term in terms]
    # Documents newer than the snapshot: scored directly (few; they are always candidates).
    extra: dict[str, tuple[DocStats, tuple, list[float]]] = {}
    for term, ts in terms.items():
        if not ts.outside:
            continue
        weight = SIMILARITY.term_weight(ts.df, n)
        m = multipliers.get(term, 1.0) if multipliers else 1.0
        for url, counts in ts.outside.items():
            if url not in extra:
                stats = lookup_outside(url)
                if stats is None:
                    continue
                extra[url] = (stats, SIMILARITY.field_norms(stats.lengths, weights.averages), [])
            _, norm, parts = extra[url]
            parts.append(SIMILARITY.contribution(weight, counts, norm) * m)
    if accept is not None:
        extra = {url: value for url, value in extra.items() if accept(url)}
    if total is None:
        # Documents in the snapshot (the bit sets) and newer ones (``extra``) are disjoint.
        members = 0
        for ts in scored:
            members |= ts.members
        total = members.bit_count()
    total += len(extra)
    if limit <= 0:
        return Ranking(total, [], doc_freq)

    boosts, docs = weights.boosts, weights.docs

    def exact(url: str) -> float:
        if factors is None:
            return math.fsum([ts.contributions[url] for ts in scored if url in ts.contributions]) * boosts[url]
        return math.fsum([ts.contributions[url] * m for ts, m in zip(scored, factors)
                          if url in ts.contributions]) * boosts[url]

    best: list[tuple[float, str]] = []     # min-heap of the `limit` best (score, url) seen
    scores: dict[str, float] = {}
    seen: set[str] = set()
    # Each list with its m(t): its values scale by it in the bound (the order within a list
    # is the same).
    lists = [(ts.ordered, m) for ts, m in zip(scored, factors or [1.0] * len(scored))
             if ts.ordered] if candidates is None else []
    for url in candidates or ():
        scores[url] = exact(url)
    depth = 0
    while lists:
        bound = 0.0
        for ordered, m in lists:
            upper, url = ordered[depth] if depth < len(ordered) else (0.0, "")
            bound += upper * m
            if url and url not in seen:
                seen.add(url)
                if accept is not None and not accept(url):
                    continue
                score = scores[url] = exact(url)
                if len(best) < limit:
                    heapq.heappush(best, (score, url))
                elif score > best[0][0]:
                    heapq.heapreplace(best, (score, url))
        depth += 1
        lists = [(ordered, m) for ordered, m in lists if depth < len(ordered)]
        # Any document not yet read scores at most Σ of the lists' next values (<= this
        # round's); stop once the limit-th best exact score is clearly above that.
        if len(best) >= limit and best[0][0] > bound * (1 + _MARGIN):
            break
    for url, (stats, _, parts) in extra.items():
        scores[url] = math.fsum(parts) * SIMILARITY.link_prior(stats.votes)
    top = heapq.nsmallest(limit, ((-score, url) for url, score in scores.items()))
    hits = []
    for negative, url in top:
        stats = docs.get(url) or extra[url][0]
        matched = tuple(term for term, ts in terms.items()
                        if url in ts.contributions or (url in ts.outside and url in extra))
        hits.append(Hit(url, -negative, stats, matched))
    return Ranking(total, hits, doc_freq)
