"""Result details: the title, snippet and cluster size shown with each search result.

Layer: search. Imports the public ``caffeine.percolator`` names (through the
``Cluster`` it is given: snapshot reads of ``repository`` and ``dups``) and
``caffeine.index.schema`` (names and codecs). Read-only.

Contract: a document's title and text (``doc:parsed``, tokenized for snippets) are kept per
export (the ``s:done`` sequence in its statistics), so they are read again only when the
document is exported again; a cluster's size (``dups``) is reused for ``details_cache_s``
seconds, and the sizes shown in the last ``SIZES_AHEAD_WINDOW_S`` are read again before
they expire by ``refresh_used`` (the search service's background thread), so a result in
use is shown without a read. What is not at hand is read in one snapshot, at most
``postings_refresh_s`` old (results are that old anyway), with one batched read per table.
"""

from __future__ import annotations

import math
import threading
import time

from caffeine.index.neardup import cluster_rows, cluster_size
from caffeine.index.schema import DOC_PARSED, DUPS, REPOSITORY, decode_document

from caffeine.search.settings import SearchSettings
from caffeine.search.snippets import PreparedText, make_snippet, prepare
from caffeine.search.ttl_cache import RecentKeys, TtlCache

# Cluster sizes shown within this long are kept read ahead of their expiry (refresh_used).
SIZES_AHEAD_WINDOW_S = 30.0


class ResultDetails:
    """The details of search hits for one ``Cluster``; thread-safe."""

    def __init__(self, cluster, settings: SearchSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self._sizes = TtlCache(settings.details_cache_s, settings.details_cache_entries)  # fingerprint -> size
        # (url, s:done) -> (title, prepared text): valid until the document is exported again.
        self._documents = TtlCache(math.inf, settings.details_cache_entries)
        # (url, s:done, terms) -> snippet HTML: a pure function of the text it is cached with.
        self._snippets = TtlCache(math.inf if settings.snippet_cache_entries else 0, settings.snippet_cache_entries)
        self._snapshot: tuple = (None, 0.0)   # (shared read-only transaction, monotonic time begun)
        self._snapshot_lock = threading.Lock()
        self._shown = RecentKeys(SIZES_AHEAD_WINDOW_S)   # fingerprints shown, for refresh_used

    def of(self, hits, terms, *, at_hand_only: bool = False) -> list[tuple[str, str, int]] | None:
        """(title, snippet HTML, cluster size) of each hit (an ``caffeine.search.matching`` hit: ``url``
        and ``stats``), its snippet around ``terms``. ``at_hand_only``: None, having read
        nothing, when some title, text, size or snippet is not in memory."""
        docs: dict[str, tuple[str, PreparedText] | None] = {}
        sizes: dict[str, int | None] = {}
        exported = {hit.url: hit.stats.done for hit in hits}
        for hit in hits:
            docs[hit.url] = self._documents.get((hit.url, hit.stats.done))
            if hit.stats.fingerprint:
                sizes[hit.stats.fingerprint] = self._sizes.get(hit.stats.fingerprint)
        if sizes and self.settings.postings_refresh_ahead:  # else refresh_used, which prunes it, never runs
            self._shown.touch(sizes, time.monotonic())
        doc_reads = [url for url, value in docs.items() if value is None]
        size_reads = [fp for fp, value in sizes.items() if value is None]
        if at_hand_only and (doc_reads or size_reads):
            return None
        if doc_reads or size_reads:
            txn = self._shared_snapshot(max((exported[url] for url in doc_reads), default=0))
            parsed = txn.get_rows(REPOSITORY, doc_reads, [DOC_PARSED]) if doc_reads else {}
            rows = txn.get_all_rows(DUPS, size_reads) if size_reads else {}
            for url in doc_reads:
                raw = parsed[url.encode()][DOC_PARSED]
                doc = decode_document(raw, {})
                # A page that says nosnippet shows none: no text to make one from.
                text = "" if "nosnippet" in (doc.get("robots") or ()) else doc.get("text")
                # Tokenized once here, not per query: most of a snippet's cost.
                docs[url] = (doc.get("title") or "", prepare(text))
                self._documents.put((url, exported[url]), docs[url])
            sizes.update(self._put_sizes(txn, size_reads, rows))
        out = []
        terms = tuple(terms)
        for hit in hits:
            title, text = docs[hit.url]
            key = (hit.url, exported[hit.url], terms)
            snippet = self._snippets.get(key)
            if snippet is None:
                if at_hand_only:
                    return None  # made in the thread pool, where it holds up no other request
                snippet = make_snippet(text, terms, self.settings.snippet_tokens, self.settings.snippet_chars)
                self._snippets.put(key, snippet)
            size = sizes.get(hit.stats.fingerprint) or 1
            out.append((title or hit.stats.title or hit.url, snippet, size))
        return out

    def _put_sizes(self, txn, fingerprints, rows) -> dict[str, int]:
        """Cache and return the cluster sizes of ``fingerprints``: the pages of their
        near-duplicate clusters, from their ``dups`` rows ``rows`` (read already) and, for a
        cluster with near-duplicates, the rows of its other exact clusters (read in ``txn``)."""
        known = {fp.decode(): cells for fp, cells in rows.items()}

        def read(fps):
            missing = [fp for fp in fps if fp not in known]
            if missing:
                got = txn.get_all_rows(DUPS, missing)
                known.update({fp: got[fp.encode()] for fp in missing})
            return {fp: known[fp] for fp in fps}

        out = {}
        for fp in fingerprints:
            out[fp] = max(1, cluster_size(cluster_rows(fp, read)))
            self._sizes.put(fp, out[fp])
        return out

    def refresh_used(self, batch: int = 512) -> int:
        """Read again, in batched snapshot reads, the cluster sizes shown in the last
        ``SIZES_AHEAD_WINDOW_S`` that are over half ``details_cache_s`` old, so they do not
        expire while in use. Returns how many were read."""
        if self.settings.details_cache_s <= 0:
            return 0
        due = self._sizes.older_than(self._shown.recent(time.monotonic()), self.settings.details_cache_s / 2)
        for start in range(0, len(due), batch):
            chunk = due[start:start + batch]
            txn = self.cluster.snapshot()
            self._put_sizes(txn, chunk, txn.get_all_rows(DUPS, chunk))
        return len(due)

    def _shared_snapshot(self, newest_export: int):
        """A read-only snapshot for result details, shared by the queries of up to
        ``postings_refresh_s``: one oracle round trip per interval instead of per query. A
        fresh one is begun when the shared one predates ``newest_export`` (an export's
        start_ts), so a document's text is never read from before the export it is cached
        under. Never committed: it writes nothing, and it holds GC's horizon only while some
        query still uses it (``Cluster._register``).
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
