"""Percolator timestamps: a wall-clock millisecond part and a logical counter in one integer.

Layer: oracle. Pure (imports only the standard library; no I/O except ``wall_clock_ms``).

A timestamp is a non-negative 64-bit integer::

    ts = (milliseconds since the Unix epoch << LOGICAL_BITS) | logical      LOGICAL_BITS = 18

Why this shape (the TiKV/PD layout): timestamps must be strictly increasing integers, which a
plain counter would do, but the protocol also has to judge *age* from a timestamp alone: a
lock's TTL is measured from the physical part of its start_ts (``physical_ms``), with no
separate clock field to keep in step. The 18 logical bits give 262,144 timestamps per
millisecond before the counter carries into the physical part.

Invariants:

- Ordering of timestamps is ordering of integers: ``compose`` is monotone in (ms, logical).
- ``physical_ms(ts)`` is only *approximately* wall-clock time: the oracle never lets timestamps
  go backwards, so after a clock step back, or a burst of more than 2**18 timestamps in one
  millisecond (the counter carries into the physical part), the physical part runs slightly
  ahead of the wall clock. Ages judged from it are therefore never longer than the truth
  (``elapsed_ms`` clamps at 0), which errs on the safe side for lock TTLs: a lock is never
  declared expired early because of the encoding.
- Every timestamp the oracle issues lies below ``MAX_ISSUABLE_TS`` (storage keeps its row
  guard at 2**62, and HBase's own "latest" marker is 2**63 - 1); that is good until the year
  2527.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone

LOGICAL_BITS = 18
LOGICAL_MASK = (1 << LOGICAL_BITS) - 1
# Storage's row guard lives at 2**62 (caffeine.storage.model.GUARD_TS); protocol timestamps
# must stay below it. Physical part < 2**44 ms, i.e. before the year 2527.
MAX_ISSUABLE_TS = (1 << 62) - 1
MAX_PHYSICAL_MS = MAX_ISSUABLE_TS >> LOGICAL_BITS


def compose(ms: int, logical: int = 0) -> int:
    """The timestamp with physical part ``ms`` (since the epoch) and logical part ``logical``."""
    if not 0 <= logical <= LOGICAL_MASK:
        raise ValueError(f"logical part {logical} out of range 0..{LOGICAL_MASK}")
    if not 0 <= ms <= MAX_PHYSICAL_MS:
        raise ValueError(f"physical part {ms} ms out of range 0..{MAX_PHYSICAL_MS}")
    return (ms << LOGICAL_BITS) | logical


def physical_ms(ts: int) -> int:
    """Milliseconds since the epoch encoded in ``ts`` (what lock TTLs are judged by)."""
    return ts >> LOGICAL_BITS


def logical(ts: int) -> int:
    """The logical counter part of ``ts``."""
    return ts & LOGICAL_MASK


def split(ts: int) -> tuple[int, int]:
    """``(physical_ms, logical)``; ``compose(*split(ts)) == ts``."""
    return ts >> LOGICAL_BITS, ts & LOGICAL_MASK


def from_wall_clock(ms: int) -> int:
    """The smallest timestamp whose physical part is ``ms`` (logical part 0)."""
    return compose(ms, 0)


def ms_to_ts_span(ms: int) -> int:
    """How many timestamps ``ms`` milliseconds are worth (the width of a block)."""
    return ms << LOGICAL_BITS


def add_ms(ts: int, ms: int) -> int:
    """``ts`` moved by ``ms`` milliseconds (logical part kept): e.g. a lock's expiry point."""
    return ts + (ms << LOGICAL_BITS)


def elapsed_ms(ts: int, now_ms: int | None = None) -> int:
    """Milliseconds from ``ts``'s physical part to ``now_ms`` (wall clock by default), >= 0.

    Clamped at 0 because a timestamp's physical part may run ahead of this machine's clock
    (see the module docstring); the protocol uses this to decide whether a lock outlived its
    TTL, and must never see a negative age as "very old".
    """
    now = wall_clock_ms() if now_ms is None else now_ms
    return max(0, now - physical_ms(ts))


def wall_clock_ms() -> int:
    """This machine's wall clock, milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def wall_clock_ts() -> int:
    """``from_wall_clock(wall_clock_ms())``: the timestamp the wall clock stands at now."""
    return (time.time_ns() // 1_000_000) << LOGICAL_BITS


def to_datetime(ts: int) -> datetime:
    """The physical part as an aware UTC datetime (for logs and humans)."""
    return datetime.fromtimestamp(physical_ms(ts) / 1000, tz=timezone.utc)


def describe(ts: int) -> str:
    """``"<ts> (2026-11-21T07:42:20.123Z +5)"``: a timestamp as people read it in logs."""
    when = to_datetime(ts).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    return f"{ts} ({when}Z +{logical(ts)})"
