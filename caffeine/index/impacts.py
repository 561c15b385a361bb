"""Impact order: a term's postings sorted by a bound on what each can add to a score.

Layer: index. Pure; standard library only. Export writes every posting a second
time, into the term's ``impacts`` row under ``impact_qualifier(level, url)``, so that the row
read in qualifier order yields the term's postings best first; the search service reads the
first few hundred of them instead of the whole posting list (docs/RANKING.md, "Cold
queries"), and ``unread_bound`` says how much any posting it did not read could still add.

The impact of a posting of term t in document d is

    impact(t, d) = (sat(tf~_ref(t, d)) + β · sat(ttf_ref(t, d))) × link_prior(votes(d))
                                                                        sat(x) = x / (x + k1)

where ``tf~_ref`` is BM25F's weighted, length-normalised frequency (``caffeine.index.scoring``)
and ``ttf_ref`` the title clause's length-normalised title count, both computed with fixed
``REFERENCE_AVERAGES`` in place of the corpus's mean field lengths, which export cannot know.
Its ``level`` is ``ceil(impact' × SCALE)``, where ``impact'`` is the impact
at the document's statistics moved to a coarse grid in the direction that raises it
(``optimistic_statistics``): each field length down to a point of ``GRID`` (every value up to
``GRID_EXACT``, then steps of a tenth), the votes up to a point of ``VOTE_GRID`` (where the
link prior has risen by another ``1 / VOTE_STEPS`` of its range). So ``level / SCALE`` is never
below the impact, and a level moves only when a length moves by about 10% or the votes cross
one of a handful of counts: a re-export after a small change (a page gains an inlink, its
anchor text a few words) rewrites the impacts cells of the terms whose own counts changed, not
every term's (``caffeine.observers.export``).

**The bound.** At query time, with the corpus means ``a_f``, the posting contributes
``c(t, d) = idf(t)·(k1+1) · (sat(tf~(t, d)) + β·sat(ttf(t, d))) × p`` with
``p = link_prior(votes(d))`` (the score's summand for t, prior included). Field by field, the
query's length normalisation is the reference one times ``ρ_f(d) = (1 − b + b·len_f/ref_f) /
(1 − b + b·len_f/a_f)``; a field the document does not have (length 0) holds none of its
terms. So ``tf~ ≤ R · tf~_ref`` and ``ttf ≤ R · ttf_ref`` (the title's ``ρ``) for every
document of a corpus, with ``R`` the largest ``ρ_f(d)`` over its documents and their non-empty
fields (``length_ratio`` of each; ``R ≤ max(1, max_f a_f / ref_f)`` whatever the lengths),
hence ``sat(tf~) ≤ g(z)`` and ``sat(ttf) ≤ g(v)`` with ``z = sat(tf~_ref)``,
``v = sat(ttf_ref)`` and ``g(x) = sat(R · sat⁻¹(x)) = R·x / (1 + (R − 1)·x)``. With
``y = level/SCALE`` the posting has ``p·(z + β·v) ≤ y``, ``z, v < 1``, ``p`` in [1, P]
(P = 1 + W, the prior's ceiling), and ``c / (idf·(k1+1)) = p·(g(z) + β·g(v))``.
``unread_bound`` takes the largest value of that over every such posting:

- R > 1: ``g`` is concave and rises, so for a fixed ``p`` the most of ``g(z) + β·g(v)`` under
  ``z + β·v ≤ y/p`` is where ``g'(z) = g'(v)``: ``z = v = y / (p·(1 + β))`` (or both 1, the
  sum ``1 + β``, once that passes 1). Then ``p·(1 + β)·g(y / (p·(1 + β)))`` grows with ``p``
  (``p·g(c/p) = R·c·p / (p + (R − 1)·c)``), so ``p = P``.
- R ≤ 1: ``g(x) ≤ x``, so it is at most ``y``; and each part is at most its own bound:
  ``p·g(z)`` with ``p·z ≤ y`` at most ``s(y)``, ``β·p·g(v)`` with ``p·v ≤ y/β`` at most
  ``β·s(y/β)``, where ``s(x) = max p·g(min(1, x/p))`` over p in [1, P] (reached at
  ``p = min(max(x, 1), P)``: ``p·g(x/p)`` falls with p once ``x/p ≤ 1``); the smaller of ``y``
  and their sum.

With β = 0 both reduce to the bound of BM25F alone (``P · g(min(1, y/P))`` for R ≥ 1), and with
R = 1 to ``idf·(k1+1)·y``. It holds for any document whose statistics (lengths, votes) are those its
export wrote, the statistics docstats carries: ``tf~_ref``, ``ttf_ref`` and the prior only grow
when a length shrinks or the votes grow, so the grid's statistics give ``y`` at or above the one
the exact statistics would.

The bound is tight where the corpus means are near ``REFERENCE_AVERAGES``; far from them it
is looser (R large, or levels that overstate documents of average length), and a reader that
needs it to prove something (``caffeine.search.cold``) succeeds less often: never wrong, only slower.
"""

