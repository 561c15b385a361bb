"""Ranking: postings rows and corpus statistics -> scored, ordered hits.

Layer: api, pure (imports ``caffeine.index`` only; no I/O). ``api.index`` reads the rows and
the statistics and calls ``rank``; tests call it with hand-made rows.

The formula (``caffeine.index.scoring``, the one place it is defined)::

    score(d) = (Σ over query terms t contained in d of bm25(t, d)) × inlink_boost(inlinks(d))
    bm25(t, d)   = idf(t) · tf · (k1 + 1) / (tf + k1 · (1 − b + b · len(d) / avg_len))
    idf(t)       = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
    inlink_boost = 1 + 0.1 · ln(1 + inlinks(d))            k1 = 1.2, b = 0.75

* ``N``, ``avg_len``: number of indexed documents and their mean length (docstats);
* ``df(t)``: the number of live postings in term t's row (every ``p:<url>`` cell that is not
  a tombstone), counted from the row itself, so it is exact for the term even when the
  cached ``N`` lags a few seconds;
* ``tf``: the posting's term frequency; ``len(d)``, ``inlinks(d)``: ``docstats s:length``,
  ``s:inlinks`` (0 when absent).

OR semantics: every document with at least one query term is a hit (``total``). A posting
whose document has no statistics (not, or no longer, in the index: its docstats row lost
its ``s:length``) is not a hit. Ties are broken by URL, so the order is total and pages are
stable.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Callable, Mapping

from caffeine.index import final_score, idf, inlink_boost
from caffeine.index.scoring import B, K1

__all__ = ["DocStats", "Hit", "Ranking", "posting_tf", "rank",
           "CorpusWeights", "corpus_weights", "TermScores", "score_term", "rank_scored"]


@dataclass(frozen=True, slots=True)
class DocStats:
    """One indexed document's ``docstats`` row, as ranking and results need it."""

    length: int
    inlinks: int = 0
    fingerprint: str = ""
    title: str = ""
    done: int = 0          # s:done: the sequence number of the document's last export


@dataclass(frozen=True, slots=True)
class Hit:
    url: str
    score: float
    stats: DocStats
    matched: tuple[str, ...]   # the query terms the document contains


@dataclass(frozen=True)
class Ranking:
    total: int                 # documents matching at least one term
    hits: list[Hit]            # the best ``limit`` of them, best first
    doc_freq: dict[str, int]   # df of each query term


def posting_tf(value: bytes) -> int:
    """The term frequency of an encoded posting: its leading varint.

    ``caffeine.index.decode_posting`` decodes the positions too; ranking only needs tf, and
    skipping the positions matters for terms with thousands of postings. Tests check it
    against ``decode_posting``. Raises ValueError on an empty or truncated value.
    """
    tf = shift = 0
    for byte in value:
        tf |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if tf < 1:
                raise ValueError(f"posting with tf 0: {value.hex()}")
            return tf
        shift += 7
        if shift > 63:
            break
    raise ValueError(f"malformed posting value {value.hex()!r}")


