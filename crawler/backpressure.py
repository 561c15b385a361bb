"""Back-pressure: a crawl or an ingest feeds pages no faster than the observers index them.

Layer: crawler (the public ``caffeine.percolator.status`` counts notifications and workers).

Percolator is for freshness: a page should be searchable seconds after it is fetched. When the
feed outruns the observer workers, pages pile up in the observer chain and every new page
waits behind them. ``BackPressure`` estimates how long a page fed now would take to get
through, by Little's law, every ``interval_s``:

- ``P``: the pages in the chain: repository rows with a notification pending (every stage of
  the chain a page goes through (parse, cluster, export) is notified on the page's own row,
  and each stage's commit notifies the next before it clears its own, so a row carries a
  notification from the feed's write until its last stage is done): one key-only scan of the
  repository's notify family;
- ``X``: the pages leaving the chain per second: those fed less the growth of ``P``,
  smoothed;
- the hold ``W = P / X``.

While ``W`` is over ``target_s`` (default 5 s) the feed is paced at ``X``, less in proportion
to how far over the target ``W`` is, so the chain drains; once ``W`` is under half the target
the pace rises by a quarter per interval, and the pacing ends once it is well above what the
feed achieves anyway. No observer worker running: no pacing (it could not drain the chain;
the progress line says so). Pages fed by others at the same time make ``X`` look smaller
than it is: the pace errs on the safe side.

Nothing is dropped or reordered: a paced caller only waits (``wait``) before its next page.
``describe()`` says what it is doing, for the progress line. ``target_s`` 0 turns it off.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Iterable

from caffeine.percolator.status import pending_notifications, worker_totals

log = logging.getLogger(__name__)

__all__ = ["BackPressure"]

DEFAULT_TARGET_S = 5.0
_MIN_RATE = 0.5   # pages/s: a paced feed never stops
_SMOOTHING = 0.3  # weight of the newest interval in the throughput average


class BackPressure:
    def __init__(self, cluster, repository: str, *, target_s: float = DEFAULT_TARGET_S,
                 interval_s: float = 1.0) -> None:
        self.cluster = cluster
        self.repository = repository
        self.target_s = target_s
        self.interval_s = interval_s
        self.rate: float | None = None      # pages/s while pacing; None: unpaced
        self.in_chain = 0                   # P: repository rows with a notification pending
        self.throughput: float | None = None  # X: pages leaving the chain per second, smoothed
        self.workers = 0
        self.paced_s = 0.0                  # seconds callers spent waiting, in all
        self.counted = False
        self._fed = 0                       # pages fed since the last count
        self._lock = threading.Lock()
        self._next_at = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.target_s > 0

    @property
    def hold_s(self) -> float | None:
        """How long a page fed now would take to get through the chain (None: not known yet;
        infinite while pages wait and none gets through)."""
        if self.throughput is None:
            return None
        if not self.throughput:
            return float("inf") if self.in_chain else 0.0
        return self.in_chain / self.throughput

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
        """A few words for the progress line ("" before the first count)."""
        if not self.enabled or not self.counted:
            return ""
        if not self.workers:
            return f"{self.in_chain} pages in the observer chain: no observer worker runs"
        hold = self.hold_s
        held = f"{self.in_chain} pages in the observer chain" + ("" if hold is None else f" (~{hold:.1f}s)" if hold != float("inf") else " (none getting through)")
        if self.rate is None:
            return held
        return f"paced to {self.rate:.1f}/s: {held}, target {self.target_s:g}s"

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                pending = pending_notifications(self.cluster.store, [self.repository])
                workers = worker_totals(self.cluster)["workers"]
            except Exception as exc:  # the feed goes on unpaced rather than stop on a failed count
                log.warning("back-pressure: could not count the pages in the observer chain: %s", exc)
                continue
            now = time.monotonic()
            with self._lock:
                self._observe(pending.rows, workers, now - last)
                last = now

    def _observe(self, in_chain: int, workers: int, elapsed_s: float) -> None:
        """One interval's count and pacing decision (lock held)."""
        fed, self._fed = self._fed, 0
        fed_rate = fed / max(elapsed_s, 1e-6)
        if self.counted and elapsed_s > 0:
            leaving = max(0.0, (fed - (in_chain - self.in_chain)) / elapsed_s)
            self.throughput = _average(self.throughput, leaving)
        self.in_chain, self.workers, self.counted = in_chain, workers, True
        if not workers:
            self.rate = None
        elif self.throughput is not None:
            self._adjust(fed_rate)

    def _adjust(self, fed_rate: float) -> None:
        hold = self.hold_s or 0.0
        if hold > self.target_s:
            self.rate = max(_MIN_RATE, self.throughput * self.target_s / hold)
        elif self.rate is not None and hold < self.target_s / 2:
            self.rate *= 1.25
            if fed_rate > 0 and self.rate > 2 * fed_rate:
                self.rate = None  # the pace no longer holds the feed back


def _average(previous: float | None, value: float) -> float:
    return value if previous is None else (1 - _SMOOTHING) * previous + _SMOOTHING * value
