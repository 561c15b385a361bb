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
from dataclasses import dataclass
from typing import Callable, Mapping

from caffeine.index import final_score, idf
from caffeine.index.scoring import B, K1

__all__ = ["DocStats", "Hit", "Ranking", "posting_tf", "rank"]


@dataclass(frozen=True, slots=True)
class DocStats:
    """One indexed document's ``docstats`` row, as ranking and results need it."""

    length: int
    inlinks: int = 0
    fingerprint: str = ""
    title: str = ""


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
                norm = norms[url] = K1 * (1 - B + B * (stats.length / avg_len if avg_len > 0 else 1.0))
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
