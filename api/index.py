"""Reading the index: search, documents, duplicate clusters, statistics, health.

Layer: api service. Imports the public ``caffeine.percolator`` names (through the
``Cluster`` it is given), ``caffeine.index``, ``caffeine.index.schema`` (names, and the
codecs every stored value is decoded with), and two
read-only status helpers (``caffeine.percolator.status.pending_notifications``,
``caffeine.oracle.timestamps.physical_ms``). The routers call it; it knows nothing of HTTP.

Contract:

* **Read-only.** It never writes a table: serving tables are opened with ``create=False``,
  and every read of a Percolator table (``repository``, ``inlinks``, ``dups``) happens in a
  snapshot transaction that has no writes and commits trivially. (The ``Cluster`` itself
  heartbeats its owner row, which garbage collection needs to respect open snapshots.)
* **Consistent details.** One request's reads of Percolator tables share one snapshot
  (one ``cluster.begin()``), so a document, its cluster and its inlinks agree with each
  other. The serving tables (``postings``, ``docstats``) are not transactional and may be a
  moment ahead of or behind that snapshot; docs/INDEXING.md says how they converge.
* **Cached corpus statistics.** ``N``, the average length and every indexed document's
  ``docstats`` row (length, inlinks, fingerprint, title) come from a full scan of
  ``docstats``, brought up to date every ``stats_refresh_s`` by a background thread (only
  the rows changed since the previous refresh are read). A query's terms' posting lists come
  from ``api.postings_cache``: held in memory and brought up to date (only the changed cells
  read, one round trip for all of a query's terms) once they are ``postings_refresh_s`` old.
  A query also reads the ``docstats`` rows of documents newer than the statistics, and the
  details of the one page of results it returns that are not at hand: title and text for the
  snippet (kept until the document is exported again), cluster size (reused for
  ``details_cache_s`` seconds). So which documents match, with which term frequencies, is at
  most ~1 s old (near-real-time, as search engines with a refresh interval are); a result
  may show statistics or a cluster size up to ~10 s old. A document counts as indexed while
  its ``docstats`` row has a live ``s:length``.
* Methods return plain dicts/lists shaped like ``api.models``; "not found" is ``None``.
"""

from __future__ import annotations

import logging
import math
import threading
from sys import intern
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Mapping
from datetime import datetime, timezone
from urllib.parse import quote

from caffeine.index import normalize_url
from caffeine.index.schema import (
    CANONICAL_URL,
    CLUSTER_STATE,
    DOC_FINGERPRINT,
    DOC_OUTLINKS,
    DOC_PARSED,
    DOCSTATS,
    DOCSTATS_FAMILY,
    DUPS,
    IMPACTS,
    IMPACTS_FAMILY,
    INLINK_PREFIX,
    INLINKS,
    MEMBER_PREFIX,
    PAGE_META,
    POSTING_PREFIX,
    POSTINGS,
    POSTINGS_FAMILY,
    REPOSITORY,
    S_DONE,
    DocStats,
    decode_cluster_state,
    decode_docstats,
    decode_document,
    decode_fingerprint,
    decode_int,
    decode_outlinks,
    decode_page_meta,
)
from caffeine.oracle.timestamps import compose, physical_ms

from api.cold import answer, corpus_ratio, parse_head, plan
from api.matching import match
from api.postings_cache import PostingsCache, TermPostings
from api.query import ParsedQuery
from api.ranking import CorpusWeights, TermScores, corpus_weights, score_term
from api.settings import ApiSettings
from api.snippets import PreparedText, make_snippet, prepare

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CorpusStats:
    """One scan of ``docstats``: what ranking needs, and when it was taken."""

    docs: dict[str, DocStats]
    avg_len: float
    newest_seq: int | None       # highest s:done among indexed documents (an export's start_ts)
    refreshed_at: float          # unix time the scan finished
    scan_s: float
    weights: CorpusWeights       # norms and boosts of ``docs``; kept while a refresh finds no change
    started_at: float = 0.0      # unix time the refresh that produced this began
    whole_scan_at: float = 0.0   # unix time the last whole scan began

    @property
    def num_docs(self) -> int:
        return len(self.docs)


EMPTY_STATS = CorpusStats({}, 0.0, None, 0.0, 0.0, corpus_weights({}, 0.0))


