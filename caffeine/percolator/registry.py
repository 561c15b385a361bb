"""The observer registry: which columns the installed applications observe, kept in the store.

Layer: percolator internals (storage I/O). Writes to an observed column must set its notify
cell in the same commit, or no observer ever runs for the change. Which columns those are is
the application's knowledge; this module keeps it in the deployment, so every process that
writes (a crawler, a tool, another team's loader) learns it by connecting, without importing
the application (Apache Fluo keeps its observer configuration in ZooKeeper for the same reason).

The table ``observers`` (one of the system's own tables: under the deployment's prefix, not
Percolator-managed, like ``owners``) holds one row per application name, with one cell: the
(table, column) pairs the application observes and the tables it needs (``AppConfig``, as
JSON). ``Application.install(cluster)`` records it.

Rules:

- **One row per application, replaced by its install.** The last install of a name wins, so
  an application's observed columns are what its current version declares (an observer taken
  out stops being notified). Installing the same configuration again writes nothing.
  Different names add up: a column is observed when any recorded application observes it.
  (Run one version of an application at a time; two versions under one name overwrite each
  other's row at each start.)
- **Staleness is bounded by two heartbeat intervals.** Each process reads the table when its
  ``Cluster`` is built, re-reads it with every owner heartbeat, and re-reads a copy older than
  ``max_age_ms`` (two heartbeat intervals) before using it: a commit's notifications,
  ``observed_tables``. So a client connected before an install sets the new notify cells from
  at most that long after it; the installing process at once. This is why applications are
  installed before their writers start (``caffeine worker`` and ``caffeine demo`` install
  theirs when they start).
- **Columns observed with ``observe`` are this process's own**: never recorded, never
  forgotten by a refresh (tests; a crawler's repository table under another name).

A deployment whose table does not exist yet has no recorded application: every read answers
empty, and the first install creates it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from caffeine.percolator.layout import ensure_system_table
from caffeine.storage import Decision, Put, ReadSpec, Store, TableNotFound

TABLE = "observers"
FAMILY = b"r"
CONFIG = b"config"
_CONFIG_TS = 1  # one version, overwritten in place by a row transaction
_CONFIG_SPEC = ReadSpec(columns=((FAMILY, CONFIG),))


@dataclass(frozen=True)
class AppConfig:
    """What one application declared at its last install."""

    observed: frozenset[tuple[str, str]]
    tables: tuple[str, ...]

    @classmethod
    def of(cls, observed: Iterable[tuple[str, str]], tables: Iterable[str]) -> "AppConfig":
        return cls(frozenset((str(t), str(c)) for t, c in observed), tuple(sorted(set(tables))))

    def encode(self) -> bytes:
        return json.dumps({"observed": sorted(map(list, self.observed)), "tables": list(self.tables)},
                          sort_keys=True).encode()

    @classmethod
    def decode(cls, raw: bytes) -> "AppConfig":
        record = json.loads(raw)
        return cls.of((tuple(pair) for pair in record["observed"]), record["tables"])


def record(store: Store, application: str, config: AppConfig) -> bool:
    """Make ``config`` the recorded configuration of ``application``; True if it changed."""
    ensure_system_table(store, TABLE, FAMILY)
    value = config.encode()

    def decide(row):
        cell = row.latest(FAMILY, CONFIG)
        if cell is not None and AppConfig.decode(cell.value) == config:
            return Decision((), False)
        return Decision([Put(FAMILY, CONFIG, _CONFIG_TS, value)], True)

    return store.row_transaction(TABLE, application.encode(), _CONFIG_SPEC, decide)


def read_all(store: Store) -> dict[str, AppConfig]:
    """Every recorded application's configuration (none while the table does not exist)."""
    try:
        return {
            row.key.decode(): AppConfig.decode(cell.value)
            for row in store.scan(TABLE, spec=_CONFIG_SPEC)
            if (cell := row.latest(FAMILY, CONFIG)) is not None
        }
    except TableNotFound:
        return {}


class ObserverRegistry:
    """This process's copy of the recorded configurations, plus its own observed columns.

    Safe for many threads: readers get an immutable set, a refresh swaps it whole."""

    def __init__(self, store: Store, *, max_age_ms: int) -> None:
        self.store = store
        self.max_age_ms = max_age_ms
        self._lock = threading.Lock()
        self._apps: dict[str, AppConfig] = {}
        self._local: set[tuple[str, str]] = set()
        self._observed: frozenset[tuple[str, str]] = frozenset()
        self._read_at = float("-inf")  # monotonic s of the read the copy comes from

    def refresh(self) -> None:
        """Read the recorded configurations (one scan of a small table)."""
        read_at = time.monotonic()
        apps = read_all(self.store)
        with self._lock:
            if read_at > self._read_at:
                self._apps, self._read_at = apps, read_at
                self._rebuild()

    def install(self, application: str, config: AppConfig) -> bool:
        """Record ``config`` for ``application`` and take it up here at once; True if the
        recorded configuration changed."""
        changed = record(self.store, application, config)
        # A read after the write (not a merge into the copy): a refresh that read before the
        # write and finishes later is then the older copy, and is dropped.
        self.refresh()
        return changed

    def observe(self, table: str, column: str) -> None:
        """Observe (table, column) in this process only."""
        with self._lock:
            self._local.add((table, column))
            self._rebuild()

    def observed(self) -> frozenset[tuple[str, str]]:
        """Every observed (table, column), from a copy at most ``max_age_ms`` old."""
        if (time.monotonic() - self._read_at) * 1000 > self.max_age_ms:
            self.refresh()
        return self._observed

    def applications(self) -> dict[str, AppConfig]:
        """The recorded configurations, from a copy at most ``max_age_ms`` old."""
        self.observed()
        return dict(self._apps)

    def _rebuild(self) -> None:
        self._observed = frozenset(self._local.union(*(c.observed for c in self._apps.values())))


__all__ = ["TABLE", "AppConfig", "ObserverRegistry", "record", "read_all"]
