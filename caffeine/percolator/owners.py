"""The owner registry: which client processes are alive, and how old their oldest transaction is.

Layer: percolator internals (storage I/O). The paper used Chubby to tell whether a lock's owner
is alive; Caffeine keeps the same fact in an HBase table of its own, ``owners``:

- each client process registers an owner id (random) and a heartbeat thread rewrites its row
  every ``heartbeat_interval_ms``: the wall-clock time of the beat and the start_ts of the
  oldest transaction the process still has open (GC's horizon needs it);
- an owner is *alive* while its last beat is younger than ``owner_grace_ms``; a cleanly
  closed client writes a beat at time 0, so its leftover locks are cleanable at once;
- ``is_alive`` returns None for an owner the registry has never heard of (the lock's TTL
  then decides alone).
"""

from __future__ import annotations

import logging
import os
import struct
import threading
import time
from typing import Callable

from caffeine.storage import FamilySpec, Put, ReadSpec, Store, TableExists

log = logging.getLogger(__name__)

TABLE = "owners"
FAMILY = b"o"
BEAT = b"beat"
_BEAT = struct.Struct(">QQ")  # wall ms of the beat, oldest open start_ts (0: none)
_CELL_TS = 1


def ensure_table(store: Store) -> None:
    if TABLE not in store.list_tables():
        try:
            store.create_table(TABLE, {FAMILY: FamilySpec(max_versions=1, in_memory=True)})
        except TableExists:
            pass


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
    ) -> None:
        self.store = store
        self.owner = os.urandom(8).hex().encode()
        self.interval_ms = heartbeat_interval_ms
        self.grace_ms = owner_grace_ms
        self._oldest_open = oldest_open_start_ts
        self._now = wall_clock_ms
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cache: dict[bytes, tuple[float, bool | None]] = {}
        self._cache_lock = threading.Lock()

    def start(self) -> None:
        ensure_table(self.store)
        self.beat()
        self._thread = threading.Thread(target=self._run, name="caffeine-heartbeat", daemon=True)
        self._thread.start()

    def beat(self) -> None:
        oldest = self._oldest_open() or 0
        self.store.mutate_row(TABLE, self.owner, [Put(FAMILY, BEAT, _CELL_TS, _BEAT.pack(self._now(), oldest))])

    def _run(self) -> None:
        while not self._stop.wait(self.interval_ms / 1000):
            try:
                self.beat()
            except Exception as exc:  # a missed beat is survivable; the next one may land
                log.warning("heartbeat of owner %s failed: %s", self.owner.decode(), exc)

    def close(self) -> None:
        """Stop beating and deregister: our remaining locks become cleanable at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.store.mutate_row(TABLE, self.owner, [Put(FAMILY, BEAT, _CELL_TS, _BEAT.pack(0, 0))])
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
            beat_ms, _ = _BEAT.unpack(cell.value)
            alive = self._now() - beat_ms < self.grace_ms
        with self._cache_lock:
            self._cache[owner] = (now, alive)
        return alive

    def oldest_open_start_ts(self) -> int | None:
        """The oldest start_ts any live owner still has open (None: no open transactions)."""
        oldest = None
        now = self._now()
        for row in self.store.scan(TABLE, spec=ReadSpec(families=(FAMILY,))):
            cell = row.latest(FAMILY, BEAT)
            if cell is None:
                continue
            beat_ms, open_ts = _BEAT.unpack(cell.value)
            if now - beat_ms < self.grace_ms and open_ts:
                oldest = open_ts if oldest is None else min(oldest, open_ts)
        mine = self._oldest_open()
        if mine:
            oldest = mine if oldest is None else min(oldest, mine)
        return oldest