from __future__ import annotations

import bisect
import math
from typing import Sequence

from caffeine.index.scoring import SIMILARITY

__all__ = ["REFERENCE_AVERAGES", "IMPACT_FORMAT", "LEVEL_DEFINITIONS", "level_definition", "SCALE", "MAX_LEVEL", "LEVEL_DIGITS", "GRID", "GRID_EXACT",
           "VOTE_STEPS", "VOTE_GRID", "VOTES_PAST_GRID",
           "optimistic_statistics", "impact", "impact_level",
           "level_ceiling", "impact_qualifier", "split_impact_qualifier", "length_ratio", "unread_bound"]

# Mean field lengths (body, title, anchor, url) assumed when export ranks a posting: a web
# page's visible text is a few hundred words, its title a few, its URL path two or three.
# Any positive values keep the bound valid; close to a corpus's real means, the order follows
# its real scores more closely and the bound is tight. Part of the index format: changing
# them changes every level (export's EXPORT_FORMAT).
REFERENCE_AVERAGES = (400.0, 6.0, 8.0, 3.0)
# The format of the impacts cells (the level's definition). Export records it in each
# document's docstats (s:impacts), and readers use impacts only when every document has it:
# an index exported before, or with other levels, reads its posting lists whole.
IMPACT_FORMAT = 3
# Format 2's and 3's impacts reach (1 + β) × P = 3 (format 1's P = 1.25): a coarser scale keeps
# every level within LEVEL_DIGITS. Format 3 normalises the title clause by the title's length.
SCALE = 25_000
# What each IMPACT_FORMAT's levels mean: the parameters a stored level was computed with and
# a reader's bound assumes (``level_definition``). The grids are not in it: any grid only
# raises a level, so levels of any grid are bounds under the same definition. A change of the
# formula (``caffeine.index.scoring.SIMILARITY``), of REFERENCE_AVERAGES or of SCALE makes
# stored levels mean something else: it needs a new format here (and a new EXPORT_FORMAT, so
# export rewrites them), or the test that compares the two fails.
LEVEL_DEFINITIONS = {
    1: {"k1": 1.2, "field_weights": (1.0, 3.0, 2.0, 2.0), "field_b": (0.75, 0.5, 0.6, 0.5),
        "prior_weight": 0.25, "prior_k": 10.0, "title_clause": 0.0, "reference_averages": (400.0, 6.0, 8.0, 3.0),
        "scale": 50_000},
    2: {"k1": 1.2, "field_weights": (1.0, 3.0, 3.0, 2.0), "field_b": (0.5, 0.5, 0.6, 0.5),
        "prior_weight": 0.5, "prior_k": 10.0, "title_clause": 1.0, "reference_averages": (400.0, 6.0, 8.0, 3.0),
        "scale": 25_000},
    3: {"k1": 1.2, "field_weights": (1.0, 3.0, 3.0, 2.0), "field_b": (0.5, 1.0, 0.6, 0.5),
        "prior_weight": 0.5, "prior_k": 10.0, "title_clause": 1.0, "title_clause_normalised": True,
        "reference_averages": (400.0, 6.0, 8.0, 3.0), "scale": 25_000},
}
MAX_LEVEL = 99_999          # impact <= (1 + β) × P = 3 is at most 75,000 levels
LEVEL_DIGITS = 5


