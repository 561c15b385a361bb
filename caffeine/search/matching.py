"""Which documents a query accepts, and in what order: all words, phrases, exclusions, site,
a ranked fallback, and proximity.

Layer: search. Pure (imports ``caffeine.index`` and ``caffeine.search.ranking``; no I/O). ``caffeine.search.searcher``
reads the postings and statistics and calls ``match``; tests call it with hand-made rows.

Semantics (docs/RANKING.md):

1. **All words** (strict): a document is accepted when it contains every query term (in any
   field), every phrase (its words at consecutive body positions, ``phrase_at``), none of
   the excluded words (in any field), and is on one of the ``site:`` hosts (the host or a
   subdomain) if any is given. These come first, ranked by BM25F × prior plus a proximity
   bonus (below).
2. **Ranked fallback**: when fewer strict documents exist than the page asks for
   (``limit``) and the query has more than one term, the documents that contain at least
   one term but not all (phrases, exclusions and site still required) follow, ranked by
   BM25F × prior alone, each marked ``all_terms=False``.
3. **Proximity** (Tao & Zhai, SIGIR 2007, "MinDist"): for queries of two or more terms, a
   strict document's score gains ``SIMILARITY.proximity_bonus``, ``ln(α + e^(−δ)) − ln(α)``
   with δ = the smallest distance in body tokens between occurrences of two different query
   terms (1 = adjacent: +0.80; 2: +0.37; 5: +0.02; no body occurrence of two terms: 0)
   (``_rerank_by_proximity``). Applied to the best
   ``max(limit, PROXIMITY_DEPTH)`` strict documents by BM25F × prior, re-sorted.

Positions are the first 64 body occurrences of a term (``caffeine.index.MAX_POSITIONS``):
a phrase that occurs only past them is not found.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable, Mapping
from urllib.parse import urlsplit

from caffeine.index import posting_positions
from caffeine.index.scoring import SIMILARITY

from caffeine.search.query import ParsedQuery
from caffeine.search.ranking import CorpusWeights, DocStats, Hit, TermScores, rank_scored, term_multipliers

__all__ = ["PROXIMITY_DEPTH", "Match", "MatchedHit", "match", "match_depth", "phrase_at",
           "min_distance", "on_site"]

PROXIMITY_DEPTH = 50
# At most this many documents containing every term (of a query of two or more) are scored
# one by one; more, and the threshold algorithm walks the terms' lists (skipping the others)
# until it has the best. Scoring one costs ~2.5 µs; a walk over common terms ~1 ms, however
# many documents it accepts, but far more when few documents it meets are accepted.
DIRECT_MAX = 1024
# A phrase query's total is counted exactly over at most this many documents containing all
# its words (each needs its positions decoded); beyond, it is estimated from a sample of that
# many (``Match.total_exact`` False).
PHRASE_COUNT_MAX = 500


@dataclass(frozen=True)
class MatchedHit:
    hit: Hit
    score: float           # the hit's score with the proximity bonus
    all_terms: bool        # a strict match (False: from the fallback)


@dataclass(frozen=True)
class Match:
    total: int             # accepted documents: strict + those with some of the terms
    strict_total: int      # documents containing every term (and phrase, no exclusion, on site)
    hits: list[MatchedHit]
    doc_freq: dict[str, int]
    total_exact: bool = True   # False: totals estimated (a phrase query over PHRASE_COUNT_MAX, a cold query)
    # The lowest BM25F × prior score (proximity not included) of the best ``depth`` strict
    # documents, None when fewer than ``depth`` are strict; ``depth`` is the number of strict
    # documents proximity re-ranks (``match_depth``). ``caffeine.search.cold`` proves its answers with it.
    strict_floor: float | None = None
    # The lowest score among the ranked fallback's documents on the page (None: none there).
    fallback_floor: float | None = None


def on_site(url: str, sites: tuple[str, ...]) -> bool:
    """Is ``url``'s host (with its port, if it has one) one of ``sites`` or below one?"""
    try:
        parts = urlsplit(url)
        host, netloc = (parts.hostname or "").lower(), parts.netloc.lower()
    except ValueError:
        return False
    return any(host == site or netloc == site or host.endswith("." + site) for site in sites)


