"""Ranking: BM25F over four fields, times a damped link prior (docs/RANKING.md).

Layer: caffeine.index (pure; standard library only). The search API scores with these
functions; tests and the Spark job can compute the same ranking offline.

For a query with terms t1..tn and a document d::

    score(d)  = (sum over terms t in d of bm25f(t, d)) * link_prior(votes(d))

    bm25f(t, d) = idf(t) * tf~ * (k1 + 1) / (tf~ + k1)
    tf~         = sum over fields f of w_f * tf_f(t, d) / (1 - b_f + b_f * len_f(d) / avg_len_f)
    idf(t)      = ln(1 + (N - df + 0.5) / (df + 0.5))          (never negative)
    link_prior  = 1 + W * votes / (votes + K)

Fields (``FIELDS``): the body (the page's visible text), its title, the anchor text of links
to it (``caffeine.index.anchor_record``: a link every page of a site carries counts once) and
the words of its URL path. ``N`` = indexed documents, ``df`` = documents with the term in any
field, ``len_f`` the field's length in tokens, ``avg_len_f`` its mean over the index (a field
whose mean is 0 is taken at length ratio 1). ``votes`` = distinct (linking site, anchor text)
pairs: boilerplate navigation is one vote per site, however many pages carry it, and the
prior saturates (at most x(1 + W)), so a page many others link to wins a tie, never a match.
With one field (body) and no votes this is exactly BM25 (``bm25``) with k1 = 1.2, b = 0.75.
"""

from __future__ import annotations

import math
from typing import Iterable, Sequence

__all__ = ["bm25", "idf", "bm25f", "field_norms", "link_prior", "final_score", "inlink_boost",
           "K1", "B", "FIELDS", "FIELD_WEIGHTS", "FIELD_B", "PRIOR_WEIGHT", "PRIOR_K"]

K1 = 1.2
B = 0.75
FIELDS = ("body", "title", "anchor", "url")
# Per-field weights and length normalisation (see docs/RANKING.md for where they come from).
FIELD_WEIGHTS = (1.0, 3.0, 2.0, 2.0)
FIELD_B = (0.75, 0.5, 0.6, 0.5)
PRIOR_WEIGHT = 0.25
PRIOR_K = 10.0


def idf(doc_freq: int, num_docs: int) -> float:
    """Lucene's BM25 idf: positive even for a term in every document."""
    doc_freq = max(0, min(doc_freq, num_docs))
    return math.log(1.0 + (num_docs - doc_freq + 0.5) / (doc_freq + 0.5))


def bm25(
    tf: int,
    doc_len: int,
    avg_doc_len: float,
    doc_freq: int,
    num_docs: int,
    k1: float = K1,
    b: float = B,
) -> float:
    """One term's BM25 contribution to one document's score (0 when tf is 0)."""
    if tf <= 0:
        return 0.0
    # An empty index (avg 0) would divide by zero; treat every document as average length.
    ratio = doc_len / avg_doc_len if avg_doc_len > 0 else 1.0
    return idf(doc_freq, num_docs) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * ratio))


def field_norms(lengths: Sequence[int], averages: Sequence[float]) -> tuple[float, ...]:
    """Per field, ``w_f / (1 - b_f + b_f * len_f / avg_len_f)``: what one occurrence of a
    term in that field adds to ``tf~`` in this document."""
    return tuple(
        w / (1 - b + b * (length / avg if avg > 0 else 1.0))
        for w, b, length, avg in zip(FIELD_WEIGHTS, FIELD_B, lengths, averages)
    )


def bm25f(counts: Sequence[int], norms: Sequence[float], doc_freq: int, num_docs: int, k1: float = K1) -> float:
    """One term's BM25F contribution; ``counts`` = its (body, title, anchor, url) frequencies
    in the document, ``norms`` = ``field_norms`` of the document."""
    pseudo = sum(c * n for c, n in zip(counts, norms))
    if pseudo <= 0:
        return 0.0
    return idf(doc_freq, num_docs) * pseudo * (k1 + 1) / (pseudo + k1)


def link_prior(votes: int) -> float:
    """1 + W * votes / (votes + K); 1.0 for no (or an unknown, negative) count."""
    votes = max(0, votes)
    return 1.0 + PRIOR_WEIGHT * votes / (votes + PRIOR_K)


def inlink_boost(votes: int) -> float:
    """The link prior (the name earlier versions used)."""
    return link_prior(votes)


def final_score(term_scores: Iterable[float], votes: int) -> float:
    """A document's score: the sum of its terms' scores times its link prior."""
    return math.fsum(term_scores) * link_prior(votes)
