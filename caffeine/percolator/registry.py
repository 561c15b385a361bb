"""The observer registry: which columns the installed applications observe, kept in the store.

Layer: percolator. Internal (storage I/O). Writes to an observed column must set its notify
cell in the same commit, or no observer ever runs for the change. Which columns those are is
the application's knowledge; this module keeps it in the deployment, so every process that
writes (a crawler, a tool, another team's loader) learns it by connecting, without importing
the application (Apache Fluo keeps its observer configuration in ZooKeeper for the same reason).

The table ``observers`` (one of the system's own tables: under the deployment's prefix, not
Percolator-managed, like ``owners``) holds one row per application name: the (table, column)
pairs the application observes and the tables it needs (``AppConfig``, as JSON), and the
registry version it was recorded at; and one row, ``VERSION_ROW``, with the registry's
version. ``Application.install(cluster)`` records it.

Rules:

- **One row per application, replaced by its install.** The last install of a name wins, so
  an application's observed columns are what its current version declares (an observer taken
  out stops being notified). Installing the same configuration again writes nothing.
  Different names add up: a column is observed when any recorded application observes it.
  (Run one version of an application at a time; two versions under one name overwrite each
  other's row at each start.)
- **Once ``install`` returns, every process notifies the new columns.** Each process holds a
  copy of the table under a *lease*: a copy is good for ``max_age_ms`` (two heartbeat
  intervals) from the start of a beat that landed before the copy was read, and that beat
  reported the registry version the process held (``owners.py``). A copy whose lease ran out
  is renewed (a beat, then a read) before it is used: before each commit point too, so a
  process that cannot renew it does not commit. Every changing install bumps the registry's
  version (row ``VERSION_ROW``, read first by every refresh's scan), then waits until every
  other live process (a beat younger than the owner grace) has reported the new version, or
  until ``max_age_ms`` has passed, after which every copy read before the bump has expired.
  An install of an unchanged configuration waits the same way for the current version (its
  installer may still be waiting). The heartbeat renews the lease every interval, so a
  commit normally pays nothing for it, and an install returns within about one heartbeat.
  The one residual window is a commit whose request is sent while its copy is still leased
  and lands after the install returned (a pause or a network delay between the check and the
  write); ``docs/FAULTS.md`` names it beside GC's.
- **Columns observed with ``observe`` are this process's own**: never recorded, never
  forgotten by a refresh (tests; a crawler's repository table under another name).

A deployment whose table does not exist yet has no recorded application: every read answers
empty (version 0), and the first install creates it.
"""

from __future__ import annotations

import json
import logging
import struct
import threading
import time
from dataclasses import dataclass
from typing import Iterable

from caffeine.percolator.layout import ensure_system_table
from caffeine.storage import Decision, Put, ReadSpec, Store, TableNotFound

log = logging.getLogger(__name__)

TABLE = "observers"
FAMILY = b"r"
CONFIG = b"config"
# The registry version at which the row's configuration was recorded: an install that finds
# it above the global version (its installer stopped before bumping) bumps it.
RECORDED_AT = b"at"
VERSION_ROW = b"\x00version"  # sorts before every application's row: a scan reads it first
VERSION = b"version"
_ONE_VERSION_TS = 1  # one version per cell, overwritten in place by a row transaction
_CONFIG_SPEC = ReadSpec(columns=((FAMILY, CONFIG), (FAMILY, RECORDED_AT)))
_VERSION_SPEC = ReadSpec(columns=((FAMILY, VERSION),))
_SCAN_SPEC = ReadSpec(columns=((FAMILY, CONFIG), (FAMILY, VERSION)))
_U64 = struct.Struct(">Q")
# How often an install re-reads the other processes' reports while it waits for them.
_REPORT_POLL_S = 0.1


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


@dataclass(frozen=True)
class ObservedView:
    """The observed (table, column) pairs of one leased copy, and until when (monotonic s)
    the copy may be used: a commit point sent after ``valid_until`` needs a renewed one."""

    observed: frozenset[tuple[str, str]]
    valid_until: float

    def columns(self, table: str, columns: Iterable[str]) -> list[str]:
        return [c for c in columns if (table, c) in self.observed]


def _u64(cell) -> int:
    return _U64.unpack(cell.value)[0] if cell is not None else 0


def record(store: Store, application: str, config: AppConfig) -> tuple[bool, int]:
    """Make ``config`` the recorded configuration of ``application``. Returns (whether it
    changed, the registry version it was recorded at: for a change, one above the version
    read before it, which the caller then bumps the registry to)."""
    if not application or application.startswith("\x00"):
        raise ValueError(f"application name {application!r}: must not be empty or start with NUL")
    ensure_system_table(store, TABLE, FAMILY)
    value = config.encode()
    at = read_version(store) + 1

    def decide(row):
        cell = row.latest(FAMILY, CONFIG)
        if cell is not None and AppConfig.decode(cell.value) == config:
            return Decision((), (False, _u64(row.latest(FAMILY, RECORDED_AT))))
        return Decision([Put(FAMILY, CONFIG, _ONE_VERSION_TS, value),
                         Put(FAMILY, RECORDED_AT, _ONE_VERSION_TS, _U64.pack(at))], (True, at))

    return store.row_transaction(TABLE, application.encode(), _CONFIG_SPEC, decide)


def read_version(store: Store) -> int:
    """The registry's version (0 while the table does not exist)."""
    try:
        return _u64(store.read_row(TABLE, VERSION_ROW, _VERSION_SPEC).latest(FAMILY, VERSION))
    except TableNotFound:
        return 0