def level_definition() -> dict:
    """The parameters today's levels are computed with (compare ``LEVEL_DEFINITIONS``)."""
    return {"k1": SIMILARITY.k1, "field_weights": SIMILARITY.field_weights, "field_b": SIMILARITY.field_b,
            "prior_weight": SIMILARITY.prior_weight, "prior_k": SIMILARITY.prior_k,
            "title_clause": SIMILARITY.title_clause, "title_clause_normalised": True,
            "reference_averages": REFERENCE_AVERAGES, "scale": SCALE}


def impact(counts: Sequence[int], lengths: Sequence[int], votes: int) -> float:
    """``(sat(tf~_ref) + β·sat(ttf_ref)) × link_prior(votes)`` of a posting with field
    ``counts`` in a document with field ``lengths`` (body, title, anchor, url) and ``votes``,
    both frequencies normalised with ``REFERENCE_AVERAGES``."""
    pseudo = SIMILARITY.reference_pseudo(counts, lengths, REFERENCE_AVERAGES)
    if pseudo <= 0:
        return 0.0
    title = SIMILARITY.title_term(counts[1], SIMILARITY.title_norm(lengths[1], REFERENCE_AVERAGES[1]))
    return (SIMILARITY.saturation(pseudo) + title) * SIMILARITY.link_prior(votes)


# The grid field lengths are taken on when a level is computed (``optimistic_statistics``):
# every value up to GRID_EXACT, then steps of a tenth (each point ``p * 11 // 10`` after the one before, in
# integers, so every machine computes the same grid). Coarser: fewer impacts cells rewritten
# when a popular page's anchor text grows, looser unread bounds (at most about a
# step in a length's normalisation).
GRID_EXACT = 16


