"""Cold queries: a query's best results from the first postings of each term's impact-ordered
row, proved to be the results the whole posting lists would give, or given up.

Layer: search. Pure (imports ``caffeine.index`` and the engine's ranking and matching; no I/O).
``caffeine.search.cold_reads`` reads the rows and calls ``plan`` then ``caffeine.search.cold_proof.answer`` (steps 3
and 4, and the totals); tests call them with hand-made heads and compare with
``caffeine.search.matching.match`` over the whole lists.

Why: a common term's posting list has a cell per document, so reading it whole costs what the
corpus's size does. Export also writes every posting into the term's ``impacts`` row in impact
order (``caffeine.index.impacts``): its first cells are the term's best postings, the level of
the last one read bounds what any other can add to a score, and its live-cell count is the df.

How (docs/RANKING.md, "Cold queries", has the full rules and the bound's derivation):

0. **Words seldom together** (``common_order``): when every query word is cold and few
   documents are expected to hold them all, ``caffeine.search.cold_reads`` reads those documents as the
   intersection of the words' rows (inside HBase) and, when they fill the page, ranks them
   alone: every all-words document is then a candidate. Otherwise, the heads:
1. **Candidates** ``C`` (``plan``): the heads of the cold terms (``width`` cells deep, a
   non-essential word's ``NARROW``: ``head_widths``), with their cells written since
   the statistics (documents they may lack); for a term whose whole list is at hand, its
   ``width`` best documents and those newer than the statistics. When every term is cold and
   partial, a head document that cannot beat the bound even with every other term's bound
   added is left out.
2. **Lookups**: every cold term's postings of the candidates it did not read, by URL. When
   some word's whole list is at hand its documents (``Plan.source``) are tried alone first;
   when every word is cold, the candidates (or those documents: ``on_source``) the heads
   show most of are read first (``first_lookups``) and their exact scores prune the rest
   (``prune``).
3. **Ranking** over the candidates with ``caffeine.search.matching.match``, each term weighted by its
   true document frequency: exact scores and acceptance.
4. **Proof** (``caffeine.search.cold_proof.answer``): a document outside ``C`` scores at most ``B``, the sum over query
   terms of ``Head.tail`` (``caffeine.index.impacts.unread_bound`` at the last head cell's
   level) or, for a term read whole, its best score outside ``C``. The page is the whole
   lists' when the best ``match_depth`` all-words scores beat ``B``, or when the page is
   all-words documents each above ``B`` and its lowest final score beats ``B`` plus the
   largest proximity bonus, or when one word's whole list is among the candidates and the
   ranked fallback fills the page above ``B``. Otherwise ``answer`` returns None, and the
   caller reads deeper the heads ``deeper_terms`` names, or the whole lists.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from caffeine.index.impacts import IMPACT_FORMAT, LEVEL_DIGITS, MAX_LEVEL, length_ratio, split_impact_qualifier, unread_bound
from caffeine.index.schema import decode_key
from caffeine.index.scoring import SIMILARITY

from caffeine.search.matching import match_depth
from caffeine.search.query import ParsedQuery
from caffeine.search.ranking import Counts, CorpusWeights, TermScores, term_contributions, term_multipliers

__all__ = ["Head", "Plan", "MARGIN", "COMMON_MAX", "head_widths", "parse_head", "corpus_ratio", "plan", "on_source",
           "first_lookups", "prune", "deeper_terms", "common_order"]

MARGIN = 1e-9  # relative, as caffeine.search.ranking's: a bound must beat a floor by more than rounding
# A prunable query first reads this many times the all-words documents its page needs (best
# upper bounds first): on generated and real corpora, enough to hold that many of them.
FIRST_LOOKUPS = 2
# A query word whose idf is below this share of the query's largest is non-essential, as in
# MaxScore: it adds little to any score, so its best documents are not the answer's; its
# head is read NARROW cells deep (for its bound) and its postings of the essential words'
# candidates are read by URL. A near-universal word's 2,048-cell head cost as much to read
# and score as a rare one's, for a part of B near 0.
ESSENTIAL_SHARE = 1 / 8
NARROW = 64
# A query whose words are expected together in at most COMMON_SHARE of the documents, and in
# at most COMMON_EXPECTED, reads those documents' postings as the intersection of the words'
# rows (``common_order``), at most COMMON_MAX of them. Why: heads answer a query whose best
# documents hold every word; when a small share of the documents hold them all (words of
# flat impact levels, seldom together), the heads rarely show enough of them, and their
# candidates' lookups cost thousands of seeks, while the intersection costs about a walk of
# the shortest row plus ~15 µs per common cell (sent, decoded, scored): cheaper than heads
# below about a thousand documents, dearer above a few thousand.
COMMON_SHARE = 0.03
COMMON_EXPECTED = 4096
COMMON_MAX = 8192


@dataclass(frozen=True)
class Head:
    """The first cells of a term's ``impacts`` row and its cells written since the corpus
    statistics were read: ``{url: encoded posting}``; the level of the last first cell (every
    cell not read is at or below it); the row's live cell count; whether the first cells are
    the whole row."""

    postings: Mapping[str, bytes]
    last_level: int
    df: int
    complete: bool
    # ``scored`` and ``shown``'s answers for the last (snapshot, N) asked: a query's plan, its
    # tries, bounds and proof all need every posting's part, and scoring thousands costs
    # milliseconds each time.
    _memo: dict = field(default_factory=dict, init=False, compare=False, repr=False)

    def scored(self, weights: CorpusWeights, n: int) -> tuple[Mapping[str, float], Mapping[str, Counts]]:
        """``caffeine.search.ranking.term_contributions`` of the head's postings (the term's df as its
        df), in the snapshot ``weights`` and a corpus of N=``n``."""
        return self._held("scored", weights, n, lambda: term_contributions(self.postings, weights, n, self.df))

    def shown(self, weights: CorpusWeights, n: int) -> Mapping[str, float]:
        """What the term adds to the score (contribution × prior, proximity aside) of each
        document of the head the snapshot ``weights`` holds."""
        boosts = weights.boosts
        return self._held("shown", weights, n,
                          lambda: {url: c * boosts[url] for url, c in self.scored(weights, n)[0].items()})

    def _held(self, key: str, weights: CorpusWeights, n: int, compute):
        held = self._memo.get(key)
        if held is None or held[0] is not weights or held[1] != n:
            held = self._memo[key] = (weights, n, compute())  # a race computes it twice, harmlessly
        return held[2]

    def tail(self, n: int, ratio: float) -> float:
        """The most a document outside the head can get from its term (step 4; 0 when the
        head is the whole row), in a corpus of N=``n`` whose length ratios are at most ``ratio``."""
        return 0.0 if self.complete else unread_bound(SIMILARITY.term_weight(self.df, n), ratio, self.last_level)


def head_widths(query: ParsedQuery, dfs: Mapping[str, int], n: int, width: int) -> dict[str, int]:
    """How deep to read each cold word's head (``dfs``: the document frequency of each of
    the query's words known, the cold ones among them): ``width``, or ``NARROW`` (at most
    ``width``) for a non-essential word (``ESSENTIAL_SHARE``) of a query of several words."""
    idfs = {t: SIMILARITY.idf(df, n) for t, df in dfs.items() if t in query.terms}
    top = max(idfs.values(), default=0.0)
    return {t: min(width, NARROW) if len(query.terms) > 1 and idfs.get(t, top) < top * ESSENTIAL_SHARE else width
            for t in dfs}


def common_order(query: ParsedQuery, dfs: Mapping[str, int], n: int) -> list[str] | None:
    """The query's words from the rarest to the most common (the order their rows are
    intersected in) when the documents holding every word are to be read as the rows'
    intersection: a query of several words, all cold (``dfs``: their document frequencies),
    no exclusion, and at most ``COMMON_SHARE`` × N and ``COMMON_EXPECTED`` such documents
    expected (the words taken as independent: N·Π df/N). None otherwise."""
    if len(query.terms) < 2 or query.excluded or any(t not in dfs for t in query.terms) or n <= 0:
        return None
    expected = n * math.prod(min(1.0, dfs[t] / n) for t in query.terms)
    if expected > min(COMMON_EXPECTED, COMMON_SHARE * n):
        return None
    return sorted(query.terms, key=lambda t: (dfs[t], t))


def parse_head(cells: Iterable[tuple[bytes, bytes]], count: int, recent: Iterable[tuple[bytes, bytes]] = ()) -> Head:
    """A ``Head`` from an impacts row's first ``(qualifier, value)`` cells as stored
    (qualifier order), its live cell count, and its later cells written since the statistics
    (``recent``: the documents the statistics may lack, which the bound does not cover, so
    they are candidates). A URL may appear twice while an export moves it between levels; its
    first (higher-level) cell is kept, which only loosens the bound. ValueError for a cell
    that is not an impact posting."""
    postings: dict[str, bytes] = {}
    last = None
    read = 0
    # Inline rather than ``split_impact_qualifier`` per cell: a head is thousands of cells,
    # and only the last one's level is needed.
    for last, value in cells:
        postings.setdefault(_head_url(last), value)
        read += 1
    for qualifier, value in recent:
        postings.setdefault(_head_url(qualifier), value)
    # No first cells of a row counted as not empty (a count out of step): bound it by the top.
    level = MAX_LEVEL if last is None else split_impact_qualifier(decode_key(last))[0]
    return Head(postings, level, count, count <= read)


def _head_url(qualifier: bytes) -> str:
    if len(qualifier) < LEVEL_DIGITS or not qualifier[:LEVEL_DIGITS].isdigit():
        raise ValueError(f"not an impact qualifier: {qualifier!r}")
    return qualifier[LEVEL_DIGITS:].decode("utf-8", "surrogateescape")  # as schema.decode_key


def corpus_ratio(weights: CorpusWeights) -> float | None:
    """The largest ``length_ratio`` of the snapshot's documents (the bound's R), computed once
    per snapshot; None when some document's impacts are missing or of another format (its
    docstats ``s:impacts``: an index exported before the impacts table, not yet backfilled),
    since heads would then lack its postings."""
    held = weights.sites.get("impact_ratio", False)
    if held is False:
        averages = weights.averages
        docs = weights.docs.values()
        held = None
        if all(stats.impacts == IMPACT_FORMAT for stats in docs):
            held = max((length_ratio(stats.lengths, averages) for stats in docs), default=0.0)
        weights.sites["impact_ratio"] = held  # a race computes it twice, harmlessly
    return held


@dataclass(frozen=True)
class Plan:
    """Step 1's outcome. ``candidates``: the documents whose postings in every cold term must
    be known before ``answer``. ``upper``: when every query term is cold, the most each
    candidate of the snapshot can score (BM25F × prior, proximity aside): what the heads show
    of it, and for a term whose head lacks it that term's unread bound; over every candidate
    when every head is partial, over ``source`` when some head is complete; empty otherwise
    (then nothing is pruned)."""

    candidates: list[str]
    upper: Mapping[str, float]
    # What the heads show of each candidate of ``upper`` (Σ of its known contributions ×
    # prior): the documents most likely to hold every word with a high score come first.
    lower: Mapping[str, float]
    # The documents of the query word with the fewest, when some word's whole list is at hand
    # (its head holds the whole row, or its list is in memory); every all-words document is
    # one of them. None otherwise.
    source: list[str] | None
    # With ``source``: the largest upper bound of a candidate outside it (``answer``'s
    # ``left_out`` when only ``source`` is read: such documents hold some words only, but can
    # outscore the ranked fallback); infinite when one is newer than the statistics.
    source_left_out: float = 0.0


def plan(query: ParsedQuery, heads: Mapping[str, Head], whole: Mapping[str, TermScores], width: int,
         weights: CorpusWeights, n: int) -> Plan:
    """The candidate documents (step 1): every cold term's postings of them must be read by
    URL before ``answer``. ``heads``: the cold terms of ``query.lookups`` (complete or not);
    ``whole``: the others, scored over their whole lists.

    When every query term is cold and partial, a head document that cannot score above the
    bound on documents outside the candidates even with every other term's bound added is
    left out (it is then one of those outside, and covered by that bound): what it lacks
    need not be read."""
    candidates: dict[str, None] = {}
    source: list[str] | None = None
    for term in query.terms:
        if term in heads:
            candidates.update(dict.fromkeys(heads[term].postings))
            listed = list(heads[term].postings) if heads[term].complete else None
        else:
            ts = whole[term]
            candidates.update(dict.fromkeys(url for _, url in ts.ordered[:width]))
            candidates.update(dict.fromkeys(ts.outside))
            listed = [*ts.contributions, *ts.outside]
        if listed is not None and (source is None or len(listed) < len(source)):
            source = listed
    if source is not None:
        upper, lower = _source_bounds(query, heads, whole, source, weights, n)
        return Plan(list(candidates), upper, lower, source,
                    _outside_source(query, heads, whole, candidates, set(source), weights, n))
    ratio = corpus_ratio(weights)
    if ratio is None:
        return Plan(list(candidates), {}, {}, None)
    known = _shown_and_unread(query, heads, whole, candidates, weights, n, ratio)
    bound = sum(tail for _, tail in known) * (1 + MARGIN)
    kept = []
    uppers: dict[str, float] = {}
    lowers: dict[str, float] = {}
    for url in candidates:
        if url not in weights.norms:
            kept.append(url)  # newer than the statistics: no bound covers it
            continue
        upper, lower = _bounds(url, known)
        if upper > bound:
            kept.append(url)
            uppers[url] = upper
            lowers[url] = lower
    return Plan(kept, uppers, lowers, None)


def _source_bounds(query: ParsedQuery, heads: Mapping[str, Head], whole: Mapping[str, TermScores],
                   source: list[str], weights: CorpusWeights, n: int) -> tuple[dict[str, float], dict[str, float]]:
    """``Plan.upper`` and ``Plan.lower`` over ``source`` (the rarest word's documents), when
    every query term is cold: what pruning them needs (``on_source``). Empty otherwise."""
    ratio = corpus_ratio(weights)
    if ratio is None or not all(t in heads for t in query.terms):
        return {}, {}
    known = _shown_and_unread(query, heads, whole, source, weights, n, ratio)
    upper: dict[str, float] = {}
    lower: dict[str, float] = {}
    for url in source:
        if url in weights.norms:  # a document newer than the statistics has no bound: kept
            upper[url], lower[url] = _bounds(url, known)
    return upper, lower


def _bounds(url: str, known: list[tuple[Mapping[str, float], float]]) -> tuple[float, float]:
    """A document's upper and lower bound (BM25F × prior) from ``_shown_and_unread``: per
    term its known part, or else that term's unread bound (upper) or 0 (lower)."""
    upper = lower = 0.0
    for scores, tail in known:
        shown = scores.get(url)
        upper += tail if shown is None else shown
        lower += 0.0 if shown is None else shown
    return upper, lower


def on_source(planned: Plan) -> Plan:
    """``planned`` restricted to the rarest word's documents (``Plan.source``), as the
    candidates ``first_lookups`` and ``prune`` work on: every all-words document is one of
    them, so those whose upper bound is under the floor θ of the exact all-words scores of
    the first read need not be read either."""
    return Plan(list(planned.source or ()), planned.upper, planned.lower, None)


def _outside_source(query: ParsedQuery, heads: Mapping[str, Head], whole: Mapping[str, TermScores],
                    candidates: Iterable[str], source: set[str], weights: CorpusWeights, n: int) -> float:
    """``Plan.source_left_out``: the largest upper bound (BM25F × prior) of the candidates
    not in ``source``."""
    outside = [url for url in candidates if url not in source]
    ratio = corpus_ratio(weights)
    if ratio is None or any(url not in weights.norms for url in outside):
        return math.inf
    shown = _shown_and_unread(query, heads, whole, outside, weights, n, ratio)
    return max((_bounds(url, shown)[0] for url in outside), default=0.0)


def _shown_and_unread(query: ParsedQuery, heads: Mapping[str, Head], whole: Mapping[str, TermScores],
                      urls: Iterable[str], weights: CorpusWeights, n: int,
                      ratio: float) -> list[tuple[Mapping[str, float], float]]:
    """Per query term: what it adds to each of ``urls`` its head or whole list holds
    (contribution × prior; a head's mapping may hold other documents too), and the most it
    adds to any other (a partial head's unread bound, else 0). A document's upper bound sums,
    per term, its known part or that bound."""
    boosts = weights.boosts
    multipliers = term_multipliers(query.terms, query.qualifiers)
    out: list[tuple[Mapping[str, float], float]] = []
    for term in query.terms:
        m = multipliers[term]
        if term in heads:
            shown = heads[term].shown(weights, n)
            out.append((shown if m == 1.0 else {u: c * m for u, c in shown.items()}, heads[term].tail(n, ratio) * m))
        else:
            every = whole[term].contributions
            out.append(({u: every[u] * m * boosts[u] for u in urls if u in every}, 0.0))
    return out


def first_lookups(query: ParsedQuery, planned: Plan, limit: int) -> list[str] | None:
    """The candidates to read first, when the rest may then be pruned (``prune``): the
    ``FIRST_LOOKUPS`` × depth the heads show most of, depth being how many all-words
    documents the page needs known (``caffeine.search.matching.match_depth``). None when the query is not
    pruned: one word (its head holds every candidate's posting: nothing is read), phrases,
    exclusions or a site filter (which the exact scores below do not apply), or no upper
    bounds (some term complete or read whole)."""
    if len(query.terms) < 2 or query.phrases or query.excluded or query.sites or not planned.upper:
        return None
    first = FIRST_LOOKUPS * match_depth(query, limit)
    if len(planned.upper) <= first:
        return None  # pruning could not save a second read
    return heapq.nlargest(first, planned.lower, key=planned.lower.__getitem__)


def deeper_terms(query: ParsedQuery, heads: Mapping[str, Head], weights: CorpusWeights, n: int) -> list[str]:
    """The query words whose heads to read deeper after a failed proof: the partial ones whose
    ``Head.tail`` is at least half the largest (a small idf's deeper head lowers ``B`` little)."""
    ratio = corpus_ratio(weights) or 0.0
    multipliers = term_multipliers(query.terms, query.qualifiers)
    tails = {t: heads[t].tail(n, ratio) * multipliers[t] for t in query.terms if t in heads and not heads[t].complete}
    top = max(tails.values(), default=0.0)
    return [t for t, tail in tails.items() if tail > 0.0 and tail >= top / 2]


def prune(query: ParsedQuery, planned: Plan, heads: Mapping[str, Head], first: list[str],
          found: Mapping[str, Mapping[str, bytes]], weights: CorpusWeights, n: int,
          limit: int) -> tuple[list[str], float]:
    """The candidates still needed once ``first`` are known (``found``: each partial term's
    postings of them), and the bound on the candidates left out.

    Among ``first``, the documents holding every word have exact scores; θ is the depth-th
    best of them. A candidate whose upper bound is below θ cannot be among the best depth
    all-words documents (at least depth of them score θ or more), so neither on the page
    nor among those proximity re-ranks: it is left out, unread, and ``answer`` proves its
    page against the largest upper bound left out as against any document outside the
    candidates. Fewer than depth all-words documents among ``first``: nothing is left out."""
    depth = match_depth(query, limit)
    scores: dict[str, list[float]] = {url: [] for url in first if url in weights.norms}
    for term in query.terms:
        head = heads[term]
        postings = {}
        for url in scores:
            value = head.postings.get(url)
            if value is None:
                value = found.get(term, {}).get(url)
            if value is not None:
                postings[url] = value
        contributions, _ = term_contributions(postings, weights, n, head.df)
        for url, parts in scores.items():
            if url in contributions:
                parts.append(contributions[url])
    boosts = weights.boosts
    words = len(query.terms)
    exact = sorted((math.fsum(parts) * boosts[url] for url, parts in scores.items() if len(parts) == words),
                   reverse=True)
    if len(exact) < depth:
        return planned.candidates, 0.0
    floor = exact[depth - 1] * (1 - MARGIN)
    chosen = set(first)
    kept, left_out = [], 0.0
    for url in planned.candidates:
        upper = planned.upper.get(url)
        if upper is None or url in chosen or upper >= floor:
            kept.append(url)
        else:
            left_out = max(left_out, upper)
    return kept, left_out
