"""The index's status report (``/stats``): corpus size, freshness, pending work, caches.

Layer: search. Imports ``caffeine.index.schema`` (names and codecs), the read-only
status helpers ``caffeine.percolator.engine_status.pending_notifications`` and
``caffeine.oracle.timestamps.physical_ms``, and the list of observed tables
(``caffeine.observers.app``). Read-only; knows nothing of HTTP.

Contract: the cheap figures (documents, average length, freshness) come from the cached
corpus statistics; the slow ones (distinct terms, clusters) from scans run in a background
thread at most every ``slow_stats_refresh_s``, so a report never waits for them: it shows the
last ones computed (None before the first) and whether a scan is running.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from caffeine.index.schema import DUPS, DUPS_BANDS_START, decode_members
from caffeine.oracle.timestamps import physical_ms

from caffeine.search.links import iso
from caffeine.search.searcher import Searcher
from caffeine.search.settings import SearchSettings
from caffeine.search.statistics import CorpusStatistics

log = logging.getLogger(__name__)


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


def _pending_notifications(cluster):
    """The notifications no observer has handled yet, over every observed table (as the
    installed applications recorded them in the deployment)."""
    from caffeine.percolator.engine_status import pending_notifications

    return pending_notifications(cluster.store, cluster.observed_tables())


class StatusReport:
    """``/stats`` of one index; thread-safe."""

    def __init__(self, cluster, postings, statistics: CorpusStatistics, searcher: Searcher,
                 settings: SearchSettings) -> None:
        self.cluster = cluster
        self.postings = postings
        self.statistics = statistics
        self.searcher = searcher
        self.settings = settings
        self._slow = SlowStats()
        self._slow_lock = threading.Lock()

    def stats(self) -> dict:
        corpus = self.statistics.current
        now = time.time()
        self._maybe_refresh_slow(now)
        slow = self._slow
        pending = _pending_notifications(self.cluster)
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
                "error": self.statistics.error,
                "slow_computed_at": iso(slow.computed_at),
                "slow_scan_s": None if slow.scan_s is None else round(slow.scan_s, 3),
                "slow_running": slow.running,
                "slow_error": slow.error,
            },
            "search_cache": self.searcher.report(),
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
                for _, cols in txn.scan(DUPS, b"", DUPS_BANDS_START, batch_size=512):  # not the band rows
                    n = len(decode_members(cols))
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
