"""The oracle's persisted high-water mark (HWM): the bound that survives crashes, and a lease.

Layer: oracle. Imports ``caffeine.storage``, ``caffeine.oracle.timestamps`` and
``caffeine.oracle.errors``. The ``decide_*`` functions are pure (a ``Row`` in, a ``Decision``
out); ``HwmStore`` runs them as storage row transactions (read, decide, compare-and-set).

Where: table ``oracle`` (under the deployment's table prefix), family ``o`` (one version), row
``hwm``. Cells: ``o:hwm`` the HWM (8 bytes big-endian); ``o:owner`` the name of the oracle
process holding it, ``""`` once that process stopped cleanly ("released"); ``o:beat`` a
counter the owner bumps on every write (8 bytes), so every renewal is visible as a change.
All are written at the explicit cell timestamp 1: a put at the same timestamp replaces the
version, and HBase's server time is never used.

Invariants:

- Every timestamp any oracle has handed out is strictly below the persisted HWM: the server
  persists a higher HWM *before* it hands out anything at or above the current one.
- The HWM only grows, with one exception: a cleanly stopping oracle lowers it to its next
  timestamp (still above everything it handed out), so a restart resumes at the wall clock
  instead of up to one block ahead of it.
- A (re)started oracle issues from ``max(HWM, wall clock)`` on, so it never issues a timestamp
  at or below one issued before, whatever the clocks did.
- Every write is a compare-and-set on ``(hwm, owner, beat)`` as last seen: two processes can
  never both advance the HWM blindly; the loser learns who won (``OracleConflict``).

The row is also a *lease*, so that two oracles started by mistake never serve at once (which
would break real-time order: the older one could hand out a timestamp below one the newer
one already handed out):

- The owner renews (writes) every ``block/4``; it serves only while ``block`` has not passed
  on its monotonic clock since it *sent* its last successful write. A stalled owner (HBase
  unreachable, process paused) therefore stops answering by itself.
- A newcomer takes over at once a released (or absent) row. Otherwise it watches the row for
  ``block + margin`` on its own monotonic clock: any change means the owner is alive, and the
  newcomer refuses to start (``OracleConflict``); no change means the owner's lease has
  expired by now (its last write was sent before our first read), and the newcomer takes over
  with a compare-and-set on the state it watched. A renewal racing with that write loses its
  own compare-and-set, and the old owner stops. After a crash, a restart thus waits
  ``block + margin`` (3.5 s by default); after a clean stop, not at all.
- A *standby* (``acquire(..., standby=True)``) is a newcomer that does not refuse: a change
  made by a live owner starts its watch over, with the new state, for as long as it takes.
  It takes over when the owner releases the row (at once) or stops renewing it (after
  ``block + margin`` of silence, counted from the last change it saw: between 2.75 and
  3.6 s after a crash, by default). Two standbys racing for one row are settled by the
  compare-and-set: the loser sees the winner's write and watches it.
- The argument needs only that the two monotonic clocks run at about the same *rate* (within
  ``margin / block``), not that wall clocks agree.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Callable

from caffeine.oracle.errors import OracleConflict
from caffeine.storage import Decision, FamilySpec, Put, ReadSpec, Row, Store, TableExists

log = logging.getLogger(__name__)

TABLE = "oracle"
FAMILY = b"o"
ROW = b"hwm"
HWM_QUALIFIER = b"hwm"
OWNER_QUALIFIER = b"owner"
BEAT_QUALIFIER = b"beat"
RELEASED = ""
# Explicit cell timestamp for every cell: storage never lets HBase stamp server time, and one
# fixed version (max_versions=1) means each write simply replaces the previous value.
CELL_TS = 1
READ_SPEC = ReadSpec(families=(FAMILY,))
# Extra wait, beyond one block, before a newcomer declares a silent owner dead: room for the
# owner's clock running slower than ours and for the owner's last write taking long to land.
DEFAULT_LEASE_MARGIN_MS = 500
# How often a newcomer re-reads the row while it waits.
WATCH_INTERVAL_S = 0.1

_U64 = struct.Struct(">Q")


class AcquireAborted(Exception):
    """``acquire`` was told to stop (the server got SIGTERM) before it took anything over."""


@dataclass(frozen=True, slots=True)
class HwmState:
    """What the row holds. ``hwm`` None: no oracle ever ran. ``owner`` "": released."""

    hwm: int | None
    owner: str = RELEASED
    beat: int = 0

    @property
    def released(self) -> bool:
        return self.hwm is None or self.owner == RELEASED


@dataclass(frozen=True, slots=True)
class TakeOver:
    """Result of a take-over: the state found, where to start issuing, what is now persisted."""

    previous: HwmState
    start_ts: int
    state: HwmState


def read_state(row: Row) -> HwmState:
    hwm = row.latest(FAMILY, HWM_QUALIFIER)
    owner = row.latest(FAMILY, OWNER_QUALIFIER)
    beat = row.latest(FAMILY, BEAT_QUALIFIER)
    return HwmState(
        _U64.unpack(hwm.value)[0] if hwm is not None else None,
        owner.value.decode("utf-8", "replace") if owner is not None else RELEASED,
        _U64.unpack(beat.value)[0] if beat is not None else 0,
    )


def _puts(state: HwmState) -> list[Put]:
    return [
        Put(FAMILY, HWM_QUALIFIER, CELL_TS, _U64.pack(state.hwm)),
        Put(FAMILY, OWNER_QUALIFIER, CELL_TS, state.owner.encode("utf-8")),
        Put(FAMILY, BEAT_QUALIFIER, CELL_TS, _U64.pack(state.beat)),
    ]


def decide_take_over(expected: HwmState, now_ts: int, block_ts: int, owner: str):
    """Startup: if the row still holds ``expected``, issue from ``max(HWM, now_ts)`` on and
    persist that ``+ block_ts`` as ours. Result: a ``TakeOver``, or the ``HwmState`` found
    instead (nothing written)."""

    def decide(row: Row) -> Decision:
        found = read_state(row)
        if found != expected:
            return Decision((), found)
        start = max(found.hwm or 0, now_ts)
        new = HwmState(start + block_ts, owner, found.beat + 1)
        return Decision(_puts(new), TakeOver(found, start, new))

    return decide


def decide_write(expected: HwmState, new: HwmState):
    """Renewal or release: replace ``expected`` (ours, as last written) by ``new``.

    Result: ``new``, or the ``HwmState`` found instead if the row is not ``expected`` (another
    process wrote it; nothing written). Idempotent: a row already holding ``new`` (our own
    write, whose answer was lost) is success.
    """

    def decide(row: Row) -> Decision:
        found = read_state(row)
        if found == new:
            return Decision((), new)
        if found == expected:
            return Decision(_puts(new), new)
        return Decision((), found)

    return decide


def describe_owner(host: str, port: int) -> str:
    """A name for this oracle process, unique across restarts (pid numbers get reused)."""
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"oracle {uuid.uuid4().hex[:8]} pid {os.getpid()} on {socket.gethostname()} "
        f"serving {host}:{port} since {started}"
    )


class HwmStore:
    """The HWM row of one deployment, as seen by one oracle process (``owner``).

    Blocking (storage calls, sleeps); the asyncio server runs these in a worker thread.
    ``monotonic`` and ``sleep`` are injectable so tests can drive the lease without waiting.
    ``state`` is what this process last wrote (None before it took over); ``written_at`` the
    monotonic time just before that write was sent, where the owner's lease starts.
    """

    def __init__(
        self,
        store: Store,
        owner: str,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.store = store
        self.owner = owner
        self.monotonic = monotonic
        self.sleep = sleep
        self.state: HwmState | None = None
        self.written_at: float | None = None

    def ensure_table(self) -> None:
        if self.store.table_exists(TABLE):
            return
        try:
            self.store.create_table(TABLE, {FAMILY: FamilySpec(max_versions=1)})
        except TableExists:
            pass  # another process created it between our look and our create

    def read(self) -> HwmState:
        return read_state(self.store.read_row(TABLE, ROW, READ_SPEC))

    def acquire(
        self,
        block_ms: int,
        now_ts: Callable[[], int],
        *,
        margin_ms: int = DEFAULT_LEASE_MARGIN_MS,
        on_wait: Callable[[HwmState, float], None] | None = None,
        abort: threading.Event | None = None,
        standby: bool = False,
    ) -> TakeOver:
        """Take the row over (see the module docstring), waiting out a silent owner's lease.

        Raises ``OracleConflict`` if another oracle proves alive by writing while we watch;
        with ``standby``, watches it instead, until it releases the row or falls silent.
        ``on_wait(state, seconds)`` is called before a wait: once, or with ``standby`` once
        per owner. ``now_ts()`` gives the wall-clock timestamp to start from, read just
        before the take-over write. ``abort`` set during the wait raises ``AcquireAborted``.
        """
        block_ts = block_ms << 18
        window_s = (block_ms + margin_ms) / 1000
        state = self.read()
        watch_until = None
        told = None  # the owner on_wait was last called for
        while True:
            if not state.released:
                now = self.monotonic()
                if watch_until is None:
                    # The state we watch was written before our read, so before ``now``: its
                    # owner's lease ends before ``now + block`` on its clock.
                    watch_until = now + window_s
                    if on_wait is not None and state.owner != told:
                        told = state.owner
                        on_wait(state, window_s)
                if now < watch_until:
                    if abort is not None and abort.is_set():
                        raise AcquireAborted()
                    self.sleep(min(WATCH_INTERVAL_S, watch_until - now))
                    fresh = self.read()
                    if fresh != state:
                        if not fresh.released:
                            if not standby:
                                raise self._alive(fresh)
                            watch_until = None  # alive: watch again from this write on
                        state = fresh  # (or the owner stopped cleanly meanwhile)
                    continue
            sent_at = self.monotonic()
            result = self.store.row_transaction(
                TABLE, ROW, READ_SPEC, decide_take_over(state, now_ts(), block_ts, self.owner)
            )
            if isinstance(result, TakeOver):
                self.state, self.written_at = result.state, sent_at
                return result
            if not result.released:
                if not standby:
                    raise self._alive(result)
                watch_until = None  # another standby won the race: watch the winner
            state = result  # (or released again by someone in between: take it over)

    def _alive(self, state: HwmState) -> OracleConflict:
        return OracleConflict(
            f"another timestamp oracle is serving this deployment ({state.owner or 'unknown'}; "
            f"it wrote high-water mark {state.hwm} while this one waited); one oracle serves a "
            "table prefix at a time (`caffeine oracle --standby` waits to take over from it)"
        )

    def renew(self, new_hwm: int) -> HwmState:
        """Persist ``new_hwm`` (>= ours) with a new beat; ``OracleConflict`` if not ours any more."""
        mine = self._mine()
        if new_hwm < mine.hwm:
            raise ValueError(f"the HWM never shrinks while serving: {mine.hwm} -> {new_hwm}")
        return self._write(mine, HwmState(new_hwm, self.owner, mine.beat + 1))

    def release(self, final_hwm: int) -> bool:
        """Clean stop: hand the row back with HWM ``final_hwm`` (above all we handed out).

        False (and a log line) if the row is no longer ours.
        """
        mine = self._mine()
        if final_hwm > mine.hwm:
            raise ValueError("a release never raises the HWM")
        try:
            self._write(mine, HwmState(final_hwm, RELEASED, mine.beat + 1))
        except OracleConflict as exc:
            log.warning("oracle: not releasing the high-water mark: %s", exc)
            return False
        return True

    def _mine(self) -> HwmState:
        if self.state is None:
            raise RuntimeError("acquire() the row first")
        return self.state

    def _write(self, expected: HwmState, new: HwmState) -> HwmState:
        sent_at = self.monotonic()
        result = self.store.row_transaction(TABLE, ROW, READ_SPEC, decide_write(expected, new))
        if result != new:
            raise OracleConflict(
                "another timestamp oracle took over the high-water mark "
                f"(this one last wrote {expected.hwm}, found {result.hwm} written by "
                f"{result.owner or 'a stopped oracle'}); one oracle serves a table prefix at a time, "
                "and this one stops serving"
            )
        self.state, self.written_at = new, sent_at
        return new
