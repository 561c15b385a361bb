"""Search: a parsed query's ranked page of results, from posting lists held in memory or the
heads of impact-ordered rows.

Layer: api service. Imports the public ``caffeine.percolator`` names (through the
``ServingTable``s it is given: ``postings``, ``impacts``), ``caffeine.index.schema`` (names
and codecs), ``caffeine.oracle.timestamps``, and the api's pure ranking (``api.ranking``,
``api.matching``, ``api.cold``), ``api.postings_cache``, ``api.statistics`` and
``api.details``. Read-only; knows nothing of HTTP.

Contract: a query's terms' posting lists come from ``api.postings_cache``: held in memory and
brought up to date (only the changed cells read, one round trip for all of a query's terms)
once they are ``postings_refresh_s`` old. A term not held (cold) is first answered from the
head of its ``impacts`` row when ``api.cold`` proves that exact, and read whole in the
background for the queries that follow. A query also reads the ``docstats`` rows of
documents newer than the statistics. A query's ranked answer is reused while its terms'
lists and the statistics are the ones it was ranked from (``api.ranking_cache``), and a
query whose whole answer is in memory can be asked for without any read
(``search(at_hand_only=True)``). So which documents match, with which term
frequencies, is at most ~1 s old (near-real-time, as search engines with a refresh
interval are); a result may show statistics or a cluster size up to ~10 s old.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from sys import intern
from typing import Mapping

from caffeine.index.schema import decode_key, posting_cells, posting_column
from caffeine.percolator.serving import MAX_PREFIX, TableNotFound
from caffeine.oracle.timestamps import compose

from api.cold import answer, corpus_ratio, first_lookups, parse_head, plan, prune
from api.details import ResultDetails
from api.formats import cluster_link, document_link
from api.matching import match
from api.postings_cache import PostingsCache, TermPostings
from api.query import ParsedQuery
from api.ranking import CorpusWeights, TermScores, score_term
from api.ranking_cache import RankingCache, stamp
from api.settings import ApiSettings
from api.statistics import CorpusStatistics, CorpusStats

log = logging.getLogger(__name__)

# A cold query whose heads could not prove its answer reads them again this many times as
# deep, while that stays under half of the longest partial row; then the whole lists.
DEEPER = 4
# The posting lists of terms queried within this long are kept up to date ahead of their
# queries (PostingsCache.refresh_used).
AHEAD_WINDOW_S = 30.0


def _by_term(terms: list[str], rows: Mapping[bytes, Mapping[str, bytes]]) -> dict[str, dict[str, bytes]]:
    """Postings rows -> ``{term: {url: value}}``; URLs interned: the posting lists held in
    memory then share one string per document, not one per posting."""
    return {term: {intern(url): value for url, value in posting_cells(rows.get(term.encode(), {}))}
            for term in terms}


def _text_qualifiers(cells):
    """``(qualifier, value)`` cells with their qualifiers as text."""
    return [(decode_key(q), v) for q, v in cells]


def _term_scores(postings: TermPostings, weights: CorpusWeights, n: int) -> TermScores:
    """The term's scores under this snapshot, computed once per (postings, snapshot, N) and
    kept with the postings (so evicted with them)."""
    held = postings.derived.get("scores")
    if held is not None and held[0] is weights and held[1] == n:
        return held[2]
    scores = score_term(postings.postings, weights, n)
    postings.derived["scores"] = (weights, n, scores)  # a race computes it twice, harmlessly
    return scores


def _ranking_key(query: ParsedQuery, corpus: CorpusStats, limit: int, cached: Mapping[str, TermPostings]):
    """(the ranking cache's key, the stamp of the inputs, N) of a query over ``cached``."""
    lookups = query.lookups
    # N covers every df seen: a document newer than the statistics may push a df above it.
    n = max([corpus.num_docs, *(len(cached[term].postings) for term in lookups)])
    key = (query.terms, query.phrases, query.excluded, query.sites, limit)
    return key, stamp(corpus.weights, n, tuple(cached[term].version for term in lookups)), n


class Searcher:
    """Ranks queries over one index's ``postings`` and ``impacts``; thread-safe; ``close``."""

    def __init__(self, postings, impacts, statistics: CorpusStatistics, details: ResultDetails,
                 settings: ApiSettings) -> None:
        self.postings = postings
        self.impacts = impacts
        self.statistics = statistics
        self.details = details
        self.settings = settings
        self._cold_reads = True   # turned off for good when impacts cannot be summarized in HBase
        # Queries with a long cold term: answered from the heads, or given up (read whole);
        # and the heads read again deeper first (either way).
        self.cold_counts = {"answered": 0, "given_up": 0, "deeper": 0}
        # Warm queries' ranked results, reused while their inputs are unchanged (api.ranking_cache).
        self._ranked = RankingCache(settings.ranking_cache_entries, settings.ranking_cache_hits)
        # Whole reads of cold terms' lists after their first query (api.cold): one at a time.
        self._warmer = ThreadPoolExecutor(1, thread_name_prefix="api-warm")
        self._postings = PostingsCache(
            # Postings are kept as stored: ranking reads their field counts once per
            # statistics snapshot, phrases and proximity their positions.
            self._read_terms, self._read_term_changes, bytes,
            refresh_s=settings.postings_refresh_s, margin_s=settings.change_margin_s,
            full_reload_s=settings.full_reload_s, max_postings=settings.postings_cache_max,
            ahead_window_s=AHEAD_WINDOW_S if settings.postings_refresh_ahead else 0.0,
        )

        # The terms queries use, brought up to date ahead of them (PostingsCache.refresh_used).
        self._stop = threading.Event()
        self._ahead = None
        if settings.postings_refresh_ahead and settings.postings_refresh_s > 0:
            self._ahead = threading.Thread(target=self._refresh_ahead, name="api-postings-ahead", daemon=True)
            self._ahead.start()

    def close(self) -> None:
        self._stop.set()
        self._warmer.shutdown(wait=False, cancel_futures=True)
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
        return {**self._postings.report(), **self._ranked.report(), "cold_answered": self.cold_counts["answered"],
                "cold_given_up": self.cold_counts["given_up"], "cold_deeper": self.cold_counts["deeper"]}

    def _read_terms(self, terms: list[str]) -> dict[str, dict[str, bytes]]:
        """Whole postings rows: {term: {url: encoded posting}} (tombstones skipped)."""
        return _by_term(terms, self.postings.get_many([t.encode() for t in terms]))

    def _read_term_changes(self, terms: list[str], min_ts: int) -> dict[str, dict[str, bytes]]:
        """Postings cells written at or after ``min_ts``, tombstones included."""
        return _by_term(terms, self.postings.changes_since([t.encode() for t in terms], min_ts))

    def search(self, query: ParsedQuery, page: int, size: int, *, at_hand_only: bool = False) -> dict | None:
        """Page ``page`` (of ``size`` results) of ``query``'s results, with their details.

        ``at_hand_only``: answer only from what is in memory and needs no work beyond a
        lookup: the query's ranked results (``api.ranking_cache``) from posting lists held and
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
        """The query's ``api.matching.Match`` for its best ``limit`` results (no details):
        from the heads of its cold terms' impact-ordered rows when that is proved exact
        (``api.cold``), else from its terms' whole posting lists."""
        corpus = corpus or self.statistics.current
        return self._match_cold(query, corpus, limit) or self._match(query, corpus, limit)

    def _match(self, query: ParsedQuery, corpus: CorpusStats, limit: int):
        """``api.matching.match`` over the query terms' whole posting lists (held in memory,
        read whole or brought up to date as ``api.postings_cache`` says), or the same match
        ranked earlier from the same lists and statistics (``api.ranking_cache``)."""
        lookups = list(query.lookups)
        cached = self._postings.get(lookups)
        key, inputs, n = _ranking_key(query, corpus, limit, cached)
        scored = {term: _term_scores(cached[term], corpus.weights, n) for term in lookups}
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

    def _match_cold(self, query: ParsedQuery, corpus: CorpusStats, limit: int):
        """The query's match from the heads of its cold terms' impact-ordered rows
        (``api.cold``), or None: no term is cold, the cold path is off or unavailable, or its
        answer could not be proved (the caller then reads the whole lists). A head too
        shallow to prove the answer is read again ``DEEPER`` times as deep, as long as that is
        well short of its whole row and within what a store summarizes (``MAX_PREFIX``). The
        cold terms' whole lists are read in the background after an answer, for the queries
        that follow."""
        width = self.settings.cold_width
        cold = self._postings.absent(list(query.lookups)) if width > 0 and self._cold_reads else []
        if not cold or corpus_ratio(corpus.weights) is None:
            return None  # nothing cold, or some document has no impacts cells (yet)
        # Cells written since the statistics' scan began (less the margin) may belong to
        # documents the statistics lack: they are read too and become candidates.
        since = compose(max(0, int((corpus.started_at - self.settings.change_margin_s) * 1000)))
        asked: dict[str, dict[str, bytes | None]] = {}  # read by URL so far: a deeper try reads only new ones
        while True:
            outcome = self._from_heads(query, corpus, limit, cold, width, since, asked)
            if outcome is None:
                return None  # not applicable: the lists are read whole
            matched, longest = outcome
            if matched is not None:
                self.cold_counts["answered"] += 1  # a race may lose a count
                # After the answer, not during it: the whole reads would compete for the CPU.
                self._warmer.submit(self._postings.get, cold)
                return matched
            width *= DEEPER
            if longest < 2 * width or width > MAX_PREFIX:
                self.cold_counts["given_up"] += 1
                return None
            self.cold_counts["deeper"] += 1

    def _from_heads(self, query: ParsedQuery, corpus: CorpusStats, limit: int, cold: list[str], width: int,
                    since: int, asked: dict[str, dict[str, bytes | None]]):
        """One attempt of ``_match_cold`` with heads of ``width`` cells: None when heads do
        not apply (nothing to save), else (the proved match or None, the longest partial
        head's row length). ``asked``: ``_lookups``' memo, shared by the query's attempts."""
        try:
            prefixes = self.impacts.read_prefix([t.encode() for t in cold], width, since)
        except TableNotFound as exc:  # an index exported before impacts existed: read whole, always
            log.info("cold reads off: no impacts table (%s)", exc)
            self._cold_reads = False
            return None
        except Exception as exc:  # noqa: BLE001 - this query reads whole; the next tries heads again
            log.warning("cold read failed, reading the whole lists instead: %s: %s", type(exc).__name__, exc)
            return None
        if not all(p.server_side for p in prefixes.values()):
            # The server read whole rows to summarize them: the cold path saves nothing here.
            log.info("cold reads off: HBase does not summarize rows (the coprocessor is not loaded)")
            self._cold_reads = False
            return None
        heads = {}
        for term in cold:
            prefix = prefixes[term.encode()]
            heads[term] = parse_head(_text_qualifiers(prefix.cells), prefix.count, _text_qualifiers(prefix.recent))
        if all(head.complete for head in heads.values()):
            return None  # short lists: reading them whole costs about as much, and is exact in totals too
        warm = [t for t in query.lookups if t not in heads]
        cached = self._postings.get(warm) if warm else {}
        n = max([corpus.num_docs, *(len(cached[t].postings) for t in warm), *(h.df for h in heads.values())])
        whole = {t: _term_scores(cached[t], corpus.weights, n) for t in warm}
        planned = plan(query, heads, whole, width, corpus.weights, n)
        partial = [t for t, head in heads.items() if not head.complete]
        longest = max(heads[t].df for t in partial)
        # Each partial term's postings of the candidates its head lacks (a single-word query
        # needs none): the candidates with the best upper bounds first when the rest may then
        # be pruned (api.cold.prune), else all of them in one read.
        first = first_lookups(query, planned, limit)
        left_out = 0.0
        whole_raw = {t: cached[t].postings for t in warm}
        source = planned.source
        if source is not None and len(source) < len(planned.candidates):
            # Every all-words document holds the rarest word, whose list is at hand: when
            # they fill the page, its documents are all the candidates needed.
            found = self._lookups(partial, heads, source, asked)
            fresh = self._fresh(heads, whole, corpus)
            matched = answer(query, heads, whole, whole_raw, source, found, corpus.weights, fresh.get, n, limit,
                             planned.source_left_out)
            if matched is not None:
                return matched, longest
            chosen = set(source)
            candidates = planned.candidates
            for term, postings in self._lookups(partial, heads, [u for u in candidates if u not in chosen],
                                                  asked).items():
                found[term].update(postings)
        elif first is None:
            candidates = planned.candidates
            found = self._lookups(partial, heads, candidates, asked)
        else:
            found = self._lookups(partial, heads, first, asked)
            candidates, left_out = prune(query, planned, heads, first, found, corpus.weights, n, limit)
            chosen = set(first)
            for term, postings in self._lookups(partial, heads, [u for u in candidates if u not in chosen],
                                                  asked).items():
                found[term].update(postings)
        fresh = self._fresh(heads, whole, corpus)
        return answer(query, heads, whole, whole_raw, candidates, found, corpus.weights, fresh.get, n, limit,
                      left_out), longest

    def _fresh(self, heads, whole, corpus: CorpusStats):
        """The statistics of the documents newer than the snapshot, in the heads or the whole
        lists: one read."""
        return self.statistics.read({url for h in heads.values() for url in h.postings if url not in corpus.weights.norms}
                                    .union(*(ts.outside.keys() for ts in whole.values())))

    def _lookups(self, partial: list[str], heads, urls: list[str],
                 asked: dict[str, dict[str, bytes | None]]) -> dict[str, dict[str, bytes]]:
        """Each of the ``partial`` terms' postings of those ``urls`` its head lacks: one read,
        with the union of those URLs not in ``asked`` as columns (none when there are none).
        ``asked``: per term, each URL read before in this query and its posting (None: the
        term lacks it); the read's answers are added."""
        unknown = dict.fromkeys(url for t in partial for url in urls
                                if url not in heads[t].postings and url not in asked.get(t, ()))
        if unknown:
            columns = [posting_column(url) for url in unknown]
            read = _by_term(partial, self.postings.get_many([t.encode() for t in partial], columns))
            for t in partial:
                memo, got = asked.setdefault(t, {}), read[t]
                memo.update((url, got.get(url)) for url in unknown)
        return {t: {url: value for url in urls
                    if url not in heads[t].postings and (value := asked.get(t, {}).get(url)) is not None}
                for t in partial}

    def drop_postings(self) -> None:
        """Forget every posting list held in memory: the next query of any term is cold
        (``bench/bench_cold.py`` measures that; it also frees the memory)."""
        self._postings.clear()
        self._ranked.clear()

    def wait_for_background_reads(self) -> None:
        """Return once the whole-list reads started by cold queries so far are done."""
        self._warmer.submit(lambda: None).result()
