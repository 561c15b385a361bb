"""In-memory scheduling of one crawl process: per-origin queues and politeness.

Layer: crawler (standard library only). The durable frontier is the Percolator table
(``crawler.frontier``); this is the process's working copy of its queued rows, deciding
which URL a worker fetches next.

Invariants:

* with a positive delay for an origin, at most one fetch of that origin is in flight, and
  the next one starts no sooner than ``delay`` after the previous one finished; with a zero
  delay (the local test web) an origin's URLs are fetched in parallel;
* within an origin, URLs go out in the order they were added (breadth first: links are
  added after the page that holds them);
* ``next()`` returns None when no URL is queued and none is in flight (nothing more can be
  added: URLs are only added by workers before they call ``done``), when ``max_pages``
  URLs were handed out, or after ``stop()``.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from typing import Callable

from crawler.robots import origin_of

__all__ = ["HostQueues"]


class HostQueues:
    def __init__(self, delay_for: Callable[[str], float], max_pages: int | None = None) -> None:
        self.delay_for = delay_for
        self.max_pages = max_pages
        self.handed_out = 0
        self.in_flight = 0
        self._queues: dict[str, deque[tuple[str, int]]] = {}
        self._ready: list[tuple[float, int, str]] = []  # (not before, tie-break, origin)
        self._scheduled: set[str] = set()  # origins in _ready
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
        origin = origin_of(url)
        with self._cond:
            self._queues.setdefault(origin, deque()).append((url, depth))
            if origin not in self._scheduled and origin not in self._busy:
                self._schedule(origin, self._next_at.get(origin, 0.0))
            self._cond.notify()

    def _schedule(self, origin: str, not_before: float) -> None:
        heapq.heappush(self._ready, (not_before, next(self._seq), origin))
        self._scheduled.add(origin)

    def next(self) -> tuple[str, int] | None:
        """Block until a URL may be fetched; None when the crawl is over for this process."""
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
                        url, depth = queue.popleft()
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

    def done(self, url: str) -> None:
        """The fetch of ``url`` is over and the URLs it found were added."""
        origin = origin_of(url)
        with self._cond:
            self.in_flight -= 1
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
