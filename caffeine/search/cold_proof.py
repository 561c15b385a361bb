"""Cold queries' proof: a page ranked over the candidates is the whole lists' page, or None
(steps 3 and 4 of ``caffeine.search.cold``'s module docstring; docs/RANKING.md, "Cold queries").

Layer: search. Pure (imports ``caffeine.index``, ``caffeine.search.cold``'s heads and the engine's ranking and
matching; no I/O). ``caffeine.search.cold_reads`` calls ``answer`` after reading the candidates' postings;
tests compare what it proves with ``caffeine.search.matching.match`` over the whole lists.

Totals are estimated (``Match.total_exact`` False): the document frequencies are exact, which
documents contain several terms is known only among the candidates. The estimate assumes the
terms independent (N·Πdf/N documents contain all of them, N·(1 − Π(1 − df/N)) some), never
below what the candidates showed, and is scaled by the share of candidates a phrase,
exclusion or site filter kept.
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

from caffeine.index.scoring import SIMILARITY

from caffeine.search.cold import MARGIN, Head, corpus_ratio
from caffeine.search.matching import Match, match
from caffeine.search.query import ParsedQuery
from caffeine.search.ranking import CorpusWeights, DocStats, TermScores, score_term, scores_of, term_contributions, term_multipliers

__all__ = ["answer"]


def answer(
    query: ParsedQuery,
    heads: Mapping[str, Head],
    whole: Mapping[str, TermScores],
    whole_raw: Mapping[str, Mapping[str, bytes]],
    candidates: list[str],
    found: Mapping[str, Mapping[str, bytes]],
    weights: CorpusWeights,
    lookup_outside: Callable[[str], DocStats | None],
    n: int,
    limit: int,
    left_out: float = 0.0,
    pruned: bool = False,
    strict_known: bool = False,
) -> Match | None:
    """The query's best ``limit`` documents, or None when they cannot be proved (step 4).

    ``found``: for each term of ``heads``, its postings of ``candidates`` read by URL (those
    it has; the others it lacks). ``whole``/``whole_raw``: the other terms, scored and as
    stored. ``n``: N, at least every term's document frequency. ``left_out``: the most a
    head document ``prune`` left out of the candidates can score; ``pruned``: whether it
    left any out (then no list is wholly among the candidates, whatever the heads say).
    ``strict_known``: every document containing every query word is a candidate (they were
    read as the words' lists' intersection), whatever the heads say.
    """
    ratio = corpus_ratio(weights)
    if ratio is None:
        return None
    members = set(candidates)
    # A document containing every word is in each word's list: when one list is wholly among
    # the candidates, so is every such document.
    every_strict_known = strict_known or (not pruned and any(
        heads[t].complete if t in heads else all(url in members for _, url in whole[t].ordered)
        for t in query.terms))
    scored: dict[str, TermScores] = {}
    raw: dict[str, dict[str, bytes]] = {}
    bound = 0.0
    multipliers = term_multipliers(query.terms, query.qualifiers)
    for term in query.lookups:
        if term in heads:
            head = heads[term]
            postings = {url: value for url, value in head.postings.items() if url in members}
            postings.update(found.get(term, {}))
            scored[term] = _head_scores(head, members, found.get(term, {}), weights, n)
            if term in query.terms:
                bound += head.tail(n, ratio) * multipliers[term]
        else:
            full = whole_raw[term]
            postings = {url: full[url] for url in candidates if url in full}
            scored[term] = score_term(postings, weights, n, df=whole[term].df)
            if term in query.terms:
                bound += next((value for value, url in whole[term].ordered if url not in members), 0.0) * multipliers[term]
        raw[term] = postings
    matched = match(query, scored, raw, weights, lookup_outside, n, limit)
    bound = max(bound, left_out)
    if limit > 0 and not _proved(matched, bound * (1 + MARGIN), every_strict_known, limit, len(query.terms)):
        return None
    return _estimated(query, matched, scored, n, every_strict_known)


def _head_scores(head: Head, members: set[str], found: Mapping[str, bytes], weights: CorpusWeights,
                 n: int) -> TermScores:
    """``score_term`` of the head's postings of ``members`` and those ``found`` by URL (an
    intersection's may be in the head too: the same postings), with the head's df: the same floats, but the head's postings are
    scored once per query (``Head.scored``) and only those found are scored here."""
    contributions, outside = head.scored(weights, n)
    parts = {url: c for url, c in contributions.items() if url in members}
    beyond = {url: c for url, c in outside.items() if url in members}
    more, more_beyond = term_contributions(found, weights, n, head.df)
    parts.update(more)
    beyond.update(more_beyond)
    return scores_of(parts, beyond, head.df, weights)


def _proved(matched: Match, bound: float, every_strict_known: bool, limit: int, words: int) -> bool:
    """Is ``matched`` (over the candidates) the page the whole lists give, when no document
    outside the candidates scores above ``bound`` (BM25F × prior)?"""
    hits = matched.hits
    strict = [mh for mh in hits if mh.all_terms]
    if every_strict_known:
        pass  # every all-words document is a candidate: that part of the page is exact
    elif matched.strict_floor is not None and matched.strict_floor > bound:
        pass  # the best `depth` all-words documents, which proximity re-ranks, are candidates
    else:
        # A document outside can be among the best `depth` and gain at most the largest
        # proximity bonus. It cannot reach the page if the page is all-words documents whose
        # BM25F × prior beats it (so none of them loses its place among the `depth`, nor its
        # bonus), and whose lowest final score beats it with the largest bonus added.
        reach = bound + (SIMILARITY.proximity_bonus(1) if words > 1 else 0.0)
        if not (len(strict) == len(hits) == limit and all(mh.hit.score > bound for mh in hits)
                and hits[-1].score > reach):
            return False
    if len(strict) >= limit:
        return True
    # The ranked fallback follows the all-words documents: exact only if they are all known,
    # and if it fills the page with documents above what others can reach.
    if not every_strict_known:
        return False
    if len(hits) < limit:
        return bound == 0.0
    return matched.fallback_floor is None or matched.fallback_floor > bound


def _estimated(query: ParsedQuery, matched: Match, scored: Mapping[str, TermScores], n: int,
               every_strict_known: bool) -> Match:
    """``matched`` with totals estimated over the whole corpus (module docstring); the
    all-words total is exact when every all-words document is a candidate."""
    shares = [min(1.0, scored[t].df / n) if n else 0.0 for t in query.terms]
    every = n * math.prod(shares)
    some = n * (1 - math.prod(1 - s for s in shares))
    kept = _kept_share(query, matched, scored)
    strict = matched.strict_total if every_strict_known else max(matched.strict_total, round(every * kept))
    total = strict if len(query.terms) == 1 else max(matched.total, strict, round(some * kept))
    return Match(total, strict, matched.hits, matched.doc_freq, False, matched.strict_floor, matched.fallback_floor)


def _kept_share(query: ParsedQuery, matched: Match, scored: Mapping[str, TermScores]) -> float:
    """Of the candidates containing every term, the share a phrase, an exclusion or a site
    filter left in (1 without filters)."""
    if not (query.phrases or query.excluded or query.sites):
        return 1.0
    containing = None
    for term in query.terms:
        bits = scored[term].members
        containing = bits if containing is None else containing & bits
    containing_count = (containing or 0).bit_count()
    return matched.strict_total / containing_count if containing_count else 1.0