def _positions(value: bytes | None) -> tuple[int, ...]:
    if not value:
        return ()
    try:
        return posting_positions(value)
    except ValueError:
        return ()


def phrase_at(positions: list[tuple[int, ...]]) -> bool:
    """Do the words' position lists (one per phrase word, in phrase order) hold p, p+1, ...?"""
    if not positions or not all(positions):
        return False
    rest = [set(p) for p in positions[1:]]
    return any(all(start + i + 1 in s for i, s in enumerate(rest)) for start in positions[0])


def min_distance(positions: list[tuple[int, ...]]) -> int | None:
    """The smallest distance between occurrences of two different terms (None: < 2 terms)."""
    merged = sorted((p, i) for i, ps in enumerate(positions) for p in ps)
    best = None
    for (p1, t1), (p2, t2) in zip(merged, merged[1:]):
        if t1 != t2 and (best is None or p2 - p1 < best):
            best = p2 - p1
    return best


def _bits_of(weights: CorpusWeights, urls) -> int:
    ids = weights.ids
    bits = 0
    for url in urls:
        i = ids.get(url)
        if i is not None:
            bits |= 1 << i
    return bits


def _site_bits(weights: CorpusWeights, sites: tuple[str, ...]) -> int:
    key = ("sites", sites)
    bits = weights.sites.get(key)
    if bits is None:
        bits = _bits_of(weights, (url for url in weights.docs if on_site(url, sites)))
        weights.sites[key] = bits  # a race computes it twice, harmlessly
    return bits


