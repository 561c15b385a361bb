"""caffeine.search.ttl_cache.TtlCache: expiry, least-recently-used eviction, and reads without the lock
racing writers that push entries out."""

from __future__ import annotations

import math
import threading
import time

from caffeine.search.ttl_cache import TtlCache


def test_entries_expire_and_the_least_recently_used_go_first():
    cache = TtlCache(0.2, 2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1          # a is now the most recently used
    cache.put("c", 3)                   # pushes out b
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    time.sleep(0.25)
    assert cache.get("a") is None and cache.older_than(["a", "c", "z"], 0.1) == ["a", "c", "z"]
    assert TtlCache(0, 5).get("x") is None


def test_reads_racing_writers_see_a_value_put_or_a_miss():
    cache = TtlCache(math.inf, 64)
    stop = threading.Event()
    wrong: list = []

    def writer(offset: int) -> None:
        i = 0
        while not stop.is_set():
            cache.put(("k", (i + offset) % 200), (i + offset) % 200)
            i += 1

    def reader() -> None:
        while not stop.is_set():
            for k in range(200):
                value = cache.get(("k", k))
                if value is not None and value != k:
                    wrong.append((k, value))

    threads = [threading.Thread(target=writer, args=(o,)) for o in (0, 7)] + [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()
    assert not wrong and len(cache._data) <= 64
