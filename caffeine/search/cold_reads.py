"""Cold queries' reads: the heads of a query's cold terms, their postings of the candidates
read by URL, and deeper heads when those could not prove the answer.

Layer: search. Imports the public ``caffeine.percolator`` names (through the
``ServingTable``s it is given: ``postings``, ``impacts``), ``caffeine.index.schema``,
``caffeine.oracle.timestamps``, the engine's pure cold-query logic (``caffeine.search.cold``: what to read;
``caffeine.search.cold_proof``: the proof), ``caffeine.search.postings_cache`` and ``caffeine.search.statistics``. Read-only.

Contract (docs/RANKING.md, "Cold queries"): ``ColdReads.match`` answers a query whose terms'
lists are not all in memory from the heads of their ``impacts`` rows when ``caffeine.search.cold`` proves
that answer is the whole lists' one, else returns None (the caller reads the lists). A query
of several words first reads every cold word's head ``NARROW`` deep, with its count. When
every word is cold and few documents are expected to hold them all (``caffeine.search.cold.common_order``),
those documents are read as the intersection of the words' ``postings`` rows inside HBase,
and answer the query when they fill the page. Otherwise a non-essential word's narrow head
(``caffeine.search.cold.head_widths``) is kept, the others are read at the full width. Each try reads the heads it lacks (one round trip per width), then the candidates'
postings by URL (one or two round trips). A failed proof reads again, ``DEEPER`` times as
deep, the heads of the words whose unread bound is most of the bound
(``caffeine.search.cold.deeper_terms``; a narrow head grows to the full width first), a head that would
then be most of its row as the whole row; the other heads and everything read by URL are
kept for the next try. (So one answer may combine reads some milliseconds apart, as one
try's reads already did: the index is near-real-time.) After an answer, the cold terms'
whole lists are read in the background, one query at a time, for the queries that follow.
"""

from __future__ import annotations

import logging
import math
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping

from caffeine.index.schema import posting_column, posting_qualifier_cells
from caffeine.oracle.timestamps import compose
from caffeine.percolator.serving import MAX_PREFIX, TableNotFound

from caffeine.search.cold import (COMMON_MAX, NARROW, Head, Plan, common_order, corpus_ratio, deeper_terms, first_lookups,
                      head_widths, on_source, parse_head, plan, prune)
from caffeine.search.cold_proof import answer
from caffeine.search.matching import Match
from caffeine.search.postings_cache import PostingsCache
from caffeine.search.term_lists import postings_by_term, term_scores
from caffeine.search.query import ParsedQuery
from caffeine.search.settings import SearchSettings
from caffeine.search.statistics import CorpusStatistics, CorpusStats

__all__ = ["ColdReads", "DEEPER"]

log = logging.getLogger(__name__)

# A cold query whose heads could not prove its answer reads those worth it again this many
# times as deep (a head that would then be most of its row: the whole row).
DEEPER = 4

Asked = dict[str, dict[str, "bytes | None"]]   # per term: each URL read by URL, and its posting (None: none)