def bump_version(store: Store, at_least: int) -> int:
    """Raise the registry's version above what it is, and to ``at_least`` at least; returns it."""

    def decide(row):
        version = max(_u64(row.latest(FAMILY, VERSION)) + 1, at_least)
        return Decision([Put(FAMILY, VERSION, _ONE_VERSION_TS, _U64.pack(version))], version)

    return store.row_transaction(TABLE, VERSION_ROW, _VERSION_SPEC, decide)


def read_registry(store: Store) -> tuple[int, dict[str, AppConfig]]:
    """(the version, every recorded application's configuration), in one scan whose first
    row is the version's: the configurations read are at least as new as that version."""
    version, apps = 0, {}
    try:
        for row in store.scan(TABLE, spec=_SCAN_SPEC):
            if row.key == VERSION_ROW:
                version = _u64(row.latest(FAMILY, VERSION))
            elif (cell := row.latest(FAMILY, CONFIG)) is not None:
                apps[row.key.decode()] = AppConfig.decode(cell.value)
    except TableNotFound:
        pass
    return version, apps


def read_all(store: Store) -> dict[str, AppConfig]:
    """Every recorded application's configuration (none while the table does not exist)."""
    return read_registry(store)[1]


class ObserverRegistry:
    """This process's leased copy of the recorded configurations, plus its own observed
    columns.

    Safe for many threads: readers get an immutable set, a renewal swaps it whole, and never
    for a copy of an older version than the one held (renewals may overlap: none holds a lock
    across its calls), so the version held, and the lease, only move forward. Until attached
    to the process's owner registry (``attach``) it cannot report, and an install then waits
    out the lease."""

    def __init__(self, store: Store, *, max_age_ms: int) -> None:
        self.store = store
        self.max_age_ms = max_age_ms
        self._lock = threading.Lock()
        self._owners = None
        self._apps: dict[str, AppConfig] = {}
        self._version = 0
        self._local: set[tuple[str, str]] = set()
        self._observed: frozenset[tuple[str, str]] = frozenset()
        self._lease_from = float("-inf")  # monotonic s: the beat the copy's lease runs from

    def attach(self, owners) -> None:
        """Report through ``owners`` (an ``OwnerRegistry``: its beats carry ``version()``)."""
        self._owners = owners

    def version(self) -> int:
        """The registry version of the copy held (what this process's beats report)."""
        return self._version

    def refresh(self, beat_started: float | None = None) -> None:
        """Renew the lease: a beat that reports the version held must have landed (sent at
        ``beat_started``; None: send one now), then the registry is read. A changed version
        is reported at once with another beat, so an install waiting for it returns soon."""
        if beat_started is None:
            beat_started = self._owners.beat() if self._owners is not None else time.monotonic()
        version, apps = read_registry(self.store)
        with self._lock:
            if version < self._version:
                return  # a slower renewal's older read: the copy never goes back
            changed = version != self._version
            self._apps, self._version = apps, version
            # A beat that landed before a read of this version or an older one: what the
            # lease needs (caffeine.percolator.registry), whichever renewal it came from.
            self._lease_from = max(self._lease_from, beat_started)
            self._rebuild()
        if changed and self._owners is not None:
            try:
                self._owners.beat()
            except Exception as exc:  # the next heartbeat reports it
                log.debug("could not report registry version %d at once: %s", version, exc)

    def install(self, application: str, config: AppConfig) -> bool:
        """Record ``config`` for ``application``, take it up here at once, and return once
        every other process has it too (see the module docstring); True if the recorded
        configuration changed."""
        changed, at = record(self.store, application, config)
        if changed:
            version = bump_version(self.store, at)
        else:  # an installer of this configuration may have stopped before its bump
            current = read_version(self.store)
            version = bump_version(self.store, at) if at > current else current
        waited_from = time.monotonic()
        self.refresh()
        self._await_reports(version, waited_from)
        return changed

    def _await_reports(self, version: int, bumped_at: float) -> None:
        """Until every other live process reports ``version`` or more, or until every copy
        read before the bump has expired (``max_age_ms`` after it, with a margin for clock
        rates)."""
        deadline = bumped_at + self.max_age_ms * 1.1 / 1000
        owners = self._owners
        while time.monotonic() < deadline:
            if owners is not None:
                stale_ms = max(owners.grace_ms, 2 * self.max_age_ms)
                now_ms = owners.wall_clock_ms()
                behind = [o for o, (v, beat_ms) in owners.registry_versions().items()
                          if v < version and now_ms - beat_ms < stale_ms]
                if not behind:
                    return
            time.sleep(min(_REPORT_POLL_S, max(0.0, deadline - time.monotonic())))

    def observe(self, table: str, column: str) -> None:
        """Observe (table, column) in this process only."""
        with self._lock:
            self._local.add((table, column))
            self._rebuild()

    def view(self) -> ObservedView:
        """Every observed (table, column), from a copy whose lease holds (renewed first if
        it ran out), and until when that lease holds."""
        if time.monotonic() >= self._lease_from + self.max_age_ms / 1000:
            self.refresh()
        with self._lock:
            return ObservedView(self._observed, self._lease_from + self.max_age_ms / 1000)

    def observed(self) -> frozenset[tuple[str, str]]:
        """Every observed (table, column), from a copy whose lease holds."""
        return self.view().observed

    def _rebuild(self) -> None:
        self._observed = frozenset(self._local.union(*(c.observed for c in self._apps.values())))


__all__ = ["TABLE", "AppConfig", "ObservedView", "ObserverRegistry", "bump_version", "read_all",
           "read_registry", "read_version", "record"]
