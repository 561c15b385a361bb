"""The owner registry: which client processes are alive, and how old their oldest transaction is.

Layer: percolator. Internal (storage I/O). The paper used Chubby to tell whether a lock's owner
is alive; Caffeine keeps the same fact in an HBase table of its own, ``owners``:

- each client process registers an owner id (random) and a heartbeat thread rewrites its row
  every ``heartbeat_interval_ms``: the wall-clock time of the beat and the start_ts of the
  oldest transaction the process still has open (GC's horizon needs it);
- an owner is *alive* while its last beat is younger than ``owner_grace_ms``; a cleanly
  closed client writes a beat at time 0, so its leftover locks are cleanable at once;
- ``is_alive`` returns None for an owner the registry has never heard of (the lock's TTL
  then decides alone).

A beat also carries the version of the observer registry the process holds
(``caffeine.percolator.registry``: an install waits until every live process has reported
the new one, or until every copy older than it has expired).

A beat is written at a cell timestamp of its own wall-clock time (strictly increasing per
owner), so a delayed or re-sent older beat can never overwrite a newer one: HBase keeps the
highest timestamp, whatever the order the writes arrive in. (With one fixed timestamp the
last write to arrive won, and a stale beat could report "no open transaction" to GC.)

The same table holds the **GC safe point** (row ``SAFE_POINT_ROW``): the horizon of the last
garbage collection. Versions a snapshot below it would read may be gone, so transactions
with a start_ts below it may neither read nor commit (``SnapshotTooOld``). It only grows.
Every process refreshes its copy with each heartbeat; a copy older than
``safe_point_max_age_ms`` is re-read before use, and GC waits longer than that between
publishing a safe point and deleting anything, so a process that was paused (and missed
beats) re-reads it before its next read or commit.
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from typing import Callable

from caffeine.percolator.layout import ensure_system_table
from caffeine.storage import Decision, Put, ReadSpec, Store

log = logging.getLogger(__name__)

TABLE = "owners"
FAMILY = b"o"
BEAT = b"beat"
_BEAT = struct.Struct(">QQ")  # wall ms of the beat, oldest open start_ts (0: none)
# ... then the observer registry version the process holds (absent in beats of older clients).
SAFE_POINT_ROW = b"\x00gc"  # sorts before every owner id (hex)
SAFE_POINT = b"safe_point"
_U64 = struct.Struct(">Q")
_SAFE_POINT_TS = 1


def ensure_table(store: Store) -> None:
    ensure_system_table(store, TABLE, FAMILY)


class OwnerRegistry:
    """This process's registration, plus liveness lookups of other owners (cached briefly)."""

    def __init__(
        self,
        store: Store,
        *,
        heartbeat_interval_ms: int,
        owner_grace_ms: int,
        oldest_open_start_ts: Callable[[], int | None] = lambda: None,
        wall_clock_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        on_beat: Callable[[float], None] = lambda started: None,
        registry_version: Callable[[], int] = lambda: 0,
    ) -> None:
        """``on_beat(started)``: more upkeep for the heartbeat thread, after each beat that
        landed (``started``: when that beat was sent, monotonic s; the cluster re-reads its
        copy of the observer registry); its errors are logged, never raised.
        ``registry_version()``: what each beat reports as the observer registry version held."""
        self.store = store
        self.owner = os.urandom(8).hex().encode()
        self.interval_ms = heartbeat_interval_ms
        self.grace_ms = owner_grace_ms
        self._oldest_open = oldest_open_start_ts
        self._now = wall_clock_ms
        self._on_beat = on_beat
        self._registry_version = registry_version
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cache: dict[bytes, tuple[float, bool | None]] = {}
        self._cache_lock = threading.Lock()
        self._last_beat_ts = 0
        self._beat_lock = threading.Lock()
        self.safe_point_max_age_ms = 2 * heartbeat_interval_ms
        self._safe_point = 0
        self._safe_point_read_at = float("-inf")  # monotonic s

    def wall_clock_ms(self) -> int:
        """The wall clock beats are stamped with (ms)."""
        return self._now()

    def start(self) -> float:
        """Create the table, beat once and start the heartbeat thread; returns when that first
        beat was sent (monotonic s)."""
        ensure_table(self.store)
        started = self.beat()
        self._thread = threading.Thread(target=self._run, name="caffeine-heartbeat", daemon=True)
        self._thread.start()
        return started

    def beat(self) -> float:
        """Write a beat; returns when it was sent (monotonic s), once it has landed."""
        started = time.monotonic()
        self._write_beat(self._now(), self._oldest_open() or 0, self._registry_version())
        return started

    def _write_beat(self, beat_ms: int, oldest_open: int, registry_version: int = 0) -> None:
        with self._beat_lock:
            ts = self._last_beat_ts = max(beat_ms, self._last_beat_ts + 1)
        value = encode_beat(beat_ms, oldest_open, registry_version)
        self.store.mutate_row(TABLE, self.owner, [Put(FAMILY, BEAT, ts, value)])

    def _run(self) -> None:
        while not self._stop.wait(self.interval_ms / 1000):
            started = None
            try:
                started = self.beat()
                self.refresh_safe_point()
            except Exception as exc:  # a missed beat is survivable; the next one may land
                log.warning("heartbeat of owner %s failed: %s", self.owner.decode(), exc)
            if started is None:
                continue
            try:
                self._on_beat(started)
            except Exception as exc:
                log.warning("heartbeat upkeep of owner %s failed: %s", self.owner.decode(), exc)

    # -- the GC safe point -----------------------------------------------------------------
    def refresh_safe_point(self) -> int:
        """Read the safe point (one round trip) and remember it."""
        read_at = time.monotonic()
        cell = self.store.read_row(TABLE, SAFE_POINT_ROW, ReadSpec(columns=((FAMILY, SAFE_POINT),))).latest(FAMILY, SAFE_POINT)
        value = _U64.unpack(cell.value)[0] if cell is not None else 0
        self._remember_safe_point(value, read_at)
        return self._safe_point

    def _remember_safe_point(self, value: int, read_at: float) -> None:
        with self._cache_lock:
            self._safe_point = max(self._safe_point, value)
            self._safe_point_read_at = max(self._safe_point_read_at, read_at)

    def safe_point(self) -> int:
        """The GC safe point, from a copy at most ``safe_point_max_age_ms`` old."""
        if (time.monotonic() - self._safe_point_read_at) * 1000 > self.safe_point_max_age_ms:
            return self.refresh_safe_point()
        return self._safe_point

    def advance_safe_point(self, ts: int) -> int:
        """Raise the safe point to ``ts`` (never lower it); returns the safe point now."""
        spec = ReadSpec(columns=((FAMILY, SAFE_POINT),))

        def decide(row):
            cell = row.latest(FAMILY, SAFE_POINT)
            current = _U64.unpack(cell.value)[0] if cell is not None else 0
            if current >= ts:
                return Decision((), current)
            return Decision([Put(FAMILY, SAFE_POINT, _SAFE_POINT_TS, _U64.pack(ts))], ts)

        read_at = time.monotonic()
        value = self.store.row_transaction(TABLE, SAFE_POINT_ROW, spec, decide)
        self._remember_safe_point(value, read_at)
        return value

    def close(self) -> None:
        """Stop beating and deregister: our remaining locks become cleanable at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self._write_beat(0, 0)
        except Exception as exc:
            log.warning("could not deregister owner %s: %s", self.owner.decode(), exc)

    def is_alive(self, owner: bytes) -> bool | None:
        if not owner:
            return None  # unknown owner (a status check without a lock in hand)
        if owner == self.owner:
            return not self._stop.is_set()
        now = time.monotonic()
        with self._cache_lock:
            cached = self._cache.get(owner)
            if cached and now - cached[0] < self.interval_ms / 2000:
                return cached[1]
        cell = self.store.read_row(TABLE, owner, ReadSpec(families=(FAMILY,))).latest(FAMILY, BEAT)
        if cell is None:
            alive = None
        else:
            beat_ms, _, _ = decode_beat(cell.value)
            alive = self._now() - beat_ms < self.grace_ms
        with self._cache_lock:
            self._cache[owner] = (now, alive)
        return alive

    def oldest_open_start_ts(self) -> int | None:
        """The oldest start_ts any live owner still has open (None: no open transactions)."""
        oldest = None
        now = self._now()
        for row in self.store.scan(TABLE, spec=ReadSpec(columns=((FAMILY, BEAT),))):
            cell = row.latest(FAMILY, BEAT)
            if cell is None:
                continue
            beat_ms, open_ts, _ = decode_beat(cell.value)
            if now - beat_ms < self.grace_ms and open_ts:
                oldest = open_ts if oldest is None else min(oldest, open_ts)
        mine = self._oldest_open()
        if mine:
            oldest = mine if oldest is None else min(oldest, mine)
        return oldest

    def registry_versions(self) -> dict[bytes, tuple[int, int]]:
        """Every other owner's last beat: owner -> (observer registry version it reported,
        wall ms of the beat; 0 for a deregistered owner)."""
        out = {}
        for row in self.store.scan(TABLE, spec=ReadSpec(columns=((FAMILY, BEAT),))):
            cell = row.latest(FAMILY, BEAT)
            if cell is not None and row.key != self.owner and row.key != SAFE_POINT_ROW:
                beat_ms, _, version = decode_beat(cell.value)
                out[row.key] = (version, beat_ms)
        return out


def encode_beat(beat_ms: int, oldest_open: int, registry_version: int) -> bytes:
    return _BEAT.pack(beat_ms, oldest_open) + _U64.pack(registry_version)


def decode_beat(value: bytes) -> tuple[int, int, int]:
    """(wall ms of the beat, oldest open start_ts or 0, registry version or 0)."""
    beat_ms, oldest_open = _BEAT.unpack_from(value)
    version = _U64.unpack_from(value, _BEAT.size)[0] if len(value) >= _BEAT.size + _U64.size else 0
    return beat_ms, oldest_open, version