def _urls_of(weights: CorpusWeights, bits: int) -> list[str]:
    """The documents of a bit set over ``weights.ids``, in id order (a byte at a time: a
    bit-by-bit walk of a 20,000-bit integer copies it once per member)."""
    order = weights.sites.get("order")
    if order is None:
        order = weights.sites["order"] = tuple(weights.ids)
    out = []
    for index, byte in enumerate(bits.to_bytes((bits.bit_length() + 7) // 8, "little")):
        while byte:
            low = byte & -byte
            out.append(order[index * 8 + low.bit_length() - 1])
            byte ^= low
    return out


class _Filters:
    """What a query requires of a document beyond its terms' scores: phrases (from the
    postings' positions), exclusions and sites; and whether a document is a strict match."""

    def __init__(self, query: ParsedQuery, scored: Mapping[str, TermScores],
                 raw: Mapping[str, Mapping[str, bytes]]) -> None:
        self.query = query
        self.raw = raw
        self.terms = {t: scored[t] for t in query.terms}
        self.excluded = [scored[t] for t in query.excluded]

    @staticmethod
    def contains(ts: TermScores, url: str) -> bool:
        return url in ts.contributions or url in ts.outside

    def positions(self, term: str, url: str) -> tuple[int, ...]:
        return _positions(self.raw.get(term, {}).get(url))

    def accepts(self, url: str) -> bool:
        """Site, exclusions and phrases (not the terms: the fallback takes some of them)."""
        query = self.query
        if query.sites and not on_site(url, query.sites):
            return False
        if any(self.contains(ts, url) for ts in self.excluded):
            return False
        return all(phrase_at([self.positions(t, url) for t in phrase]) for phrase in query.phrases)

    def strict(self, url: str) -> bool:
        return all(self.contains(ts, url) for ts in self.terms.values()) and self.accepts(url)


class _Totals:
    """The snapshot's accepted documents as bit sets (``all_bits``: every term, ``any_bits``:
    at least one; both after exclusions and sites), and their counts: exact from the bits, or
    over phrase candidates' positions, estimated from a sample past ``PHRASE_COUNT_MAX``
    (``exact`` turns False)."""

    def __init__(self, filters: _Filters, weights: CorpusWeights) -> None:
        self.filters, self.weights = filters, weights
        self.exact = True
        query = filters.query
        allowed = (1 << len(weights.ids)) - 1
        for ts in filters.excluded:
            allowed &= ~ts.members
        if query.sites:
            allowed &= _site_bits(weights, query.sites)
        self.all_bits, self.any_bits = allowed, 0
        for ts in filters.terms.values():
            self.all_bits &= ts.members
            self.any_bits |= ts.members
        self.any_bits &= allowed

    def count(self, bits: int) -> int:
        if not self.filters.query.phrases:
            return bits.bit_count()
        urls = _urls_of(self.weights, bits)
        if len(urls) <= PHRASE_COUNT_MAX:
            return sum(1 for url in urls if self.filters.accepts(url))
        self.exact = False
        # Seeded, so every page of a query reports the same estimate; random, since URL order
        # can follow a site's structure.
        sample = random.Random(len(urls)).sample(urls, PHRASE_COUNT_MAX)
        found = sum(1 for url in sample if self.filters.accepts(url))
        return round(found * len(urls) / PHRASE_COUNT_MAX)


def _rerank_by_proximity(hits: list[MatchedHit], filters: _Filters) -> list[MatchedHit]:
    """Strict hits with ``Similarity.proximity_bonus`` added, re-sorted (ties by URL)."""
    rescored = []
    for mh in hits:
        distance = min_distance([filters.positions(t, mh.hit.url) for t in filters.terms])
        rescored.append(MatchedHit(mh.hit, mh.score + SIMILARITY.proximity_bonus(distance), True))
    return sorted(rescored, key=lambda mh: (-mh.score, mh.hit.url))


def match(
    query: ParsedQuery,
    scored: Mapping[str, TermScores],
    raw: Mapping[str, Mapping[str, bytes]],
    weights: CorpusWeights,
    lookup_outside: Callable[[str], DocStats | None],
    n: int,
    limit: int,
) -> Match:
    """The best ``limit`` documents for ``query``.

    ``scored``: every term of ``query.lookups`` (scored and excluded) -> its TermScores;
    ``raw``: the same terms' postings as stored ({url: encoded posting}), for positions.
    """
    filters = _Filters(query, scored, raw)
    terms = filters.terms
    totals = _Totals(filters, weights)

    # The strict matches: the best ``depth`` by BM25F × prior, then re-ranked by proximity.
    depth = match_depth(query, limit)
    candidates = None
    # One term without filters: its list is already in score order, the walk stops at once.
    if totals.all_bits.bit_count() <= DIRECT_MAX and (len(terms) > 1 or query.excluded or query.sites or query.phrases):
        candidates = [url for url in _urls_of(weights, totals.all_bits) if not query.phrases or filters.accepts(url)]
        strict_total = len(candidates)
    else:
        strict_total = totals.count(totals.all_bits)
    multipliers = term_multipliers(query.terms, query.qualifiers)
    ranking = rank_scored(terms, weights, lookup_outside, n, depth, accept=filters.strict, total=strict_total,
                          candidates=candidates, multipliers=multipliers)
    strict_total = ranking.total
    floor = ranking.hits[depth - 1].score if depth > 0 and len(ranking.hits) >= depth else None
    hits = [MatchedHit(hit, hit.score, True) for hit in ranking.hits]
    if len(terms) > 1:
        hits = _rerank_by_proximity(hits, filters)
    hits = hits[:limit]

    # The ranked fallback: documents with some of the words fill the page.
    total = strict_total
    fallback_floor = None
    if len(terms) > 1:
        partial_total = totals.count(totals.any_bits & ~totals.all_bits)
        if len(hits) < limit:
            chosen = {mh.hit.url for mh in hits}
            fallback = rank_scored(terms, weights, lookup_outside, n, limit - len(hits),
                                   accept=lambda url: url not in chosen and not filters.strict(url) and filters.accepts(url),
                                   total=partial_total, multipliers=multipliers)
            hits += [MatchedHit(hit, hit.score, False) for hit in fallback.hits]
            partial_total = fallback.total
            if fallback.hits:
                fallback_floor = fallback.hits[-1].score
        # Counted whether or not this page reaches the fallback, so every page of a query
        # reports the same total (documents newer than the statistics aside).
        total += partial_total
    return Match(total, strict_total, hits, ranking.doc_freq, totals.exact, floor, fallback_floor)


def match_depth(query: ParsedQuery, limit: int) -> int:
    """How many strict documents are ranked by BM25F × prior before proximity re-ranks them."""
    return max(limit, PROXIMITY_DEPTH) if len(query.terms) > 1 else limit
