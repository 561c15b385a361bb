"""A small bounded map whose entries expire.

Layer: search. Pure (standard library only). ``TtlCache``: values that expire; ``RecentKeys``: which keys are in use.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict


class TtlCache:
    """A bounded, thread-safe map whose entries expire ``ttl_s`` after they were put.

    At most ``max_entries`` are kept (the least recently used go first); ``ttl_s <= 0``
    keeps nothing, ``math.inf`` keeps entries until they are pushed out.
    """

    def __init__(self, ttl_s: float, max_entries: int) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._data: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        # Without the lock: a search request makes a dozen of these, and under 16 clients
        # taking the lock was ~8% of the service's Python time. OrderedDict's get and
        # move_to_end are single C calls, atomic under CPython's GIL; a key ``put`` pushes
        # out meanwhile makes move_to_end raise KeyError, and is then a miss.
        if self.ttl_s <= 0:
            return None
        entry = self._data.get(key)
        if entry is None:
            return None
        if time.monotonic() - entry[0] > self.ttl_s:
            with self._lock:
                if self._data.get(key) is entry:
                    del self._data[key]
            return None
        try:
            self._data.move_to_end(key)
        except KeyError:
            return None
        return entry[1]

    def older_than(self, keys, age_s: float) -> list:
        """Those of ``keys`` with no entry, or one put more than ``age_s`` ago."""
        now = time.monotonic()
        with self._lock:
            return [key for key in keys if key not in self._data or now - self._data[key][0] > age_s]

    def put(self, key, value) -> None:
        if self.ttl_s <= 0:
            return
        with self._lock:
            self._data[key] = (time.monotonic(), value)
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


class RecentKeys:
    """The keys used within the last ``window_s``, in order of last use; thread-safe. What a
    background reader keeps up to date ahead of the requests that use them."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._used: dict = {}   # key -> time of its last use, oldest first
        self._lock = threading.Lock()

    def touch(self, keys, now: float) -> None:
        with self._lock:
            used = self._used
            for key in keys:
                used.pop(key, None)   # re-inserted last: the dict stays in order of last use
                used[key] = now

    def recent(self, now: float, limit: int | None = None) -> list:
        """The keys used since ``now - window_s`` (forgetting the others), the most recently
        used first, at most ``limit`` of them."""
        horizon = now - self.window_s
        with self._lock:
            used = self._used
            while used:
                oldest = next(iter(used))
                if used[oldest] >= horizon:
                    break
                del used[oldest]
            keys = list(used)
        return list(reversed(keys if limit is None else keys[-limit:]))

    def __len__(self) -> int:
        return len(self._used)
