"""Reading the index: one ``IndexReader`` per cluster, composing the service's read paths.

Layer: search. Opens the serving tables through the ``Cluster`` it is given (public
``caffeine.percolator`` names) and composes the pieces that read them; the routers call it,
and it knows nothing of HTTP.

    caffeine/search/statistics.py  CorpusStatistics: the cached docstats scan ranking needs
    caffeine/search/searcher.py      Searcher: ranked results (posting lists in memory; cold heads: caffeine/search/cold_reads.py)
    caffeine/search/details.py     ResultDetails: title, snippet and cluster size of each result
    caffeine/search/views.py       Views: /documents and /dups
    caffeine/search/report.py      StatusReport: /stats        caffeine/search/health.py  HealthProbes: /healthz

Contract:

* **Read-only.** It never writes a table: serving tables are opened with ``create=False``,
  and every read of a Percolator table (``repository``, ``inlinks``, ``dups``) happens in a
  snapshot transaction that has no writes and commits trivially. (The ``Cluster`` itself
  heartbeats its owner row, which garbage collection needs to respect open snapshots.)
* **Consistent details.** One view's reads of Percolator tables share one snapshot (see
  ``caffeine.search.views``); the serving tables (``postings``, ``docstats``) are not transactional and
  may be a moment ahead of or behind it. docs/INDEXING.md says how they converge.
* **Freshness.** Which documents match, with which term frequencies, is at most ~1 s old
  (``caffeine.search.searcher``); a result may show statistics or a cluster size up to ~10 s old
  (``caffeine.search.statistics``, ``caffeine.search.details``).
* Methods return plain dicts/lists shaped like ``api.models``; "not found" is ``None``.
"""

from __future__ import annotations

from caffeine.index.schema import DOCSTATS, DOCSTATS_FAMILY, IMPACTS, IMPACTS_FAMILY, POSTINGS, POSTINGS_FAMILY

from caffeine.search.details import ResultDetails
from caffeine.search.health import HealthProbes
from caffeine.search.query import ParsedQuery
from caffeine.search.searcher import Searcher
from caffeine.search.settings import SearchSettings
from caffeine.search.statistics import CorpusStatistics, CorpusStats
from caffeine.search.report import SlowStats, StatusReport
from caffeine.search.views import Views

__all__ = ["IndexReader"]


class IndexReader:
    """The read side of the index for one ``Cluster``; thread-safe; ``start`` then ``close``."""

    def __init__(self, cluster, settings: SearchSettings) -> None:
        self.cluster = cluster
        self.settings = settings
        self.postings = cluster.serving(POSTINGS, [POSTINGS_FAMILY], create=False)
        self.docstats = cluster.serving(DOCSTATS, [DOCSTATS_FAMILY], create=False)
        self.impacts = cluster.serving(IMPACTS, [IMPACTS_FAMILY], create=False)
        self.statistics = CorpusStatistics(self.docstats, settings)
        self.searcher = Searcher(self.postings, self.impacts, self.statistics,
                                 ResultDetails(cluster, settings), settings)
        self.views = Views(cluster, self.docstats, settings)
        self.status = StatusReport(cluster, self.postings, self.statistics, self.searcher, settings)
        # Probes get threads of their own: a hung HBase must not also stall searches' reads.
        self.probes = HealthProbes(cluster, self.docstats, self.postings, settings.health_timeout_s)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "IndexReader":
        """First statistics scan (errors logged, not raised), then the background refresh."""
        self.statistics.start()
        return self

    def close(self) -> None:
        self.statistics.close()
        self.probes.close()
        self.searcher.close()

    # -- corpus statistics -------------------------------------------------------------------
    @property
    def corpus(self) -> CorpusStats:
        return self.statistics.current

    def refresh(self, whole: bool = False) -> CorpusStats:
        """``CorpusStatistics.refresh``: bring the statistics up to date now."""
        return self.statistics.refresh(whole)

    # -- search ------------------------------------------------------------------------------
    @property
    def cold_counts(self) -> dict[str, int]:
        return self.searcher.cold_counts

    def search(self, query: ParsedQuery, page: int, size: int, *, at_hand_only: bool = False) -> dict | None:
        return self.searcher.search(query, page, size, at_hand_only=at_hand_only)

    def rank(self, query: ParsedQuery, limit: int, corpus: CorpusStats | None = None):
        return self.searcher.rank(query, limit, corpus)

    def drop_postings(self) -> None:
        self.searcher.drop_postings()

    def wait_for_background_reads(self) -> None:
        self.searcher.wait_for_background_reads()

    # -- documents and clusters --------------------------------------------------------------
    def document(self, url: str) -> dict | None:
        return self.views.document(url)

    def dup_cluster(self, fingerprint: str) -> dict | None:
        return self.views.dup_cluster(fingerprint)

    def dup_cluster_of(self, url: str) -> dict | None:
        return self.views.dup_cluster_of(url)

    # -- status ------------------------------------------------------------------------------
    def stats(self) -> dict:
        return self.status.stats()

    def refresh_slow(self) -> SlowStats:
        return self.status.refresh_slow()

    def health(self) -> dict:
        return self.probes.health()