def rank(
    postings: Mapping[str, Mapping[str, int]],
    lookup: Callable[[str], DocStats | None],
    num_docs: int,
    avg_len: float,
    limit: int,
) -> Ranking:
    """Score every document in ``postings`` ({term: {url: tf}}) and keep the best ``limit``.

    ``lookup(url)`` gives the document's statistics or None when it is not in the index.
    """
    doc_freq = {term: len(row) for term, row in postings.items()}
    # The N the idf uses must cover every df seen (a fresh document may be newer than the
    # cached statistics); otherwise idf would be computed for an impossible df > N.
    n = max([num_docs, *doc_freq.values()]) if doc_freq else num_docs
    # scoring.bm25(tf, len, avg, df, N) = idf(df, N) * tf * (K1 + 1) / (tf + norm(len)), with
    # norm(len) = K1 * (1 - B + B * len / avg): idf is computed once per term and norm once
    # per document instead of once per posting (tests check the scores against bm25 itself).
    scores: dict[str, list[float]] = {}
    matched: dict[str, list[str]] = {}
    known: dict[str, DocStats] = {}
    norms: dict[str, float] = {}
    gone: set[str] = set()
    for term, row in postings.items():
        weight = idf(doc_freq[term], n) * (K1 + 1)
        for url, tf in row.items():
            norm = norms.get(url)
            if norm is None:
                if url in gone:
                    continue
                stats = lookup(url)
                if stats is None:  # not in the index
                    gone.add(url)
                    continue
                known[url] = stats
                norm = norms[url] = _norm(stats.length, avg_len)
                scores[url] = []
                matched[url] = []
            if tf > 0:
                scores[url].append(weight * tf / (tf + norm))
                matched[url].append(term)
    total = len(known)
    scored = ((final_score(s, known[url].inlinks), url) for url, s in scores.items())
    best = heapq.nsmallest(limit, scored, key=lambda pair: (-pair[0], pair[1])) if limit > 0 else []
    hits = [Hit(url, score, known[url], tuple(matched[url])) for score, url in best]
    return Ranking(total, hits, doc_freq)


# -- the same ranking from per-term precomputed scores ------------------------------------------
#
# ``rank`` touches every posting of every query term: ~1 µs each in Python, 20-60 ms for a
# query with a common term over 20,000 documents. The search service instead keeps, per term
# and per corpus snapshot, each document's contribution and the term's documents ordered by
# contribution × boost (``TermScores``, built once and reused until the term's postings or the
# snapshot change), and finds the best ``limit`` with Fagin's threshold algorithm: it reads the
# lists in that order, in parallel, scores each new document exactly, and stops when the
# ``limit``-th best exact score beats what any unread document could still reach. The result
# is exactly ``rank``'s (same scores to the bit, same order; tests compare them).

_MARGIN = 1e-9  # relative: covers the rounding between Σ(c·boost) bounds and fsum(c)·boost


@dataclass(frozen=True)
class CorpusWeights:
    """Each indexed document's BM25 length norm and inlink boost, for one statistics snapshot."""

    docs: Mapping[str, DocStats]
    avg_len: float
    norms: dict[str, float]
    boosts: dict[str, float]
    ids: dict[str, int]   # a dense number per document: its bit in ``TermScores.members``


def corpus_weights(docs: Mapping[str, DocStats], avg_len: float) -> CorpusWeights:
    norms = {url: _norm(stats.length, avg_len) for url, stats in docs.items()}
    boosts = {url: inlink_boost(stats.inlinks) for url, stats in docs.items()}
    return CorpusWeights(docs, avg_len, norms, boosts, {url: i for i, url in enumerate(docs)})


def _norm(length: int, avg_len: float) -> float:
    return K1 * (1 - B + B * (length / avg_len if avg_len > 0 else 1.0))


@dataclass(frozen=True)
class TermScores:
    """One term's postings scored against one ``CorpusWeights`` and one N."""

    df: int                              # postings in the row (every one counts, as in ``rank``)
    contributions: dict[str, float]      # url -> idf·tf·(k1+1)/(tf+norm), documents in the snapshot
    # (contribution × boost, url), highest first. A tuple, not a list: the garbage collector
    # stops tracking a tuple of untracked objects, but traverses every list on each full
    # collection, and ~1 M entries over all cached terms made those pauses ~130 ms.
    ordered: tuple[tuple[float, str], ...]
    outside: dict[str, int]              # url -> tf: postings of documents the snapshot lacks
    # The documents of ``contributions`` as a bit set over ``CorpusWeights.ids``: a query's
    # total hits is the popcount of its terms' OR, microseconds where a union of URL sets of
    # common terms takes milliseconds.
    members: int


