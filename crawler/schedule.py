"""In-memory scheduling of one crawl process: per-origin queues, a level barrier, politeness.

Layer: crawler. Imports the standard library only. The durable frontier is the Percolator table
(``crawler.frontier``); this is the process's working copy of its queued rows, deciding
which URL a worker fetches next.

Invariants:

* with a positive delay for an origin, at most one fetch of that origin is in flight, and
  the next one starts no sooner than ``delay`` after the previous one finished; with a zero
  delay (the local test web) an origin's URLs are fetched in parallel;
* level barrier: a URL of depth d is handed out only when no URL of a smaller depth is
  queued or in flight (handed out by ``next()`` and not yet ``done``). A page's links are
  added, and its transaction committed, before its worker calls ``done``, so every page of
  depth d-1 has queued its links before any page of depth d is fetched: a URL is first
  queued at its shortest depth. Without the barrier a deeper page's transaction could
  commit first and queue a shared link one level too deep, and a depth-limited crawl then
  stopped short of what a breadth-first crawl reaches;
* within an origin, URLs go out shallowest depth first, in the order they were added
  within one depth (a resumed crawl adds queued URLs of mixed depths); an origin whose
  shallowest URL is deeper than the current level waits, and is scheduled again when the
  level advances or a URL is added to it;
* ``next()`` returns None when no URL is queued and none is in flight (nothing more can be
  added: URLs are only added by workers before they call ``done``), when ``max_pages``
  URLs were handed out, or after ``stop()``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import Counter
from typing import Callable

from crawler.robots import origin_of

__all__ = ["HostQueues"]


class HostQueues:
    """Thread-safe: workers loop on ``next()``, fetch, ``add`` the links found, then call
    ``done(url, depth)`` with what ``next()`` returned."""

    def __init__(self, delay_for: Callable[[str], float], max_pages: int | None = None) -> None:
        self.delay_for = delay_for
        self.max_pages = max_pages
        self.handed_out = 0
        self.in_flight = 0
        self._queues: dict[str, list[tuple[int, int, str]]] = {}  # origin -> heap of (depth, seq, url)
        self._unfinished: Counter[int] = Counter()  # depth -> URLs queued or in flight
        self._ready: list[tuple[float, int, str]] = []  # (not before, tie-break, origin)
        self._scheduled: set[str] = set()  # origins in _ready
        self._waiting: set[str] = set()    # origins whose shallowest URL is deeper than the level
        self._busy: set[str] = set()       # origins with a polite fetch in flight
        self._next_at: dict[str, float] = {}
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stopped = False

    @property
    def queued(self) -> int:
        with self._cond:
            return sum(len(q) for q in self._queues.values())

    @property
    def limit_reached(self) -> bool:
        return self.max_pages is not None and self.handed_out >= self.max_pages

    def add(self, url: str, depth: int) -> None:
        """Queue ``url`` at ``depth``; a worker adds the links of its page before ``done``."""
        origin = origin_of(url)
        with self._cond:
            heapq.heappush(self._queues.setdefault(origin, []), (depth, next(self._seq), url))
            self._unfinished[depth] += 1
            if origin not in self._scheduled and origin not in self._busy:
                self._waiting.discard(origin)  # its shallowest URL may now be at the level
                self._schedule(origin, self._next_at.get(origin, 0.0))
            self._cond.notify()

    def _schedule(self, origin: str, not_before: float) -> None:
        heapq.heappush(self._ready, (not_before, next(self._seq), origin))
        self._scheduled.add(origin)

    def next(self) -> tuple[str, int] | None:
        """Block until a URL may be fetched; return (url, depth), or None when the crawl is
        over for this process."""
        with self._cond:
            while True:
                if self._stopped or self.limit_reached:
                    self._cond.notify_all()
                    return None
                if self._ready:
                    not_before, _, origin = self._ready[0]
                    wait = not_before - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._ready)
                        self._scheduled.discard(origin)
                        queue = self._queues[origin]
                        if queue[0][0] > min(self._unfinished):
                            self._waiting.add(origin)  # rescheduled when the level advances
                            continue
                        depth, _, url = heapq.heappop(queue)
                        if self.delay_for(origin) > 0:
                            self._busy.add(origin)
                        elif queue:
                            self._schedule(origin, 0.0)
                        self.in_flight += 1
                        self.handed_out += 1
                        return url, depth
                    self._cond.wait(wait)
                elif self.in_flight == 0:
                    self._cond.notify_all()  # wake the other idle workers: all done
                    return None
                else:
                    self._cond.wait()

    def done(self, url: str, depth: int) -> None:
        """The fetch of ``url`` (handed out by ``next()`` at ``depth``) is over and the URLs
        it found were added."""
        origin = origin_of(url)
        with self._cond:
            self.in_flight -= 1
            self._unfinished[depth] -= 1
            if not self._unfinished[depth]:
                del self._unfinished[depth]
                for waiting in self._waiting:  # the level may have advanced: look again
                    self._schedule(waiting, self._next_at.get(waiting, 0.0))
                self._waiting.clear()
            if origin in self._busy:
                self._busy.discard(origin)
                self._next_at[origin] = time.monotonic() + self.delay_for(origin)
                if self._queues.get(origin):
                    self._schedule(origin, self._next_at[origin])
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
