"""Corpus statistics: every indexed document's ``docstats`` row, cached and kept up to date.

Layer: search. Imports the public ``caffeine.percolator`` names (through the
``ServingTable`` it is given), ``caffeine.index.schema`` (names, and the codecs every stored
value is decoded with), ``caffeine.oracle.timestamps`` and the engine's ranking (the weights
derived from the statistics). It knows nothing of HTTP.

Contract:

* ``N``, the average length and every indexed document's ``docstats`` row (length, inlinks,
  fingerprint, title) come from a full scan of ``docstats``, brought up to date every
  ``stats_refresh_s`` by a background thread (only the rows changed since the previous
  refresh are read). A document counts as indexed while its ``docstats`` row has a live
  ``s:length``.
* ``current`` is one immutable ``CorpusStats``; a refresh swaps in a new one, so a query
  that took it sees one consistent snapshot. When a refresh finds no change the same
  objects are kept, so what was derived from them (every term's cached scores) stays valid.
* A failed refresh keeps the previous statistics; ``error`` says why until one succeeds.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from caffeine.index.schema import S_DONE, DocStats, decode_docstats, decode_int, decode_key
from caffeine.oracle.timestamps import compose

from caffeine.search.cold import corpus_ratio
from caffeine.search.ranking import CorpusWeights, corpus_weights
from caffeine.search.settings import SearchSettings

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


def _newer(newest: int | None, cells: dict[str, bytes]) -> int | None:
    """The higher of ``newest`` and the row's ``s:done`` (an export's sequence number)."""
    done = cells.get(S_DONE)
    return max(newest or 0, decode_int(done)) if done else newest


class CorpusStatistics:
    """The cached statistics of one ``docstats`` table; thread-safe; ``start`` then ``close``."""

    def __init__(self, docstats, settings: SearchSettings) -> None:
        self.docstats = docstats
        self.settings = settings
        self.error: str | None = None   # why the last refresh failed; None once one succeeds
        self._stats = EMPTY_STATS
        self._refresh_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def current(self) -> CorpusStats:
        return self._stats

    def start(self) -> None:
        """First scan (errors logged, not raised), then the background refresh."""
        try:
            self.refresh()
        except Exception as exc:  # noqa: BLE001 - the service starts; /healthz tells what fails
            self.error = f"{type(exc).__name__}: {exc}"
            log.warning("first docstats scan failed: %s", self.error)
        self._thread = threading.Thread(target=self._refresh_loop, name="api-stats", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _refresh_loop(self) -> None:
        while not self._stop.wait(self.settings.stats_refresh_s):
            try:
                self.refresh()
                self.error = None
            except Exception as exc:  # noqa: BLE001 - keep serving the last good statistics
                self.error = f"{type(exc).__name__}: {exc}"
                log.warning("docstats refresh failed (keeping the previous statistics): %s", self.error)

    def refresh(self, whole: bool = False) -> CorpusStats:
        """Bring the cached statistics up to date and swap them in (one refresh at a time).

        The first refresh, every one ``full_reload_s`` after the last whole scan, and one
        asked for with ``whole`` scan ``docstats`` whole. The others read only the rows with a
        cell written since the previous refresh started less ``change_margin_s`` (a time-range
        scan), each re-read whole: the near-real-time rule of ``caffeine.search.postings_cache``.
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
                        docs[decode_key(row)] = stats
                        newest = _newer(newest, cells)
                changed = docs != previous.docs
                whole_scan_at = started_wall
            else:
                docs, newest, changed = previous.docs, previous.newest_seq, False
                since = compose(max(0, int((previous.started_at - self.settings.change_margin_s) * 1000)))
                rows = [row for row, _ in self.docstats.scan_changes(since, batch_size=1024)]
                for key, cells in (self.docstats.get_many(rows) if rows else {}).items():
                    url = decode_key(key)
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

    def read(self, urls) -> dict[str, DocStats | None]:
        """The docstats of ``urls`` read now, in one round trip (None: not in the index): the
        documents newer than the statistics."""
        if not urls:
            return {}
        return {decode_key(key): decode_docstats(cells)
                for key, cells in self.docstats.get_many([u.encode() for u in urls]).items()}