class ColdReads:
    """The cold path of one ``caffeine.search.searcher.Searcher``: thread-safe; ``close``."""

    def __init__(self, postings, impacts, statistics: CorpusStatistics, cache: PostingsCache,
                 settings: SearchSettings) -> None:
        self.postings = postings
        self.impacts = impacts
        self.statistics = statistics
        self.settings = settings
        self._cache = cache
        self.enabled = True   # turned off for good when impacts cannot be summarized in HBase
        # Queries with a long cold term: answered (from the heads or an intersection), or given
        # up (read whole); the heads read again deeper first (either way); and those of the
        # answered that an intersection answered.
        self.counts = {"answered": 0, "given_up": 0, "deeper": 0, "intersected": 0}
        # Whole reads of cold terms' lists after their first query: one at a time.
        self._warmer = ThreadPoolExecutor(1, thread_name_prefix="api-warm")

    def close(self) -> None:
        self._warmer.shutdown(wait=False, cancel_futures=True)

    def wait_for_background_reads(self) -> None:
        """Return once the whole-list reads started by cold queries so far are done."""
        self._warmer.submit(lambda: None).result()

    def match(self, query: ParsedQuery, corpus: CorpusStats, limit: int) -> Match | None:
        """The query's match from the heads of its cold terms' impact-ordered rows, or None:
        no term is cold, the cold path is off or unavailable, or its answer could not be
        proved (module docstring)."""
        width = self.settings.cold_width
        cold = self._cache.absent(list(query.lookups)) if width > 0 and self.enabled else []
        if not cold or corpus_ratio(corpus.weights) is None:
            return None  # nothing cold, or some document has no impacts cells (yet)
        # Cells written since the statistics' scan began (less the margin) may belong to
        # documents the statistics lack: they are read too and become candidates.
        since = compose(max(0, int((corpus.started_at - self.settings.change_margin_s) * 1000)))
        held: dict[str, tuple[int, Head]] = {}   # each term's head read so far, and its width
        narrow: dict[str, Head] = {}             # each cold word's narrow head, when read
        widths = self._widths(query, cold, corpus, width, since, held, narrow)
        if widths is None:
            return None
        matched = self._intersected(query, corpus, limit, narrow)
        if matched is not None:
            self.counts["answered"] += 1  # a race may lose a count
            self._warmer.submit(self._cache.get, cold)
            return matched
        asked: Asked = {}                        # read by URL so far: a deeper try reads only new ones
        reach = width   # how many of a warm term's best documents are candidates: DEEPER× per try
        while True:
            outcome = self._try(query, corpus, limit, widths, reach, since, held, asked)
            if outcome is None:
                return None  # not applicable: the lists are read whole
            matched, deeper = outcome
            if matched is not None:
                self.counts["answered"] += 1  # a race may lose a count
                # After the answer, not during it: the whole reads would compete for the CPU.
                self._warmer.submit(self._cache.get, cold)
                return matched
            grown = {}
            for t in deeper:
                # A narrow head (a non-essential word's) grows to a full one first.
                df, deeper_width = held[t][1].df, max(widths[t] * DEEPER, width)
                # Most of the row: read all of it (the head is then the whole list, its part of B 0).
                grown[t] = df if widths[t] < df < 2 * deeper_width else deeper_width
            if not grown or max(grown.values()) > MAX_PREFIX:
                self.counts["given_up"] += 1
                return None
            widths.update(grown)
            reach *= DEEPER
            self.counts["deeper"] += 1

    def _widths(self, query: ParsedQuery, cold: list[str], corpus: CorpusStats, width: int, since: int,
                held: dict[str, tuple[int, Head]], narrow: dict[str, Head]) -> dict[str, int] | None:
        """Each cold word's first head width (``caffeine.search.cold.head_widths``). For a query of
        several words of which some are cold, every cold word's head is first read ``NARROW``
        deep (into ``narrow``), which gives its count: that tells the essential words from
        the others, whose narrow heads go into ``held`` (so the essential words' heads are
        the only second read). None: the heads cannot be read, or every cold word's row is at most ``width``
        long (reading the short lists whole costs about as much, and the totals are exact)."""
        if not any(t in query.terms for t in cold) or len(query.terms) < 2:
            return dict.fromkeys(cold, width)
        first = self._read_heads(cold, min(NARROW, width), since)
        if first is None or all(head.df <= width for head in first.values()):
            return None
        narrow.update(first)
        dfs = {t: head.df for t, head in first.items()}
        n = max(corpus.num_docs, *dfs.values())
        # A warm word's df counts too (its list in memory): a cold word is judged against it.
        held_lists = self._cache.peek([t for t in query.terms if t not in dfs]) or {}
        known = {**dfs, **{t: len(p.postings) for t, p in held_lists.items()}}
        widths = {t: w for t, w in head_widths(query, known, n, width).items() if t in dfs}
        held.update((t, (w, first[t])) for t, w in widths.items() if w == min(NARROW, width))
        return widths

    def _intersected(self, query: ParsedQuery, corpus: CorpusStats, limit: int,
                     narrow: Mapping[str, Head]) -> Match | None:
        """The query's match from every document holding all its words, read as the
        intersection of the words' postings rows inside HBase (``caffeine.search.cold.common_order`` says
        when: all words cold, few such documents expected), when those documents fill the
        page; None when not tried, when HBase cannot intersect, when more than ``COMMON_MAX``
        or fewer than the page's documents hold every word, or when filters leave fewer than
        the page (the heads are read next: a document outside the intersection holds some
        words only, and nothing read here bounds what such a document scores)."""
        dfs = {t: head.df for t, head in narrow.items()}
        n = max(corpus.num_docs, *dfs.values()) if dfs else corpus.num_docs
        order = common_order(query, dfs, n)
        if order is None:
            return None
        try:
            common = self.postings.read_common([t.encode() for t in order], COMMON_MAX, [dfs[t] for t in order],
                                               server_only=True)
        except Exception as exc:  # noqa: BLE001 - as a failed head read: the heads are read instead
            log.warning("cold intersection failed, reading heads instead: %s: %s", type(exc).__name__, exc)
            return None
        if common is None or not common.complete or common.count < limit:
            return None
        found = postings_by_term(order, common.cells, posting_qualifier_cells)
        candidates = list(found[order[0]])
        fresh = self.statistics.read({url for url in candidates if url not in corpus.weights.norms})
        heads = {t: narrow[t] for t in query.terms}
        # Every all-words document is a candidate (strict_known); any other is unbounded
        # (left_out infinite): the page is proved only when all-words documents fill it.
        matched = answer(query, heads, {}, {}, candidates, found, corpus.weights, fresh.get, n, limit,
                         math.inf, strict_known=True)
        if matched is not None:
            self.counts["intersected"] += 1  # a race may lose a count
        return matched

    def _read_heads(self, terms: list[str], width: int, since: int) -> dict[str, Head] | None:
        """The heads of ``terms``' impacts rows, ``width`` cells each, in one round trip; None
        when heads cannot be read (and, for good, when they never can here)."""
        try:
            prefixes = self.impacts.read_prefix([t.encode() for t in terms], width, since)
        except TableNotFound as exc:  # an index exported before impacts existed: read whole, always
            log.info("cold reads off: no impacts table (%s)", exc)
            self.enabled = False
            return None
        except Exception as exc:  # noqa: BLE001 - this query reads whole; the next tries heads again
            log.warning("cold read failed, reading the whole lists instead: %s: %s", type(exc).__name__, exc)
            return None
        if not all(p.server_side for p in prefixes.values()):
            # The server read whole rows to summarize them: the cold path saves nothing here.
            log.info("cold reads off: HBase does not summarize rows (the coprocessor is not loaded)")
            self.enabled = False
            return None
        return {t: parse_head(p.cells, p.count, p.recent)
                for t, p in ((t, prefixes[t.encode()]) for t in terms)}

    def _try(self, query: ParsedQuery, corpus: CorpusStats, limit: int, widths: Mapping[str, int], reach: int,
             since: int, held: dict[str, tuple[int, Head]], asked: Asked):
        """One try of ``match`` with each cold term's head ``widths[term]`` cells deep (those
        in ``held`` at that width are not read again; ``held`` gets the others) and each warm
        term's best ``reach`` documents among the candidates: None when heads do not apply
        (nothing to save), else (the proved match or None, the terms worth reading deeper)."""
        first_try = not held
        for width in sorted(set(widths.values())):
            wanted = [t for t, w in widths.items() if w == width and held.get(t, (0,))[0] != width]
            if wanted:
                read = self._read_heads(wanted, width, since)
                if read is None:
                    return None
                held.update((t, (width, head)) for t, head in read.items())
        heads = {t: held[t][1] for t in widths}
        if first_try and all(head.complete for head in heads.values()):
            return None  # short lists: reading them whole costs about as much, and is exact in totals too
        warm = [t for t in query.lookups if t not in heads]
        cached = self._cache.get(warm) if warm else {}
        n = max([corpus.num_docs, *(len(cached[t].postings) for t in warm), *(h.df for h in heads.values())])
        whole = {t: term_scores(cached[t], corpus.weights, n) for t in warm}
        planned = plan(query, heads, whole, reach, corpus.weights, n)
        partial = [t for t, head in heads.items() if not head.complete]
        whole_raw = {t: cached[t].postings for t in warm}
        fresh = self._fresh(heads, whole, corpus)   # one read, whichever candidates are tried

        def pruned_lookups(among: Plan) -> tuple[list[str], float, dict]:
            """Each partial term's postings of the candidates ``among`` its head lacks (a
            single-word query needs none): those with the best upper bounds first when the
            rest may then be pruned (caffeine.search.cold.prune), else all of them in one read. Returns
            the candidates kept, the bound on those left out, and the postings."""
            first = first_lookups(query, among, limit)
            if first is None:
                return among.candidates, 0.0, self._lookups(partial, heads, among.candidates, asked)
            kept, left = prune(query, among, heads, first, self._lookups(partial, heads, first, asked),
                               corpus.weights, n, limit)
            return kept, left, self._lookups(partial, heads, kept, asked)

        if planned.source is not None and len(planned.source) < len(planned.candidates):
            # Every all-words document holds the rarest word, whose list is at hand: when
            # they fill the page, its documents (those prune keeps) are all the candidates needed.
            kept, left, found = pruned_lookups(on_source(planned))
            matched = answer(query, heads, whole, whole_raw, kept, found, corpus.weights, fresh.get, n, limit,
                             max(left, planned.source_left_out), len(kept) < len(planned.source))
            if matched is not None:
                return matched, []
            candidates = planned.candidates
            found, left_out = self._lookups(partial, heads, candidates, asked), 0.0
        else:
            candidates, left_out, found = pruned_lookups(planned)
        matched = answer(query, heads, whole, whole_raw, candidates, found, corpus.weights, fresh.get, n, limit,
                         left_out, len(candidates) < len(planned.candidates))
        return matched, [] if matched is not None else deeper_terms(query, heads, corpus.weights, n)

    def _fresh(self, heads, whole, corpus: CorpusStats):
        """The statistics of the documents newer than the snapshot, in the heads or the whole
        lists: one read."""
        return self.statistics.read({url for h in heads.values() for url in h.postings if url not in corpus.weights.norms}
                                    .union(*(ts.outside.keys() for ts in whole.values())))

    def _lookups(self, partial: list[str], heads: Mapping[str, Head], urls: list[str],
                 asked: Asked) -> dict[str, dict[str, bytes]]:
        """Each of the ``partial`` terms' postings of those ``urls`` its head lacks: one read,
        each term's row asked for its own such URLs not in ``asked`` (none when there are
        none). ``asked``: per term, each URL read before in this query and its posting (None:
        the term lacks it); the read's answers are added."""
        unknown = {t: [url for url in dict.fromkeys(urls) if url not in heads[t].postings and url not in asked.get(t, ())]
                   for t in partial}
        wanted = {t: missing for t, missing in unknown.items() if missing}
        if wanted:
            read = postings_by_term(list(wanted), self.postings.get_cells(
                {t.encode(): [posting_column(url) for url in missing] for t, missing in wanted.items()}))
            for t, missing in wanted.items():
                memo, got = asked.setdefault(t, {}), read[t]
                memo.update((url, got.get(url)) for url in missing)
        return {t: {url: value for url in urls
                    if url not in heads[t].postings and (value := asked.get(t, {}).get(url)) is not None}
                for t in partial}
