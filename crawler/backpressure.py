"""Back-pressure: a crawl or an ingest feeds pages no faster than the observers index them.

Layer: crawler (the public ``caffeine.percolator.status`` reads the backlog and the workers'
counters).

Percolator is for freshness: a page should be searchable seconds after it is fetched. When the
feed outruns the observer workers, notifications pile up and every new page waits behind
them. ``BackPressure`` measures, every ``interval_s``:

- the backlog ``B``: the notifications pending in the observed tables (a key-only scan of
  their notify family, what ``caffeine engine`` counts);
- the drain ``D``: notifications the live workers cleared per second (the counters each
  worker publishes with its heartbeat), smoothed;
- ``k``: notifications the observer chain handles per page fed (the chain fans out: a page's
  links notify their targets, each stage notifies the next), smoothed;

so a page fed now would wait about ``W = B / D`` seconds before the workers reach it. While
``W`` is over ``target_s`` (default 5 s) the feed is paced at what the workers sustain,
``D / k`` pages per second, less in proportion to how far over the target the wait is, so the
backlog drains; once ``W`` is under half the target the pace rises by a quarter per interval,
and the pacing ends once it is well above what the feed achieves anyway. No worker running,
or none that cleared anything yet: no pacing (it could not bring the backlog down; the
progress line says so).

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
_SMOOTHING = 0.3  # weight of the newest interval in the drain and fan-out averages


class BackPressure:
    def __init__(self, cluster, tables: Iterable[str], *, target_s: float = DEFAULT_TARGET_S,
                 interval_s: float = 1.0) -> None:
        self.cluster = cluster
        self.tables = list(tables)
        self.target_s = target_s
        self.interval_s = interval_s
        self.rate: float | None = None    # pages/s while pacing; None: unpaced
        self.backlog = 0                  # notifications pending
        self.drain: float | None = None   # notifications cleared per second, smoothed
        self.fanout: float | None = None  # notifications per page fed, smoothed
        self.workers = 0
        self.paced_s = 0.0                # seconds callers spent waiting, in all
        self._fed = 0                     # pages fed since the last check
        self._cleared: int | None = None  # the workers' cleared counters at the last check
        self._lock = threading.Lock()
        self._next_at = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.target_s > 0 and bool(self.tables)

    @property
    def wait_s(self) -> float | None:
        """How long the backlog would hold a page fed now (None: not known yet)."""
        if not self.drain:
            return None
        return self.backlog / self.drain

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
        if not self.enabled or self._cleared is None:
            return ""
        if not self.workers:
            return f"backlog {self.backlog}: no observer worker runs"
        wait = self.wait_s
        held = f"backlog {self.backlog}" + ("" if wait is None else f" (~{wait:.1f}s of work)")
        if self.rate is None:
            return held
        return f"paced to {self.rate:.1f}/s: {held}, target {self.target_s:g}s"

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                pending = pending_notifications(self.cluster.store, self.tables)
                totals = worker_totals(self.cluster)
            except Exception as exc:  # the feed goes on unpaced rather than stop on a failed count
                log.warning("back-pressure: could not count the backlog: %s", exc)
                continue
            now = time.monotonic()
            with self._lock:
                self._observe(pending.count, totals["workers"], totals.get("cleared", 0), now - last)
                last = now

    def _observe(self, backlog: int, workers: int, cleared: int, elapsed_s: float) -> None:
        """One interval's measurements and pacing decision (lock held)."""
        fed, self._fed = self._fed, 0
        fed_rate = fed / max(elapsed_s, 1e-6)
        previous_backlog, previous_cleared = self.backlog, self._cleared
        self.backlog, self.workers, self._cleared = backlog, workers, cleared
        if previous_cleared is not None and cleared >= previous_cleared and elapsed_s > 0:
            drained = cleared - previous_cleared
            self.drain = _average(self.drain, drained / elapsed_s)
            if fed:
                self.fanout = _average(self.fanout, max(0.0, drained + backlog - previous_backlog) / fed)
        if not workers or not self.drain:
            self.rate = None
            return
        self._adjust(fed_rate)

    def _adjust(self, fed_rate: float) -> None:
        wait = self.wait_s or 0.0
        if wait > self.target_s:
            sustained = self.drain / max(self.fanout or 1.0, 1e-6)
            self.rate = max(_MIN_RATE, sustained * self.target_s / wait)
        elif self.rate is not None and wait < self.target_s / 2:
            self.rate *= 1.25
            if fed_rate > 0 and self.rate > 2 * fed_rate:
                self.rate = None  # the pace no longer holds the feed back


def _average(previous: float | None, value: float) -> float:
    return value if previous is None else (1 - _SMOOTHING) * previous + _SMOOTHING * value
