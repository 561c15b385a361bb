"""Ranking: BM25 per (term, document), times a small boost for documents with many inlinks.

Layer: caffeine.index (pure; standard library only). The search API scores with these
functions; tests and the Spark job can compute the same ranking offline.

For a query with terms t1..tn and a document d::

    score(d) = (sum over terms t in d of bm25(t, d)) * inlink_boost(inlinks(d))

    bm25(t, d)   = idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(d) / avg_len))
    idf(t)       = ln(1 + (N - df + 0.5) / (df + 0.5))          (never negative)
    inlink_boost = 1 + 0.1 * ln(1 + inlinks)

with k1 = 1.2, b = 0.75, N = number of indexed documents, df = documents containing t,
len(d) = token count of d (``doc:parsed`` ``length``), avg_len = mean of those. The boost is
logarithmic and small on purpose: links break ties between similarly relevant pages but do
not let a popular page outrank one that matches the query much better (1000 inlinks give
x1.69). Terms absent from a document contribute 0.
"""

from __future__ import annotations

import math
from typing import Iterable

__all__ = ["bm25", "idf", "inlink_boost", "final_score", "K1", "B", "INLINK_WEIGHT"]

K1 = 1.2
B = 0.75
INLINK_WEIGHT = 0.1


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


def inlink_boost(inlinks: int) -> float:
    """1 + 0.1 * ln(1 + inlinks); 1.0 for no (or a negative, i.e. unknown) count."""
    return 1.0 + INLINK_WEIGHT * math.log1p(max(0, inlinks))


def final_score(term_scores: Iterable[float], inlinks: int) -> float:
    """A document's score: the sum of its terms' BM25 scores times its inlink boost."""
    return math.fsum(term_scores) * inlink_boost(inlinks)
