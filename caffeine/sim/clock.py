"""Virtual time for the simulation: a clock only the scheduler and sleepers move.

Layer: simulation. Imports the standard library and ``caffeine.oracle.timestamps``.

The protocol judges lock TTLs, lock-wait deadlines and retry deadlines by wall-clock time, and
backs off with ``time.sleep`` and ``random``. In a simulation those must be functions of the
seed, so while a run is in progress every loaded ``caffeine`` and ``crawler`` module whose
global ``time`` (or ``random``) is the standard module sees a stand-in instead (``patched``):

- ``time.time_ns()/time()/monotonic()`` read the virtual clock (all three agree);
- ``time.sleep(s)`` advances the virtual clock by ``s`` and hands the baton back to the
  scheduler (a sleeper lets others run, and its sleep makes time pass for everybody);
- ``random.*`` draws from one ``random.Random`` seeded by the run.

Only one actor runs at a time, so one shared clock and one shared generator are deterministic.
Threads that are not the run's (anything else alive in the process) still get the real ones.
Contract: the stand-ins are installed for the duration of ``patched`` and removed afterwards,
even on error; nothing outside ``caffeine`` and ``crawler`` (pytest, logging) is touched.
"""

from __future__ import annotations

import contextlib
import random as _random
import sys
import time as _time
from typing import Callable, Iterator

# A fixed epoch (2026-01-01), so the timestamps of a run do not depend on when it ran.
EPOCH_MS = 1_767_225_600_000


class VirtualClock:
    """Milliseconds since the epoch, as a float so sleeps of a fraction of a ms add up."""

    def __init__(self, start_ms: int = EPOCH_MS) -> None:
        self.now_ms = float(start_ms)

    def advance(self, ms: float) -> None:
        if ms > 0:
            self.now_ms += ms

    def ms(self) -> int:
        return int(self.now_ms)


class VirtualTime:
    """Stands in for the ``time`` module inside ``caffeine`` during a run.

    Only the run's own threads (``is_sim_thread()``: the thread running it and its actors)
    see virtual time; any other thread of the process (a test's leftover heartbeat thread,
    say) keeps the real clock, so it neither spins on free sleeps nor moves the run's clock."""

    def __init__(self, clock: VirtualClock, on_sleep: Callable[[float], None],
                 is_sim_thread: Callable[[], bool]) -> None:
        self._clock = clock
        self._on_sleep = on_sleep
        self._mine = is_sim_thread

    def time_ns(self) -> int:
        return int(self._clock.now_ms * 1_000_000) if self._mine() else _time.time_ns()

    def time(self) -> float:
        return self._clock.now_ms / 1000.0 if self._mine() else _time.time()

    def monotonic(self) -> float:
        return self._clock.now_ms / 1000.0 if self._mine() else _time.monotonic()

    def perf_counter(self) -> float:
        return self._clock.now_ms / 1000.0 if self._mine() else _time.perf_counter()

    def sleep(self, seconds: float) -> None:
        if not self._mine():
            _time.sleep(seconds)
            return
        self._clock.advance(max(0.0, seconds) * 1000.0)
        self._on_sleep(seconds)

    def __getattr__(self, name):  # anything else (strftime, ...) from the real module
        return getattr(_time, name)


class SeededRandom:
    """Stands in for the ``random`` module: the run's generator for the run's own threads,
    the real module for any other thread (which must not draw from the run's stream)."""

    def __init__(self, rng: _random.Random, is_sim_thread: Callable[[], bool]) -> None:
        self._rng = rng
        self._mine = is_sim_thread

    def __getattr__(self, name):
        return getattr(self._rng if self._mine() else _random, name)


@contextlib.contextmanager
def patched(virtual_time: VirtualTime, rng: SeededRandom) -> Iterator[None]:
    """Install the stand-ins in every loaded ``caffeine`` module (not the simulation's own)
    and every loaded ``crawler`` module (the ingest the simulation drives)."""
    swapped: list[tuple[object, str, object]] = []
    try:
        for name, module in list(sys.modules.items()):
            if module is None or name.startswith("caffeine.sim") or not name.startswith(("caffeine.", "crawler.")):
                continue
            namespace = vars(module)
            if namespace.get("time") is _time:
                swapped.append((module, "time", _time))
                module.time = virtual_time
            if namespace.get("random") is _random:
                swapped.append((module, "random", _random))
                module.random = rng
        yield
    finally:
        for module, attr, original in swapped:
            setattr(module, attr, original)
