"""Back-pressure: a crawl or an ingest feeds pages no faster than the observers index them.

Layer: crawler. The public ``caffeine.percolator.engine_status`` counts notifications and workers.

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

The feed keeps at most ``X * target_s`` pages in the chain (default target 5 s), so a page
waits at most about the target: a caller that would exceed it waits (``wait``) until the next
count makes room. Never fewer than twice the pages the live workers take on at once
(``threads``): that many keep every worker busy, whatever ``X`` is thought to be, so a low
estimate cannot starve the workers and shrink itself. No observer worker running: no limit
(nothing could drain the chain; the progress line says so). Pages fed by others at the same
time make ``X`` look smaller than it is: the limit errs on the safe side.

Nothing is dropped or reordered: a paced caller only waits (``wait``) before its next page.
``describe()`` says what it is doing, for the progress line. ``target_s`` 0 turns it off.
"""

from __future__ import annotations

import logging
import threading
import time

from caffeine.percolator.engine_status import pending_notifications, worker_totals

log = logging.getLogger(__name__)

__all__ = ["BackPressure"]

DEFAULT_TARGET_S = 5.0
_MIN_WINDOW = 8      # pages: the chain may always hold this many
_SMOOTHING = 0.2     # weight of the newest count in the throughput average


class BackPressure:
    def __init__(self, cluster, repository: str, *, target_s: float = DEFAULT_TARGET_S,
                 interval_s: float = 0.5) -> None:
        self.cluster = cluster
        self.repository = repository
        self.target_s = target_s
        self.interval_s = interval_s
        self.in_chain = 0                     # P at the last count
        self.throughput: float | None = None  # X: pages leaving the chain per second, smoothed
        self.window: int | None = None        # pages the chain may hold; None: no limit
        self.workers = 0
        self.paced_s = 0.0                    # seconds callers spent waiting, in all
        self.counted = False
        self._fed = 0                         # pages fed since the last count
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def enabled(self) -> bool:
        return self.target_s > 0

    @property
    def hold_s(self) -> float | None:
        """How long a page fed now would take to get through the chain (None: not known)."""
        if not self.throughput:
            return None
        return self.in_chain / self.throughput

    def start(self) -> "BackPressure":
        if self.enabled:
            self._thread = threading.Thread(target=self._run, name="caffeine-backpressure", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(5)

    def wait(self) -> None:
        """Before feeding a page: wait while the chain holds as many pages as it may."""
        started = None
        with self._cond:
            while (self.window is not None and self.in_chain + self._fed >= self.window
                   and not self._stop.is_set()):
                started = started or time.monotonic()
                self._cond.wait(self.interval_s)
            self._fed += 1
            if started is not None:
                self.paced_s += time.monotonic() - started

    @property
    def holding(self) -> bool:
        """Whether the limit holds the feed back now."""
        return self.window is not None and self.in_chain + self._fed >= self.window

    def describe(self) -> str:
        """A few words for the progress line ("" before the first count)."""
        if not self.enabled or not self.counted:
            return ""
        if not self.workers:
            return f"{self.in_chain} pages in the observer chain: no observer worker runs"
        hold = self.hold_s
        held = f"{self.in_chain} pages in the observer chain" + ("" if hold is None else f" (~{hold:.1f}s)")
        if not self.holding:
            return held
        return f"held: {held}, at most {self.window} for a {self.target_s:g}s target"

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stop.wait(self.interval_s):
            try:
                pending = pending_notifications(self.cluster.store, [self.repository])
                totals = worker_totals(self.cluster)
            except Exception as exc:  # the feed goes on unlimited rather than stop on a failed count
                log.warning("back-pressure: could not count the pages in the observer chain: %s", exc)
                continue
            now = time.monotonic()
            with self._cond:
                self._observe(pending.rows, totals["workers"], totals.get("threads", 0), now - last)
                self._cond.notify_all()
                last = now

    def _observe(self, in_chain: int, workers: int, threads: int, elapsed_s: float) -> None:
        """One count: the throughput estimate and the window (lock held)."""
        fed, self._fed = self._fed, 0
        if self.counted and elapsed_s > 0:
            leaving = max(0.0, (fed - (in_chain - self.in_chain)) / elapsed_s)
            self.throughput = _average(self.throughput, leaving)
        self.in_chain, self.workers, self.counted = in_chain, workers, True
        if not workers:
            self.window = None
            return
        floor = max(2 * threads, _MIN_WINDOW)
        self.window = max(floor, int((self.throughput or 0.0) * self.target_s))


def _average(previous: float | None, value: float) -> float:
    return value if previous is None else (1 - _SMOOTHING) * previous + _SMOOTHING * value
