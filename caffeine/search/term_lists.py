"""Query terms' posting lists as the search path passes them around: postings rows by term,
and a held list's scores under one statistics snapshot.

Layer: search. Pure (imports ``caffeine.index.schema``, ``caffeine.search.ranking`` and
``caffeine.search.postings_cache``' ``TermPostings``; no I/O). Used by ``caffeine.search.searcher`` (warm queries) and
``caffeine.search.cold_reads`` (cold ones).
"""

from __future__ import annotations

from sys import intern
from typing import Callable, Mapping

from caffeine.index.schema import posting_cells

from caffeine.search.postings_cache import TermPostings
from caffeine.search.ranking import CorpusWeights, TermScores, score_term

__all__ = ["postings_by_term", "term_scores"]


def postings_by_term(terms: list[str], rows: Mapping[bytes, Mapping[str, bytes]],
                     cells: Callable = posting_cells) -> dict[str, dict[str, bytes]]:
    """Postings rows -> ``{term: {url: value}}``; URLs interned: the posting lists held in
    memory then share one string per document, not one per posting. ``cells``: how a row's
    cells give ``(url, value)`` pairs (``posting_qualifier_cells`` for a
    ``ServingTable.read_common`` answer, keyed by qualifier)."""
    return {term: {intern(url): value for url, value in cells(rows.get(term.encode(), {}))}
            for term in terms}


def term_scores(postings: TermPostings, weights: CorpusWeights, n: int) -> TermScores:
    """The term's scores under this snapshot, computed once per (postings, snapshot, N) and
    kept with the postings (so evicted with them)."""
    held = postings.derived.get("scores")
    if held is not None and held[0] is weights and held[1] == n:
        return held[2]
    scores = score_term(postings.postings, weights, n)
    postings.derived["scores"] = (weights, n, scores)  # a race computes it twice, harmlessly
    return scores
