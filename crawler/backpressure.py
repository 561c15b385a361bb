"""Back-pressure: a crawl or an ingest feeds pages no faster than the observers index them.

Layer: crawler (the public ``caffeine.percolator.status`` reads the notification backlog).

Percolator is for freshness: a page should be searchable seconds after it is fetched. When the
feed outruns the observer workers, notifications pile up and every new page waits behind
them. ``BackPressure`` watches the backlog of the observed tables (every ``interval_s``: a
key-only scan of their notify family, as ``caffeine engine`` counts it) and paces the feed:

- the backlog's age is that of its oldest notifications, all but the oldest tenth (a few
  cells an observer keeps failing on, retried with backoff, must not hold a crawl back) and
  none while fewer are pending than the workers take at once (``min_backlog``);
- while that age is under ``target_s`` (default 5 s), or no observer worker runs (pacing
  would not bring the backlog down; the progress line says so), the feed runs unpaced;
- once it is older, feeding is paced at a rate taken from what the feed achieved lately,
  lowered by a third each interval the age stays over the target *and the backlog still
  grows* (the age lags: a backlog that shrinks is being caught up with, and cutting further
  would only starve the workers), held while it shrinks; once the age is back under half the
  target, the pace rises by a quarter per interval, and the pacing ends once it is well above
  what the feed achieves anyway.

Nothing is dropped or reordered: a paced caller only waits (``wait``) before its next page.
``describe()`` says what it is doing, for the progress line. ``target_s`` 0 turns it off.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Iterable

from caffeine.percolator.status import live_worker_count, pending_notifications

log = logging.getLogger(__name__)

__all__ = ["BackPressure"]

DEFAULT_TARGET_S = 5.0
_MIN_RATE = 0.5  # pages/s: a paced feed never stops


class BackPressure:
    def __init__(self, cluster, tables: Iterable[str], *, target_s: float = DEFAULT_TARGET_S,
                 interval_s: float = 1.0, min_backlog: int = 32) -> None:
        self.cluster = cluster
        self.tables = list(tables)
        self.target_s = target_s
        self.interval_s = interval_s
        self.min_backlog = min_backlog
        self.rate: float | None = None    # pages/s while pacing; None: unpaced
        self.backlog = 0
        self.oldest_age_s: float | None = None
        self.workers = 0
        self.paced_s = 0.0                # seconds callers spent waiting, in all
        self._fed = 0                     # pages fed since the last check
        self._lock = threading.Lock()
        self._next_at = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.target_s > 0 and bool(self.tables)

    def start(self) -> "BackPressure":
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="caffeine-backpressure", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def wait(self) -> None:
        """Before feeding a page: wait for its turn while paced (at once otherwise)."""
        with self._lock:
            self._fed += 1
            if self.rate is None:
                return
            now = time.monotonic()
            at = max(self._next_at, now)
            self._next_at = at + 1.0 / self.rate
        if at > now:
            self._stop.wait(at - now)
            with self._lock:
                self.paced_s += at - now

    def describe(self) -> str:
        """A few words for the progress line ("" while unpaced and under target)."""
        if not self.enabled or self.oldest_age_s is None:
            return ""
        if not self.workers:
            return f"backlog {self.backlog}: no observer worker runs"
        if self.rate is None:
            return f"backlog {self.backlog} ({self.oldest_age_s:.1f}s old)"
        return (f"paced to {self.rate:.1f}/s: backlog {self.backlog} ({self.oldest_age_s:.1f}s old, "
                f"target {self.target_s:g}s)")

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                pending = pending_notifications(self.cluster.store, self.tables, with_timestamps=True)
                workers = live_worker_count(self.cluster)
            except Exception as exc:  # the feed goes on unpaced rather than stop on a failed count
                log.warning("back-pressure: could not count the backlog: %s", exc)
                continue
            now = time.monotonic()
            with self._lock:
                fed_rate = self._fed / max(now - last, 1e-6)
                self._fed, last = 0, now
                growing = pending.count >= self.backlog
                self.backlog, self.workers = pending.count, workers
                self.oldest_age_s = (pending.age_s(0.1) or 0.0) if pending.count >= self.min_backlog else 0.0
                if workers:
                    self._adjust(fed_rate, growing)
                else:
                    self.rate = None

    def _adjust(self, fed_rate: float, growing: bool = True) -> None:
        """One interval's pacing decision (lock held); ``growing``: the backlog did not
        shrink since the last count."""
        age = self.oldest_age_s or 0.0
        if age > self.target_s:
            if self.rate is None:
                self.rate = max(_MIN_RATE, fed_rate * 2 / 3)
            elif growing:
                self.rate = max(_MIN_RATE, self.rate * 2 / 3)
        elif self.rate is not None and age < self.target_s / 2:
            self.rate *= 1.25
            if fed_rate > 0 and self.rate > 2 * fed_rate and age < self.target_s / 4:
                self.rate = None  # the pace no longer holds the feed back
