"""Lockstep: the gang of a process's callers whose storage calls are worth waiting for.

Layer: storage (no I/O of its own; ``batching.py`` is its user).

Calls of concurrent callers combine only when they wait at the same moment, and callers that
each do a little CPU work between calls (observer runs) drift out of phase, so most calls
would go alone. A thread inside ``member()`` belongs to the gang; inside ``waiting()`` it is
blocked on a call, not running. A batching store's leader calls ``wait_quiet()`` before it
takes its queue: it waits until no member is running (every one is waiting on a call or has
left), at most ``max_wait_s``. The gang's calls of a round then go together, one per kind
and table. Every ``Store`` has one (``Store.lockstep``); outside a batching store it is inert.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable

__all__ = ["Lockstep"]


class Lockstep:
    """A gang of callers whose calls are worth waiting for (module docstring, "Lockstep").

    ``member()``: the calling thread is in the gang for the block (reentrant). ``waiting()``:
    the member is blocked on a call for the block, not running. ``wait_quiet()``: wait until
    no member is running, at most ``max_wait_s`` (0: never wait)."""

    def __init__(self, max_wait_s: float, *, pause: Callable[[], None] | None = None) -> None:
        self.max_wait_s = max_wait_s
        self._pause = pause
        self._cond = threading.Condition()
        self._running = 0
        self._local = threading.local()

    @contextmanager
    def member(self):
        if getattr(self._local, "state", None) is not None:
            yield
            return
        self._local.state = "running"
        with self._cond:
            self._running += 1
        try:
            yield
        finally:
            with self._cond:
                if self._local.state == "running":
                    self._running -= 1
                    if self._running == 0:
                        self._cond.notify_all()
            self._local.state = None

    @contextmanager
    def waiting(self):
        if getattr(self._local, "state", None) != "running":  # not a member, or nested
            yield
            return
        with self._cond:
            self._local.state = "waiting"
            self._running -= 1
            if self._running == 0:
                self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._running += 1
                self._local.state = "running"

    def wait_quiet(self) -> None:
        if self.max_wait_s <= 0:
            return
        deadline = time.monotonic() + self.max_wait_s
        with self._cond:
            while self._running > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                if self._pause is None:
                    self._cond.wait(remaining)
                else:
                    self._cond.release()
                    try:
                        self._pause()
                    finally:
                        self._cond.acquire()
