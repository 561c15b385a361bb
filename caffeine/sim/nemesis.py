"""The nemesis: which fault, if any, strikes each call, drawn from the run's seed.

Layer: simulation. Imports the standard library only. It decides; ``SimStore``/``SimOracle`` and the
``Sim`` carry the decisions out. Every decision is counted per kind (``counts``), so a run can
say what it injected.

Calls come in four classes, each with the faults that can really happen to it:

- ``read`` (gets, scans, guarded reads; idempotent, the pool retries them): a delay, a
  server-side error, an outage;
- ``write`` (blind ``mutate_row``/``put_rows``/``delete_rows``; idempotent, retried): an error
  before applying (nothing, or for a multi-row batch any subset, applied), an error after
  applying, a lost reply (the pool re-sends: applied twice, others may run in between), a
  stuck first attempt (the re-sent copy applies now, the first one lands later, after other
  actors' steps);
- ``cas`` (the row transaction's check-and-mutate; not idempotent): a lost reply after
  applying, a lost request, a request that lands later (after the client was told the outcome
  is unknown), an error before or after applying;
- ``oracle``: a restart (timestamps jump ahead, as from the persisted high-water mark), an
  error (the oracle did not answer in time).

And for every class: a delay (the actor is parked, others run first), a crash of the client
before or after the call applied (its thread stops; its owner is dead from then on), a pause
(the client stops heartbeating long enough to be declared dead, then carries on: a zombie),
and an outage of the store (every call waits it out, or gives up after the pool's deadline
with ``StorageUnavailable``).

A request that lands late (a stuck first attempt of a blind write, a late check-and-mutate)
is delivered a few steps on, or, with even odds, at the worst moment: just before another
check-and-mutate of the same row is judged, between that row transaction's read and its
write, where a guard token coming back is an ABA (``Sim.worst_moment``).

Between calls, the servers compact now and then (``compaction``, carried out by
``SimStore.compact``): versions beyond a family's limit are then gone for good.

Contract: ``pick(cls, crashable)`` returns a fault name or None; budgets cap the crashes,
outages and pauses of one run so that runs still make progress.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

COMMON = ("delay", "crash_before", "crash_after", "pause", "outage")
KINDS: dict[str, tuple[str, ...]] = {
    "read": ("delay", "crash_before", "pause", "outage", "error"),
    "write": COMMON + ("error_before", "error_after", "lost_reply", "stuck_attempt"),
    "cas": COMMON + ("error_before", "error_after", "lost_reply", "lost_request", "late_delivery"),
    "oracle": ("delay", "crash_before", "pause", "restart", "oracle_error"),
}
# Faults that model a dead or paused client or a down store: capped per run.
_BUDGETED = {"crash_before": "crashes", "crash_after": "crashes", "outage": "outages", "pause": "pauses"}


@dataclass
class Profile:
    """How hard one run is hit: the chance that a call meets a fault, and the budgets."""

    rate: float
    crashes: int
    outages: int
    pauses: int

    @classmethod
    def draw(cls, rng: random.Random) -> "Profile":
        return cls(
            rate=rng.choice((0.0, 0.02, 0.05, 0.05, 0.1, 0.15)),
            crashes=rng.choice((0, 1, 1, 2)),
            outages=rng.choice((0, 0, 1)),
            pauses=rng.choice((0, 0, 1)),
        )

    def __str__(self) -> str:
        return f"rate={self.rate} crashes<={self.crashes} outages<={self.outages} pauses<={self.pauses}"


class Nemesis:
    def __init__(self, rng: random.Random, profile: Profile) -> None:
        self.rng = rng
        self.profile = profile
        self.enabled = True
        self.counts: Counter[str] = Counter()
        self._spent: Counter[str] = Counter()

    def pick(self, cls: str, *, crashable: bool) -> str | None:
        if not self.enabled or self.rng.random() >= self.profile.rate:
            return None
        kind = self.rng.choice(KINDS[cls])
        budget = _BUDGETED.get(kind)
        if budget is not None:
            if (budget == "crashes" and not crashable) or self._spent[budget] >= getattr(self.profile, budget):
                return None
            self._spent[budget] += 1
        self.counts[kind] += 1
        return kind
