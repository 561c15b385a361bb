"""Helpers for tests: an in-process timestamp source and a cluster over the in-memory store.

Layer: percolator. Test support only. Nothing user-facing uses these; ``connect()`` always
talks to HBase and the real oracle.
"""

from __future__ import annotations

import threading
import time

from caffeine.config import load_settings
from caffeine.oracle.timestamps import compose
from caffeine.percolator import backends
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


def memory_store(committer: str | None = None) -> MemoryStore:
    """An in-memory store for the commit backend ``committer`` (the ``committer`` setting by
    default): it runs what that backend needs on the server (``backends.memory_store``), so
    ``auto`` picks the same backend on it as on an HBase that runs them all."""
    return backends.memory_store(committer or load_settings().committer)


def memory_cluster(store: Store | None = None, **settings) -> Cluster:
    """A Cluster over the in-memory store (fast protocol tests)."""
    loaded = load_settings(**settings)
    return Cluster(store or memory_store(loaded.committer), InProcessOracle(), loaded)


# -- the commit's steps one at a time (crash and recovery tests stop a commit between them) --
def prewrite(txn) -> None:
    """Lock every written cell of ``txn`` (phase one), as ``commit`` does first."""
    txn._check_open()
    txn._commit.prewrite()


def commit_primary(txn) -> int:
    """Commit ``txn``'s primary (the commit point) after ``prewrite``; returns commit_ts."""
    return txn._commit.commit_primary()


def commit_secondaries(txn) -> None:
    """Commit the other rows of ``txn`` after ``commit_primary``."""
    txn._commit.commit_secondaries()


def prewrite_rows(txn, keys) -> None:
    """Prewrite just these (table, row) keys of ``txn``, the primary's first if it is among
    them, as ``prewrite`` would; leaves the transaction's state as it is."""
    txn._commit.prewrite_rows(list(keys))


def commit_row(txn, key, commit_ts: int) -> None:
    """Commit one (table, row) of ``txn`` at ``commit_ts`` (a secondary, after the primary)."""
    txn._commit.commit_row(key, commit_ts)


def refresh_primary_lock(txn) -> bool:
    """Refresh ``txn``'s primary lock if it is half its TTL old, as a long commit does;
    False if the lock is gone (a cleaner rolled the transaction back)."""
    return txn._commit._refresh_primary_if_old()