def _grid(limit: int = 1 << 48) -> tuple[int, ...]:
    points, point = list(range(GRID_EXACT + 1)), GRID_EXACT
    while point < limit:
        point = max(point + 1, point * 11 // 10)
        points.append(point)
    return tuple(points)


GRID = _grid()


def _grid_down(n: int) -> int:
    """The grid point at or below ``n``."""
    return GRID[bisect.bisect_right(GRID, n) - 1]


# The votes' grid is in the link prior's own units: votes enter a level only through the
# prior, which spans [1, 1 + W] whatever their number. Its points are the least counts at
# which the prior has risen by another W / VOTE_STEPS (found with ``link_prior`` itself, so
# the grid follows the formula wherever it is defined): 0, 2, 3, 5, 7, 10, 15, 24, 40, 90
# for today's prior, 1 + W·v/(v + K) with K = 10; past the last, the votes
# count as VOTES_PAST_GRID (a prior a hair under the ceiling, above any real count's). A level
# moves with the votes only when they cross one of those counts. On a grid in votes (exact up
# to 16), each inlink a page with few gained moved every one of its levels, so the export
# wrote all its impacts cells again and tombstoned the old ones: a changed page's dozen link
# targets cost the index more than the page itself. The prior a level assumes is at most
# W / VOTE_STEPS (0.025) above the document's own, so an unread bound loosens by at most that.
VOTE_STEPS = 10
VOTES_PAST_GRID = 1 << 48


def _vote_grid() -> tuple[int, ...]:
    points, votes = [0], 0
    for step in range(1, VOTE_STEPS):
        while SIMILARITY.link_prior(votes) < SIMILARITY.link_prior(0) + SIMILARITY.prior_weight * step / VOTE_STEPS:
            votes += 1
        points.append(votes)
    return tuple(sorted(set(points)))


VOTE_GRID = _vote_grid()


def _votes_up(votes: int) -> int:
    """The votes' grid point at or above ``votes`` (``VOTES_PAST_GRID`` past the last)."""
    i = bisect.bisect_left(VOTE_GRID, votes)
    return VOTE_GRID[i] if i < len(VOTE_GRID) else max(votes, VOTES_PAST_GRID)


def optimistic_statistics(lengths: Sequence[int], votes: int) -> tuple[tuple[int, ...], int]:
    """The statistics a level is computed at: each length down to ``GRID`` and the votes up to
    ``VOTE_GRID``, both moves that can only raise an impact (a shorter field normalises to
    more, more votes give a larger prior)."""
    return tuple(_grid_down(length) for length in lengths), _votes_up(votes)


def impact_level(counts: Sequence[int], lengths: Sequence[int], votes: int) -> int:
    """The posting's level: ``ceil(impact × SCALE)`` at ``optimistic_statistics``, so
    ``level_ceiling(level) >= impact(counts, lengths, votes)``."""
    grid_lengths, grid_votes = optimistic_statistics(lengths, votes)
    return min(MAX_LEVEL, math.ceil(impact(counts, grid_lengths, grid_votes) * SCALE))


def level_ceiling(level: int) -> float:
    return level / SCALE


def impact_qualifier(level: int, url: str) -> str:
    """The posting's qualifier in the term's ``impacts`` row: higher levels sort first."""
    if not 0 <= level <= MAX_LEVEL:
        raise ValueError(f"impact level out of range: {level}")
    return f"{MAX_LEVEL - level:0{LEVEL_DIGITS}d}{url}"


def split_impact_qualifier(qualifier: str) -> tuple[int, str]:
    """``(level, url)`` of an ``impact_qualifier``; ValueError if it is not one."""
    digits = qualifier[:LEVEL_DIGITS]
    if len(digits) != LEVEL_DIGITS or not digits.isdigit():
        raise ValueError(f"not an impact qualifier: {qualifier!r}")
    return MAX_LEVEL - int(digits), qualifier[LEVEL_DIGITS:]


def length_ratio(lengths: Sequence[int], averages: Sequence[float]) -> float:
    """The largest ``ρ_f`` of a document with field ``lengths`` under the corpus means
    ``averages``, over its non-empty fields (0 for a document with none)."""
    ratio = 0.0
    for length, b, reference, mean in zip(lengths, SIMILARITY.field_b, REFERENCE_AVERAGES, averages):
        if length > 0:
            # A field whose corpus mean is 0 is normalised at length ratio 1 (scoring).
            query_norm = 1 - b + b * length / mean if mean > 0 else 1.0
            ratio = max(ratio, (1 - b + b * length / reference) / query_norm)
    return ratio


def unread_bound(weight: float, ratio: float, level: int) -> float:
    """The most a posting at ``level`` or below can contribute to a score (prior included),
    for a term whose ``idf × (k1 + 1)`` is ``weight``, in a corpus whose documents'
    ``length_ratio`` is at most ``ratio`` (the module docstring derives it)."""
    y = level_ceiling(level)
    ceiling = SIMILARITY.prior_ceiling
    beta = SIMILARITY.title_clause

    def g(x: float) -> float:
        return ratio * x / (1.0 + (ratio - 1.0) * x)

    if ratio <= 1.0:
        def saturated(x: float) -> float:
            """max over p in [1, P] of p·g(min(1, x/p)) (at 1, P and x clamped: safe and exact)."""
            def at(prior: float) -> float:
                z = x / prior
                return prior if z >= 1.0 else prior * g(z)
            return max(at(1.0), at(ceiling), at(min(max(x, 1.0), ceiling)))

        title = beta * saturated(y / beta) if beta > 0 else 0.0
        return weight * min(y, saturated(y) + title)
    share = y / (ceiling * (1.0 + beta))
    if share >= 1.0:
        return weight * ceiling * (1.0 + beta)
    return weight * ceiling * (1.0 + beta) * g(share)