@dataclass
class SlowStats:
    terms: int | None = None
    clusters: int | None = None
    clustered_pages: int | None = None
    computed_at: float | None = None
    scan_s: float | None = None
    running: bool = False
    requested_at: float = 0.0
    error: str | None = None


def iso(ts: float | None) -> str | None:
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def document_link(url: str) -> str:
    return "/documents?url=" + quote(url, safe="")


def cluster_link(fingerprint: str) -> str:
    return "/dups/" + fingerprint


def _newer(newest: int | None, cells: dict[str, bytes]) -> int | None:
    """The higher of ``newest`` and the row's ``s:done`` (an export's sequence number)."""
    done = cells.get(S_DONE)
    return max(newest or 0, decode_int(done)) if done else newest


def _by_term(terms: list[str], rows: Mapping[bytes, Mapping[str, bytes]]) -> dict[str, dict[str, bytes]]:
    """Postings rows ``{term: {"p:<url>": value}}`` -> ``{term: {url: value}}``; URLs interned:
    the posting lists held in memory then share one string per document, not one per posting."""
    return {
        term: {intern(column[len(POSTING_PREFIX):]): value
               for column, value in rows.get(term.encode(), {}).items() if column.startswith(POSTING_PREFIX)}
        for term in terms
    }


def _decoded(cells):
    """``(qualifier, value)`` cells with their qualifiers as text."""
    return [(q.decode("utf-8", "surrogateescape"), v) for q, v in cells]


def _members(cells: Mapping[str, bytes]) -> dict[str, int]:
    """A dups row's members: ``{url: inlinks}`` from its ``member:<url>`` cells."""
    return {column[len(MEMBER_PREFIX):]: decode_int(value)
            for column, value in cells.items() if column.startswith(MEMBER_PREFIX)}


class TtlCache:
    """A bounded, thread-safe map whose entries expire ``ttl_s`` after they were put."""

    def __init__(self, ttl_s: float, max_entries: int) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        if self.ttl_s <= 0:
            return None
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            if time.monotonic() - entry[0] > self.ttl_s:
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return entry[1]

    def put(self, key, value) -> None:
        if self.ttl_s <= 0:
            return
        with self._lock:
            self._data[key] = (time.monotonic(), value)
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


