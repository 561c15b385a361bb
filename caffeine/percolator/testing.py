"""Helpers for tests: an in-process timestamp source and a cluster over the in-memory store.

Layer: percolator (test support only). Nothing user-facing uses these; ``connect()`` always
talks to HBase and the real oracle.
"""

from __future__ import annotations

import threading
import time

from caffeine.config import load_settings
from caffeine.oracle.timestamps import compose
from caffeine.percolator.cluster import Cluster
from caffeine.storage import Store
from caffeine.storage.memory import MemoryStore


class InProcessOracle:
    """Strictly increasing timestamps with the oracle's layout, without a server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last = 0

    def get_timestamp(self) -> int:
        with self._lock:
            self._last = max(self._last + 1, compose(time.time_ns() // 1_000_000))
            return self._last

    def status(self) -> int:
        """The next timestamp, allocating nothing (as the oracle server's ping)."""
        with self._lock:
            return self._last + 1


def memory_cluster(store: Store | None = None, **settings) -> Cluster:
    """A Cluster over the in-memory store (fast protocol tests)."""
    return Cluster(store or MemoryStore(), InProcessOracle(), load_settings(**settings))
