"""Search: a parsed query's ranked page of results, from posting lists held in memory or the
heads of impact-ordered rows.

Layer: search. Imports the public ``caffeine.percolator`` names (through the
``ServingTable``s it is given: ``postings``, ``impacts``), ``caffeine.index.schema`` (names
and codecs), ``caffeine.oracle.timestamps``, and the engine's pure ranking (``caffeine.search.ranking``,
``caffeine.search.matching``, ``caffeine.search.cold``), ``caffeine.search.postings_cache``, ``caffeine.search.statistics`` and
``caffeine.search.details``. Read-only; knows nothing of HTTP.

Contract: a query's terms' posting lists come from ``caffeine.search.postings_cache``: held in memory and
brought up to date (only the changed cells read, one round trip for all of a query's terms)
once they are ``postings_refresh_s`` old. A term not held (cold) is first answered from the
head of its ``impacts`` row when ``caffeine.search.cold`` proves that exact, and read whole in the
background for the queries that follow. A query also reads the ``docstats`` rows of
documents newer than the statistics. A query's ranked answer is reused while its terms'
lists and the statistics are the ones it was ranked from (``caffeine.search.ranking_cache``), and a
query whose whole answer is in memory can be asked for without any read
(``search(at_hand_only=True)``). So which documents match, with which term
frequencies, is at most ~1 s old (near-real-time, as search engines with a refresh
interval are); a result may show statistics or a cluster size up to ~10 s old.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Mapping

from caffeine.search.cold_reads import ColdReads
from caffeine.search.details import ResultDetails
from caffeine.search.links import cluster_link, document_link
from caffeine.search.matching import match
from caffeine.search.postings_cache import PostingsCache, TermPostings
from caffeine.search.query import ParsedQuery
from caffeine.search.ranking_cache import RankingCache, stamp
from caffeine.search.settings import SearchSettings
from caffeine.search.statistics import CorpusStatistics, CorpusStats
from caffeine.search.term_lists import postings_by_term, term_scores

log = logging.getLogger(__name__)

# The posting lists of terms queried within this long are kept up to date ahead of their
# queries (PostingsCache.refresh_used).
AHEAD_WINDOW_S = 30.0


def _ranking_key(query: ParsedQuery, corpus: CorpusStats, limit: int, cached: Mapping[str, TermPostings]):
    """(the ranking cache's key, the stamp of the inputs, N) of a query over ``cached``."""
    lookups = query.lookups
    # N covers every df seen: a document newer than the statistics may push a df above it.
    n = max([corpus.num_docs, *(len(cached[term].postings) for term in lookups)])
    key = (query.terms, query.phrases, query.excluded, query.sites, query.qualifiers, limit)
    return key, stamp(corpus.weights, n, tuple(cached[term].version for term in lookups)), n


class Searcher:
    """Ranks queries over one index's ``postings`` and ``impacts``; thread-safe; ``close``."""

    def __init__(self, postings, impacts, statistics: CorpusStatistics, details: ResultDetails,
                 settings: SearchSettings) -> None:
        self.postings = postings
        self.impacts = impacts
        self.statistics = statistics
        self.details = details
        self.settings = settings
        # Warm queries' ranked results, reused while their inputs are unchanged (caffeine.search.ranking_cache).
        self._ranked = RankingCache(settings.ranking_cache_entries, settings.ranking_cache_hits)
        self._postings = PostingsCache(
            # Postings are kept as stored: ranking reads their field counts once per
            # statistics snapshot, phrases and proximity their positions.
            self._read_terms, self._read_term_changes, bytes,
            refresh_s=settings.postings_refresh_s, margin_s=settings.change_margin_s,
            full_reload_s=settings.full_reload_s, max_postings=settings.postings_cache_max,
            ahead_window_s=AHEAD_WINDOW_S if settings.postings_refresh_ahead else 0.0,
        )
        # Queries with cold terms, answered from the heads of their impacts rows (caffeine.search.cold_reads).
        self.cold = ColdReads(postings, impacts, statistics, self._postings, settings)

        # The terms queries use, brought up to date ahead of them (PostingsCache.refresh_used).
        self._stop = threading.Event()
        self._ahead = None
        if settings.postings_refresh_ahead and settings.postings_refresh_s > 0:
            self._ahead = threading.Thread(target=self._refresh_ahead, name="api-postings-ahead", daemon=True)
            self._ahead.start()

    def close(self) -> None:
        self._stop.set()
        self.cold.close()
        if self._ahead is not None:
            self._ahead.join(timeout=5)

    def _refresh_ahead(self) -> None:
        """Every half ``postings_refresh_s``: the posting lists in use, and (every half
        ``details_cache_s``) the cluster sizes shown, read before their queries need them."""
        sizes_due = time.monotonic()
        while not self._stop.wait(self.settings.postings_refresh_s / 2):
            try:
                self._postings.refresh_used()
                if self.details is not None and time.monotonic() >= sizes_due:
                    sizes_due = time.monotonic() + self.settings.details_cache_s / 2
                    self.details.refresh_used()
            except Exception as exc:  # noqa: BLE001 - queries read what they lack themselves
                log.warning("reading ahead of queries failed: %s: %s", type(exc).__name__, exc)

    def report(self) -> dict:
        """The posting lists held in memory and the cold queries' outcomes (``/stats``)."""
        counts = self.cold.counts
        return {**self._postings.report(), **self._ranked.report(), "cold_answered": counts["answered"],
                "cold_given_up": counts["given_up"], "cold_deeper": counts["deeper"],
                "cold_intersected": counts["intersected"]}

    @property
    def cold_counts(self) -> dict[str, int]:
        """The cold queries answered, given up, and read deeper (``ColdReads.counts``)."""
        return self.cold.counts

    def _read_terms(self, terms: list[str]) -> dict[str, dict[str, bytes]]:
        """Whole postings rows: {term: {url: encoded posting}} (tombstones skipped)."""
        return postings_by_term(terms, self.postings.get_many([t.encode() for t in terms]))

    def _read_term_changes(self, terms: list[str], min_ts: int) -> dict[str, dict[str, bytes]]:
        """Postings cells written at or after ``min_ts``, tombstones included."""
        return postings_by_term(terms, self.postings.changes_since([t.encode() for t in terms], min_ts))

    def search(self, query: ParsedQuery, page: int, size: int, *, at_hand_only: bool = False) -> dict | None:
        """Page ``page`` (of ``size`` results) of ``query``'s results, with their details.

        ``at_hand_only``: answer only from what is in memory and needs no work beyond a
        lookup: the query's ranked results (``caffeine.search.ranking_cache``) from posting lists held and
        fresh, and every result's details and snippet; None when anything would have to be
        read, ranked or made (nothing is read then). The service answers such queries on its event loop
        and sends the others to its thread pool, where reads wait without holding it up."""
        started = time.perf_counter()
        corpus = self.statistics.current
        if at_hand_only:
            matched = self._ranked_at_hand(query, corpus, page * size)
            if matched is None:
                return None
        else:
            matched = self.rank(query, page * size, corpus)
        ranked = matched.hits[(page - 1) * size:]
        hits = [mh.hit for mh in ranked]
        details = self.details.of(hits, query.terms, at_hand_only=at_hand_only)
        if details is None:
            return None
        if at_hand_only:  # answered: count it as a search that reads would have been
            self._postings.note_used(list(query.lookups))
            self._ranked.note_hit()
        results = []
        for position, (mh, (title, snippet, cluster_size)) in enumerate(zip(ranked, details), start=(page - 1) * size + 1):
            hit = mh.hit
            results.append({
                "rank": position,
                "url": hit.url,
                "title": title,
                "snippet": snippet,
                "score": round(mh.score, 6),
                "all_terms": mh.all_terms,
                "matched_terms": list(hit.matched),
                "inlinks": hit.stats.inlinks,
                "fingerprint": hit.stats.fingerprint or None,
                "cluster_size": cluster_size,
                "document_url": document_link(hit.url),
                "cluster_url": cluster_link(hit.stats.fingerprint) if hit.stats.fingerprint else None,
            })
        return {
            "query": query.text,
            "terms": list(query.terms),
            "phrases": [list(p) for p in query.phrases],
            "excluded": list(query.excluded),
            "sites": list(query.sites),
            "qualifiers": list(query.qualifiers),
            "doc_freq": matched.doc_freq,
            "total": matched.total,
            "all_terms_total": matched.strict_total,
            "total_exact": matched.total_exact,
            "page": page,
            "size": size,
            "results": results,
            "took_ms": round((time.perf_counter() - started) * 1000, 3),
            "documents": corpus.num_docs,
            "stats_age_s": round(max(0.0, time.time() - corpus.refreshed_at), 3) if corpus.refreshed_at else None,
        }

    def rank(self, query: ParsedQuery, limit: int, corpus: CorpusStats | None = None):
        """The query's ``caffeine.search.matching.Match`` for its best ``limit`` results (no details):
        from the heads of its cold terms' impact-ordered rows when that is proved exact
        (``caffeine.search.cold``), else from its terms' whole posting lists."""
        corpus = corpus or self.statistics.current
        return self.cold.match(query, corpus, limit) or self._match(query, corpus, limit)

    def _match(self, query: ParsedQuery, corpus: CorpusStats, limit: int):
        """``caffeine.search.matching.match`` over the query terms' whole posting lists (held in memory,
        read whole or brought up to date as ``caffeine.search.postings_cache`` says), or the same match
        ranked earlier from the same lists and statistics (``caffeine.search.ranking_cache``)."""
        lookups = list(query.lookups)
        cached = self._postings.get(lookups)
        key, inputs, n = _ranking_key(query, corpus, limit, cached)
        scored = {term: term_scores(cached[term], corpus.weights, n) for term in lookups}
        outside = set().union(*(ts.outside.keys() for ts in scored.values()))
        if not outside:
            held = self._ranked.get(key, inputs)
            if held is not None:
                return held
        # Documents exported since the last docstats scan: read their rows now (one round trip).
        fresh = self.statistics.read(outside)
        raw = {term: cached[term].postings for term in lookups}
        matched = match(query, scored, raw, corpus.weights, fresh.get, n, limit=limit)
        if not outside:  # else it also depends on docstats read just now, which no stamp covers
            self._ranked.put(key, inputs, matched)
        else:
            self._ranked.note_miss()
        return matched

    def _ranked_at_hand(self, query: ParsedQuery, corpus: CorpusStats, limit: int):
        """``_match``'s answer when the ranking cache holds it for posting lists held and
        fresh, else None; reads and ranks nothing. (A held answer was ranked with no
        document outside the statistics, which its stamp keeps true.)"""
        cached = self._postings.peek(list(query.lookups))
        if cached is None:
            return None
        key, inputs, _ = _ranking_key(query, corpus, limit, cached)
        return self._ranked.get(key, inputs, count=False)

    def drop_postings(self) -> None:
        """Forget every posting list held in memory: the next query of any term is cold
        (``bench/bench_cold.py`` measures that; it also frees the memory). Waits for the
        whole-list reads that cold queries started in the background first: one landing
        after the drop would hold its terms in memory again."""
        self.wait_for_background_reads()
        self._postings.clear()
        self._ranked.clear()

    def wait_for_background_reads(self) -> None:
        """Return once the whole-list reads started by cold queries so far are done."""
        self.cold.wait_for_background_reads()