class IndexReader:
    """The read side of the index for one ``Cluster``; thread-safe; ``start`` then ``close``."""

    def __init__(self, cluster, settings: ApiSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.postings = cluster.serving(POSTINGS, [POSTINGS_FAMILY], create=False)
        self.docstats = cluster.serving(DOCSTATS, [DOCSTATS_FAMILY], create=False)
        self.impacts = cluster.serving(IMPACTS, [IMPACTS_FAMILY], create=False)
        self._cold_reads = True   # turned off for good when impacts cannot be summarized in HBase
        # Queries with a long cold term: answered from the heads, or given up (read whole).
        self.cold_counts = {"answered": 0, "given_up": 0}
        # Whole reads of cold terms' lists after their first query (api.cold): one at a time.
        self._warmer = ThreadPoolExecutor(1, thread_name_prefix="api-warm")
        self._stats = EMPTY_STATS
        self._stats_error: str | None = None
        self._refresh_lock = threading.Lock()
        self._slow = SlowStats()
        self._slow_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._sizes = TtlCache(settings.details_cache_s, settings.details_cache_entries)  # fingerprint -> size
        # (url, s:done) -> (title, prepared text): valid until the document is exported again.
        self._documents = TtlCache(math.inf, settings.details_cache_entries)
        self._snapshot: tuple = (None, 0.0)   # (shared read-only transaction, monotonic time begun)
        self._snapshot_lock = threading.Lock()
        self._postings = PostingsCache(
            # Postings are kept as stored: ranking reads their field counts once per
            # statistics snapshot, phrases and proximity their positions.
            self._read_terms, self._read_term_changes, bytes,
            refresh_s=settings.postings_refresh_s, margin_s=settings.change_margin_s,
            full_reload_s=settings.full_reload_s, max_postings=settings.postings_cache_max,
        )
        # Probes get threads of their own: a hung HBase must not also stall searches' reads.
        self._probes = ThreadPoolExecutor(4, thread_name_prefix="api-probe")

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "IndexReader":
        """First statistics scan (errors logged, not raised), then the background refresh."""
        try:
            self.refresh()
        except Exception as exc:  # noqa: BLE001 - the service starts; /healthz tells what fails
            self._stats_error = f"{type(exc).__name__}: {exc}"
            log.warning("first docstats scan failed: %s", self._stats_error)
        self._thread = threading.Thread(target=self._refresh_loop, name="api-stats", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._probes.shutdown(wait=False, cancel_futures=True)
        self._warmer.shutdown(wait=False, cancel_futures=True)

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.settings.stats_refresh_s):
            try:
                self.refresh()
                self._stats_error = None
            except Exception as exc:  # noqa: BLE001 - keep serving the last good statistics
                self._stats_error = f"{type(exc).__name__}: {exc}"
                log.warning("docstats refresh failed (keeping the previous statistics): %s", self._stats_error)

    # -- corpus statistics -------------------------------------------------------------------
    @property
    def corpus(self) -> CorpusStats:
        return self._stats

    def refresh(self, whole: bool = False) -> CorpusStats:
        """Bring the cached statistics up to date and swap them in (one refresh at a time).

        The first refresh, every one ``full_reload_s`` after the last whole scan, and one
        asked for with ``whole`` scan ``docstats`` whole. The others read only the rows with a
        cell written since the previous refresh started less ``change_margin_s`` (a time-range
        scan), each re-read whole: the near-real-time rule of ``api.postings_cache``.
        """
        with self._refresh_lock:
            started, started_wall = time.monotonic(), time.time()
            previous = self._stats
            whole = whole or previous is EMPTY_STATS or started_wall - previous.whole_scan_at >= self.settings.full_reload_s
            if whole:
                docs: dict[str, DocStats] = {}
                newest = None
                for row, cells in self.docstats.scan(batch_size=1024):
                    stats = decode_docstats(cells)
                    if stats is not None:
                        docs[row.decode("utf-8", "surrogateescape")] = stats
                        newest = _newer(newest, cells)
                changed = docs != previous.docs
                whole_scan_at = started_wall
            else:
                docs, newest, changed = previous.docs, previous.newest_seq, False
                since = compose(max(0, int((previous.started_at - self.settings.change_margin_s) * 1000)))
                rows = [row for row, _ in self.docstats.scan_changes(since, batch_size=1024)]
                for key, cells in (self.docstats.get_many(rows) if rows else {}).items():
                    url = key.decode("utf-8", "surrogateescape")
                    stats = decode_docstats(cells)
                    if stats != docs.get(url):
                        if not changed:
                            docs, changed = dict(docs), True  # copy on first change: readers hold the old one
                        if stats is None:
                            docs.pop(url, None)
                        else:
                            docs[url] = stats
                    if stats is not None:
                        newest = _newer(newest, cells)
                whole_scan_at = previous.whole_scan_at
            if changed:
                avg_len = sum(s.length for s in docs.values()) / len(docs) if docs else 0.0
                weights = corpus_weights(docs, avg_len)
                corpus_ratio(weights)  # here, once, rather than in the first cold query after
            else:
                # Unchanged: the same objects, so every term's cached scores stay valid.
                docs, avg_len, weights = previous.docs, previous.avg_len, previous.weights
            self._stats = CorpusStats(
                docs=docs,
                avg_len=avg_len,
                newest_seq=newest,
                refreshed_at=time.time(),
                scan_s=time.monotonic() - started,
                weights=weights,
                started_at=started_wall,
                whole_scan_at=whole_scan_at,
            )
            return self._stats

    # -- search ------------------------------------------------------------------------------
    @staticmethod
    def _term_scores(postings: TermPostings, weights: CorpusWeights, n: int) -> TermScores:
        """The term's scores under this snapshot, computed once per (postings, snapshot, N)
        and kept with the postings (so evicted with them)."""
        held = postings.derived.get("scores")
        if held is not None and held[0] is weights and held[1] == n:
            return held[2]
        scores = score_term(postings.postings, weights, n)
        postings.derived["scores"] = (weights, n, scores)  # a race computes it twice, harmlessly
        return scores

    def _read_terms(self, terms: list[str]) -> dict[str, dict[str, bytes]]:
        """Whole postings rows: {term: {url: encoded posting}} (tombstones skipped)."""
        return _by_term(terms, self.postings.get_many([t.encode() for t in terms]))

    def _read_term_changes(self, terms: list[str], min_ts: int) -> dict[str, dict[str, bytes]]:
        """Postings cells written at or after ``min_ts``, tombstones included."""
        return _by_term(terms, self.postings.changes_since([t.encode() for t in terms], min_ts))

    def search(self, query: ParsedQuery, page: int, size: int) -> dict:
        started = time.perf_counter()
        corpus = self._stats
        matched = self.rank(query, page * size, corpus)
        ranked = matched.hits[(page - 1) * size:]
        hits = [mh.hit for mh in ranked]
        details = self._details(hits, query.terms)
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
        corpus = corpus or self._stats
        return self._match_cold(query, corpus, limit) or self._match(query, corpus, limit)

    def _match(self, query: ParsedQuery, corpus: CorpusStats, limit: int):
        """``api.matching.match`` over the query terms' whole posting lists (held in memory,
        read whole or brought up to date as ``api.postings_cache`` says)."""
        lookups = list(query.lookups)
        cached = self._postings.get(lookups)
        # N covers every df seen: a document newer than the statistics may push a df above it.
        n = max([corpus.num_docs, *(len(cached[term].postings) for term in lookups)])
        scored = {term: self._term_scores(cached[term], corpus.weights, n) for term in lookups}
        # Documents exported since the last docstats scan: read their rows now (one round trip).
        fresh = self._docstats_of(set().union(*(ts.outside.keys() for ts in scored.values())))
        raw = {term: cached[term].postings for term in lookups}
        return match(query, scored, raw, corpus.weights, fresh.get, n, limit=limit)

    def _match_cold(self, query: ParsedQuery, corpus: CorpusStats, limit: int):
        """The query's match from the heads of its cold terms' impact-ordered rows
        (``api.cold``), or None: no term is cold, the cold path is off or unavailable, or its
        answer could not be proved (the caller then reads the whole lists). The cold terms'
        whole lists are read in the background either way, for the queries that follow."""
        width = self.settings.cold_width
        cold = self._postings.absent(list(query.lookups)) if width > 0 and self._cold_reads else []
        if not cold or corpus_ratio(corpus.weights) is None:
            return None  # nothing cold, or some document has no impacts cells (yet)
        # Cells written since the statistics' scan began (less the margin) may belong to
        # documents the statistics lack: they are read too and become candidates.
        since = compose(max(0, int((corpus.started_at - self.settings.change_margin_s) * 1000)))
        try:
            prefixes = self.impacts.read_prefix([t.encode() for t in cold], width, since)
        except Exception as exc:  # noqa: BLE001 - no impacts table (an index exported before it): read whole
            log.info("cold reads off: the impacts table cannot be read (%s)", exc)
            self._cold_reads = False
            return None
        if not all(p.server_side for p in prefixes.values()):
            # The server read whole rows to summarize them: the cold path saves nothing here.
            log.info("cold reads off: HBase does not summarize rows (the coprocessor is not loaded)")
            self._cold_reads = False
            return None
        heads = {}
        for term in cold:
            prefix = prefixes[term.encode()]
            heads[term] = parse_head(_decoded(prefix.cells), prefix.count, _decoded(prefix.recent))
        if all(head.complete for head in heads.values()):
            return None  # short lists: reading them whole costs about as much, and is exact in totals too
        warm = [t for t in query.lookups if t not in heads]
        cached = self._postings.get(warm) if warm else {}
        n = max([corpus.num_docs, *(len(cached[t].postings) for t in warm), *(h.df for h in heads.values())])
        whole = {t: self._term_scores(cached[t], corpus.weights, n) for t in warm}
        candidates = plan(query, heads, whole, width, corpus.weights, n)
        partial = [t for t, head in heads.items() if not head.complete]
        found: dict[str, dict[str, bytes]] = {}
        # Each partial term's postings of the candidates its head lacks; one read, with the
        # union of those URLs as columns (a single-word query needs none).
        unknown = dict.fromkeys(url for t in partial for url in candidates if url not in heads[t].postings)
        if unknown:
            columns = [f"{POSTING_PREFIX}{url}" for url in unknown]
            rows = self.postings.get_many([t.encode() for t in partial], columns)
            found = _by_term(partial, rows)
        # Documents newer than the statistics, in the heads or the whole lists: one read.
        fresh = self._docstats_of({url for h in heads.values() for url in h.postings if url not in corpus.weights.norms}
                                  .union(*(ts.outside.keys() for ts in whole.values())))
        matched = answer(query, heads, whole, {t: cached[t].postings for t in warm}, candidates, found,
                         corpus.weights, fresh.get, n, limit)
        self.cold_counts["answered" if matched is not None else "given_up"] += 1  # a race may lose a count
        if matched is not None:
            # After the answer, not during it: the whole reads would compete for the client's CPU.
            self._warmer.submit(self._postings.get, cold)
        return matched

    def _docstats_of(self, urls) -> dict[str, DocStats | None]:
        """The docstats of ``urls`` read now, in one round trip (None: not in the index)."""
        if not urls:
            return {}
        return {key.decode("utf-8", "surrogateescape"): decode_docstats(cells)
                for key, cells in self.docstats.get_many([u.encode() for u in urls]).items()}

    def drop_postings(self) -> None:
        """Forget every posting list held in memory: the next query of any term is cold
        (``bench/bench_cold.py`` measures that; it also frees the memory)."""
        self._postings.clear()

    def wait_for_background_reads(self) -> None:
        """Return once the whole-list reads started by cold queries so far are done."""
        self._warmer.submit(lambda: None).result()

    def _details(self, hits, terms) -> list[tuple[str, str, int]]:
        """(title, snippet HTML, cluster size) of each hit.

        A document's title and text (``doc:parsed``, tokenized for snippets) are kept per
        export (the ``s:done`` sequence in its statistics), so they are read again only when
        the document is exported again; a cluster's size (``dups``) is reused for
        ``details_cache_s`` seconds. What is not at hand is read in one snapshot (at most
        ``postings_refresh_s`` old, see ``_details_snapshot``), one batched read per table
        (``/documents`` and ``/dups`` always read in a fresh snapshot).
        """
        docs: dict[str, tuple[str, PreparedText] | None] = {}
        sizes: dict[str, int | None] = {}
        exported = {hit.url: hit.stats.done for hit in hits}
        for hit in hits:
            docs[hit.url] = self._documents.get((hit.url, hit.stats.done))
            if hit.stats.fingerprint:
                sizes[hit.stats.fingerprint] = self._sizes.get(hit.stats.fingerprint)
        doc_reads = [url for url, value in docs.items() if value is None]
        size_reads = [fp for fp, value in sizes.items() if value is None]
        if doc_reads or size_reads:
            txn = self._details_snapshot(max((exported[url] for url in doc_reads), default=0))
            parsed = txn.get_rows(REPOSITORY, doc_reads, [DOC_PARSED]) if doc_reads else {}
            rows = txn.get_all_rows(DUPS, size_reads) if size_reads else {}
            for url in doc_reads:
                raw = parsed[url.encode()][DOC_PARSED]
                doc = decode_document(raw, {})
                # Tokenized once here, not per query: most of a snippet's cost.
                docs[url] = (doc.get("title") or "", prepare(doc.get("text")))
                self._documents.put((url, exported[url]), docs[url])
            for fp in size_reads:
                sizes[fp] = max(1, len(_members(rows[fp.encode()])))
                self._sizes.put(fp, sizes[fp])
        out = []
        for hit in hits:
            title, text = docs[hit.url]
            snippet = make_snippet(text, terms, self.settings.snippet_tokens, self.settings.snippet_chars)
            size = sizes.get(hit.stats.fingerprint) or 1
            out.append((title or hit.stats.title or hit.url, snippet, size))
        return out

    def _details_snapshot(self, newest_export: int):
        """A read-only snapshot for result details, shared by the queries of up to
        ``postings_refresh_s`` (results are that old anyway): one oracle round trip per
        interval instead of per query. A fresh one is begun when the shared one predates
        ``newest_export`` (an export's start_ts), so a document's text is never read from
        before the export it is cached under. Never committed: it writes nothing, and it
        holds GC's horizon only while some query still uses it (``Cluster._register``).
        """
        now = time.monotonic()
        with self._snapshot_lock:
            shared, taken_at = self._snapshot
            if shared is not None and now - taken_at <= self.settings.postings_refresh_s and shared.start_ts >= newest_export:
                return shared
        txn = self.cluster.snapshot()  # at a fresh timestamp
        with self._snapshot_lock:
            self._snapshot = (txn, now)
        return txn

    # -- documents and clusters --------------------------------------------------------------
    @staticmethod
    def _cluster_row(txn, fingerprint: str) -> tuple[dict[str, int], str | None]:
        cells = txn.get_all(DUPS, fingerprint)
        canonical = cells.get(CANONICAL_URL)
        return _members(cells), canonical.decode() if canonical is not None else None

    @staticmethod
    def _candidates(url: str) -> list[str]:
        normalized = normalize_url(url)
        return list(dict.fromkeys(u for u in (normalized, url.strip()) if u))

    def document(self, url: str) -> dict | None:
        """Everything stored about one page, or None if the repository has no row for it."""
        limit = self.settings.max_listed_links
        columns = [PAGE_META, DOC_PARSED, DOC_OUTLINKS, DOC_FINGERPRINT, CLUSTER_STATE]
        with self.cluster.begin() as txn:
            for candidate in self._candidates(url):
                cols = txn.get_row(REPOSITORY, candidate, columns)
                if any(v is not None for v in cols.values()):
                    url = candidate
                    break
            else:
                return None
            meta = decode_page_meta(cols[PAGE_META], {})
            parsed = decode_document(cols[DOC_PARSED])
            outlinks = decode_outlinks(cols[DOC_OUTLINKS])
            fingerprint = decode_fingerprint(cols[DOC_FINGERPRINT])
            state = decode_cluster_state(cols[CLUSTER_STATE])
            key = url.encode()
            inlinks = [
                {"source": column[len(INLINK_PREFIX):], "anchor": value.decode("utf-8", "replace")}
                for _, cells in txn.scan(INLINKS, key, key + b"\x00")
                for column, value in cells.items() if column.startswith(INLINK_PREFIX)
            ]
            members, canonical = self._cluster_row(txn, fingerprint) if fingerprint else ({}, None)
        stats = decode_docstats(self.docstats.get(key))
        duplicates = sorted(({"url": u, "inlinks": n} for u, n in members.items() if u != url),
                            key=lambda m: (-m["inlinks"], m["url"]))
        fetched_at = meta.get("fetched_at")
        return {
            "url": url,
            "title": parsed.get("title") if parsed else None,
            "fetched_at": fetched_at,
            "fetched_at_iso": iso(fetched_at) if isinstance(fetched_at, (int, float)) else None,
            "status": meta.get("status"),
            "content_type": meta.get("content_type"),
            "fetch_error": meta.get("error"),
            "final_url": meta.get("final_url"),
            "bytes": meta.get("bytes"),
            "truncated": meta.get("truncated"),
            "content_hash": fingerprint,
            "length": parsed.get("length") if parsed else None,
            "excerpt": make_snippet(parsed.get("text") or "", (), 48, 400) if parsed else None,
            "declared_canonical": parsed.get("canonical") if parsed else None,
            "indexed": state.canonical and stats is not None,
            "canonical_url": canonical,
            "is_canonical": canonical == url if canonical else False,
            "inlink_count": len(inlinks),
            "cluster_size": len(members) if fingerprint else 0,
            "duplicates": duplicates[:limit],
            "inlinks_total": len(inlinks),
            "inlinks": sorted(inlinks, key=lambda i: i["source"])[:limit],
            "outlinks_total": len(outlinks),
            "outlinks": [{"target": t, "anchor": a} for t, a in outlinks[:limit]],
            "cluster_url": cluster_link(fingerprint) if fingerprint else None,
        }

    def dup_cluster(self, fingerprint: str) -> dict | None:
        """A duplicate cluster: canonical and members (with inlink counts), or None."""
        with self.cluster.begin() as txn:
            members, canonical = self._cluster_row(txn, fingerprint)
        if not members:
            return None
        ordered = sorted(members.items(), key=lambda m: (-m[1], len(m[0]), m[0]))
        return {
            "fingerprint": fingerprint,
            "canonical_url": canonical,
            "size": len(members),
            "members": [
                {"url": u, "inlinks": n, "canonical": u == canonical, "document_url": document_link(u)}
                for u, n in ordered[: self.settings.max_listed_links]
            ],
        }

    def dup_cluster_of(self, url: str) -> dict | None:
        """The cluster of the page at ``url`` (None if unknown or in no cluster)."""
        with self.cluster.begin() as txn:
            for candidate in self._candidates(url):
                fp = decode_fingerprint(txn.get(REPOSITORY, candidate, DOC_FINGERPRINT))
                if fp:
                    break
            else:
                return None
        return self.dup_cluster(fp)

    # -- status ------------------------------------------------------------------------------
    def stats(self) -> dict:
        from caffeine.percolator.status import pending_notifications

        corpus = self._stats
        now = time.time()
        self._maybe_refresh_slow(now)
        slow = self._slow
        # The observed tables as the installed applications recorded them in the deployment.
        pending = pending_notifications(self.cluster.store, self.cluster.observed_tables())
        oldest_age = pending.oldest_age_s()
        newest_ms = physical_ms(corpus.newest_seq) if corpus.newest_seq else None
        return {
            "documents": corpus.num_docs,
            "average_length": round(corpus.avg_len, 3),
            "clusters": slow.clusters,
            "clustered_pages": slow.clustered_pages,
            "terms": slow.terms,
            "freshness": {
                "newest_export_at": iso(newest_ms / 1000) if newest_ms else None,
                "age_s": round(max(0.0, now - newest_ms / 1000), 3) if newest_ms else None,
            },
            "pending_notifications": {
                "count": pending.count,
                "oldest_age_s": None if oldest_age is None else round(oldest_age, 3),
            },
            "statistics": {
                "refreshed_at": iso(corpus.refreshed_at) if corpus.refreshed_at else None,
                "age_s": round(now - corpus.refreshed_at, 3) if corpus.refreshed_at else None,
                "scan_s": round(corpus.scan_s, 3),
                "error": self._stats_error,
                "slow_computed_at": iso(slow.computed_at),
                "slow_scan_s": None if slow.scan_s is None else round(slow.scan_s, 3),
                "slow_running": slow.running,
                "slow_error": slow.error,
            },
            "search_cache": {**self._postings.report(), "cold_answered": self.cold_counts["answered"],
                             "cold_given_up": self.cold_counts["given_up"]},
        }

    def _maybe_refresh_slow(self, now: float) -> None:
        with self._slow_lock:
            slow = self._slow
            stale = slow.computed_at is None or now - slow.computed_at > self.settings.slow_stats_refresh_s
            if slow.running or not stale:
                return
            slow.running = True
        threading.Thread(target=self._refresh_slow, name="api-slow-stats", daemon=True).start()

    def refresh_slow(self) -> SlowStats:
        """Count distinct terms (postings rows with a live posting) and clusters (scan of
        dups), now."""
        with self._slow_lock:
            self._slow.running = True
        self._refresh_slow()
        return self._slow

    def _refresh_slow(self) -> None:
        started = time.monotonic()
        try:
            terms = self.postings.count_rows()
            clusters = pages = 0
            with self.cluster.begin() as txn:
                for _, cols in txn.scan(DUPS, batch_size=512):
                    n = sum(1 for c in cols if c.startswith(MEMBER_PREFIX))
                    if n:
                        clusters += 1
                        pages += n
            with self._slow_lock:
                self._slow = SlowStats(terms, clusters, pages, time.time(), time.monotonic() - started)
        except Exception as exc:  # noqa: BLE001 - reported by /stats, retried on the next ask
            log.warning("slow statistics failed: %s", exc)
            with self._slow_lock:
                self._slow.running = False
                self._slow.error = f"{type(exc).__name__}: {exc}"

    def health(self) -> dict:
        """Probe HBase (a point read of ``docstats`` and ``postings``) and the oracle."""
        timeout = self.settings.health_timeout_s

        def hbase():
            self.docstats.get(b"\x00healthz")
            self.postings.get(b"\x00healthz")
            return "reads of docstats and postings answered"

        def oracle():
            return f"next timestamp {self.cluster.oracle.status()}"

        checks = {}
        futures = {name: self._probes.submit(fn) for name, fn in (("hbase", hbase), ("oracle", oracle))}
        for name, future in futures.items():
            started = time.monotonic()
            try:
                detail = future.result(timeout=timeout)
                checks[name] = {"ok": True, "detail": detail}
            except FutureTimeout:
                checks[name] = {"ok": False, "detail": f"no answer within {timeout:g}s"}
            except Exception as exc:  # noqa: BLE001 - the reason is the answer
                text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                checks[name] = {"ok": False, "detail": f"{type(exc).__name__}: {text}".rstrip(": ")}
            checks[name]["ms"] = round((time.monotonic() - started) * 1000, 1)
        return {"ok": all(c["ok"] for c in checks.values()), "checks": checks}
