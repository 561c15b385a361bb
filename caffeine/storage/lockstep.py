"""Lockstep: the gang of a process's callers whose storage calls are worth waiting for.

Layer: storage. No I/O of its own; ``batching.py`` is its user.

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

__all__ = ["Lockstep", "wait_or_pause"]


class Lockstep:
    """A gang of callers whose calls are worth waiting for (module docstring).

    ``enlist(n)``: ``n`` members are about to start on other threads (tasks handed to a pool):
    they count as running from now, so a leader does not send before they reach their calls;
    each then enters with ``member(enlisted=True)``. ``member()``: the calling thread is in
    the gang for the block (reentrant). ``waiting()``: the member is blocked on a call for the
    block, not running. ``wait_quiet()``: wait until no member is running, at most
    ``max_wait_s`` (0: never wait). An enlisted member that will not start after all is
    ``discharge``d."""

    def __init__(self, max_wait_s: float, *, pause: Callable[[], None] | None = None) -> None:
        self.max_wait_s = max_wait_s
        self._pause = pause
        self._cond = threading.Condition()
        self._running = 0
        self._local = threading.local()

    def enlist(self, n: int) -> None:
        with self._cond:
            self._running += n

    def discharge(self, n: int) -> None:
        """``n`` enlisted members will not start after all (their tasks were cancelled)."""
        with self._cond:
            for _ in range(n):
                self._leave()

    def _leave(self) -> None:  # lock held
        self._running -= 1
        if self._running == 0:
            self._cond.notify_all()

    @contextmanager
    def member(self, *, enlisted: bool = False):
        """(Every ``enlist``ed member must enter, or the gang waits for it, to ``max_wait_s``.)"""
        if getattr(self._local, "state", None) is not None:
            if enlisted:  # run inline by a member: it was counted twice
                with self._cond:
                    self._leave()
            yield
            return
        self._local.state = "running"
        if not enlisted:
            self.enlist(1)
        try:
            yield
        finally:
            with self._cond:
                if self._local.state == "running":
                    self._leave()
            self._local.state = None

    @contextmanager
    def waiting(self):
        """Yields a token to hand to ``resume`` (None outside the gang)."""
        if getattr(self._local, "state", None) != "running":  # not a member, or nested
            yield None
            return
        token = _Wait()
        with self._cond:
            self._local.state = "waiting"
            self._leave()
        try:
            yield token
        finally:
            self.resume(token)
            self._local.state = "running"

    def resume(self, token: "_Wait | None") -> None:
        """The member waiting with ``token`` runs again from now: called by whoever hands it
        its answer, so that it counts as running before its thread is even woken (else the
        thread that handed the answers out, running on, would find the gang quiet and send its
        next call alone)."""
        if token is None or not token.waiting:
            return
        with self._cond:
            if token.waiting:
                token.waiting = False
                self._running += 1

    def wait_quiet(self) -> bool:
        """Returns whether it waited for a member (for the statistics)."""
        if self.max_wait_s <= 0:
            return False
        deadline = time.monotonic() + self.max_wait_s
        with self._cond:
            waited = self._running > 0
            while self._running > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return waited
                wait_or_pause(self._cond, remaining, self._pause)
        return waited


def wait_or_pause(cond: threading.Condition, timeout: float, pause: Callable[[], None] | None) -> None:
    """Wait on ``cond`` (held) at most ``timeout`` s; with ``pause`` (the simulation's turn
    taking), release it for one ``pause()`` instead. Either way the caller looks again."""
    if pause is None:
        cond.wait(timeout)
        return
    cond.release()
    try:
        pause()
    finally:
        cond.acquire()


class _Wait:
    """One member's wait on a call (``Lockstep.waiting``)."""

    __slots__ = ("waiting",)

    def __init__(self) -> None:
        self.waiting = True