def score_term(postings: Mapping[str, int], weights: CorpusWeights, n: int) -> TermScores:
    """``postings`` ({url: tf}, tf >= 1 as ``posting_tf`` guarantees) under ``weights`` and N=n."""
    weight = idf(len(postings), n) * (K1 + 1)
    norms, boosts = weights.norms, weights.boosts
    contributions: dict[str, float] = {}
    outside: dict[str, int] = {}
    for url, tf in postings.items():
        norm = norms.get(url)
        if norm is None:
            outside[url] = tf
        else:
            contributions[url] = weight * tf / (tf + norm)
    ordered = tuple(sorted(((c * boosts[url], url) for url, c in contributions.items()), reverse=True))
    ids = weights.ids
    bits = bytearray((len(ids) + 7) // 8)
    for url in contributions:
        i = ids[url]
        bits[i >> 3] |= 1 << (i & 7)
    return TermScores(len(postings), contributions, ordered, outside, int.from_bytes(bits, "little"))


def rank_scored(
    terms: Mapping[str, TermScores],
    weights: CorpusWeights,
    lookup_outside: Callable[[str], DocStats | None],
    n: int,
    limit: int,
) -> Ranking:
    """``rank``'s result for the query ``terms`` ({term: its TermScores under ``weights`` and
    N=``n``}, in query order); ``lookup_outside(url)`` gives the statistics of documents the
    snapshot lacks (newer than it), or None when they are not in the index."""
    doc_freq = {term: ts.df for term, ts in terms.items()}
    scored = list(terms.values())
    # Documents newer than the snapshot: scored directly (few; they are always candidates).
    extra: dict[str, tuple[DocStats, float, list[float]]] = {}
    for term, ts in terms.items():
        if not ts.outside:
            continue
        weight = idf(ts.df, n) * (K1 + 1)
        for url, tf in ts.outside.items():
            if url not in extra:
                stats = lookup_outside(url)
                if stats is None:
                    continue
                extra[url] = (stats, _norm(stats.length, weights.avg_len), [])
            _, norm, parts = extra[url]
            parts.append(weight * tf / (tf + norm))
    # Documents in the snapshot (the bit sets) and newer ones (``extra``) are disjoint.
    members = 0
    for ts in scored:
        members |= ts.members
    total = members.bit_count() + len(extra)
    if limit <= 0:
        return Ranking(total, [], doc_freq)

    boosts, docs = weights.boosts, weights.docs

    def exact(url: str) -> float:
        return math.fsum([ts.contributions[url] for ts in scored if url in ts.contributions]) * boosts[url]

    best: list[tuple[float, str]] = []     # min-heap of the `limit` best (score, url) seen
    scores: dict[str, float] = {}
    lists = [ts.ordered for ts in scored if ts.ordered]
    depth = 0
    while lists:
        bound = 0.0
        for ordered in lists:
            upper, url = ordered[depth] if depth < len(ordered) else (0.0, "")
            bound += upper
            if url and url not in scores:
                score = scores[url] = exact(url)
                if len(best) < limit:
                    heapq.heappush(best, (score, url))
                elif score > best[0][0]:
                    heapq.heapreplace(best, (score, url))
        depth += 1
        lists = [ordered for ordered in lists if depth < len(ordered)]
        # Any document not yet read scores at most Σ of the lists' next values (<= this
        # round's); stop once the limit-th best exact score is clearly above that.
        if len(best) >= limit and best[0][0] > bound * (1 + _MARGIN):
            break
    for url, (stats, _, parts) in extra.items():
        scores[url] = math.fsum(parts) * inlink_boost(stats.inlinks)
    top = heapq.nsmallest(limit, ((-score, url) for url, score in scores.items()))
    hits = []
    for negative, url in top:
        stats = docs.get(url) or extra[url][0]
        matched = tuple(term for term, ts in terms.items()
                        if url in ts.contributions or (url in ts.outside and url in extra))
        hits.append(Hit(url, -negative, stats, matched))
    return Ranking(total, hits, doc_freq)
