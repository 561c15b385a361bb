"""The ranking formula written out from docs/RANKING.md, independent of the library.

Tests hold ``caffeine.index.scoring.SIMILARITY`` (and every fast path that inlines it)
against these functions: the values below are the documented ones, typed in again on purpose,
so a change of the formula must change the docs' table and this reference together.
"""

from __future__ import annotations

import math

K1 = 1.2
FIELD_WEIGHTS = (1.0, 3.0, 3.0, 2.0)   # body, title, anchor, url
FIELD_B = (0.5, 1.0, 0.6, 0.5)
PRIOR_W, PRIOR_K = 0.5, 10.0
ALPHA = 0.3
BETA = 1.0                             # the title clause
GAMMA = 2.0                            # a qualified name's innermost qualifier


def idf(df: int, n: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def bm25(tf: int, dl: int, avg: float, df: int, n: int) -> float:
    """Classic single-field BM25 (k1 = 1.2, the body's b); an empty index (avg 0) is ratio 1."""
    if tf <= 0:
        return 0.0
    ratio = dl / avg if avg > 0 else 1.0
    b = FIELD_B[0]
    return idf(df, n) * tf * (K1 + 1) / (tf + K1 * (1 - b + b * ratio))


def bm25f(counts, lengths, averages, df: int, n: int) -> float:
    """A term's summand before the prior: BM25F's saturated frequency plus the title clause
    (the title's count normalised by its length as the title field is)."""
    # An empty field is normalised as one of one token (it holds no term; b = 1 needs it).
    pseudo = sum(c * w / (1 - b + b * (max(length, 1) / avg if avg > 0 else 1.0))
                 for c, w, b, length, avg in zip(counts, FIELD_WEIGHTS, FIELD_B, lengths, averages))
    if pseudo <= 0:
        return 0.0
    b_title, title_avg = FIELD_B[1], averages[1]
    ttf = counts[1] / (1 - b_title + b_title * (max(lengths[1], 1) / title_avg if title_avg > 0 else 1.0))
    return idf(df, n) * (K1 + 1) * (pseudo / (pseudo + K1) + BETA * ttf / (ttf + K1))


def prior(votes: int) -> float:
    votes = max(0, votes)
    return 1 + PRIOR_W * votes / (votes + PRIOR_K)


def multiplier(qualifies: bool) -> float:
    """m(t): γ for the innermost qualifier of a qualified name in the query, else 1."""
    return GAMMA if qualifies else 1.0


def score(term_scores, votes: int) -> float:
    return math.fsum(term_scores) * prior(votes)


def proximity(distance: int | None) -> float:
    return 0.0 if distance is None else math.log(ALPHA + math.exp(-distance)) - math.log(ALPHA)
