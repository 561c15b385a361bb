"""One queue of combinable storage requests and the leader protocol that sends them as one call.

Layer: storage. No I/O of its own: ``send`` does it. ``batching.BatchingStore`` keeps one
``CallBatcher`` per (kind of call, table); its module docstring says what is combined and how
outcomes stay each caller's.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from caffeine.storage.errors import OutcomeUnknown
from caffeine.storage.lockstep import Lockstep, wait_or_pause

__all__ = ["CallBatcher", "MAX_REQUESTS"]

# Row-requests one combined call carries at most (HBase splits larger batches itself, but a
# reply that large delays every caller in it).
MAX_REQUESTS = 256


_NO_GANG = Lockstep(0.0)


class _Wake:
    """What a waiting caller sleeps on until it should look again: ``threading.Event``'s
    contract (``set``, ``clear``, ``wait``) on one bare lock, held while unset. An Event is a
    Condition, a lock and a waiter list, made and signalled once per request: with 16 threads
    a few µs each, more than the call's own Python. A ``set`` of a set wake changes nothing."""

    __slots__ = ("_unset",)

    def __init__(self) -> None:
        self._unset = threading.Lock()
        self._unset.acquire()

    def set(self) -> None:
        try:
            self._unset.release()
        except RuntimeError:
            pass  # set already

    def clear(self) -> None:
        self._unset.acquire(False)

    def wait(self) -> None:
        """Until set; returns with it cleared (the caller looks, then clears and waits again)."""
        self._unset.acquire()


class _Slot:
    """One caller's request while it waits: its items, the rows it must not share a call
    with, and, once the call returned, its answer or error."""

    __slots__ = ("items", "rows", "done", "result", "error", "token", "wake")

    def __init__(self, items: list, rows: frozenset, token: object = None) -> None:
        self.items = items
        self.rows = rows
        self.done = False
        self.result: object = None
        self.error: BaseException | None = None
        self.token = token  # the caller's ``Lockstep.waiting`` token
        # Set when this caller should look again (its answer is in, or it may lead now). Each
        # caller waits on its own, so a call's return wakes the callers it answered and the
        # next leader, not every caller queued (with 16 threads, waking all cost more CPU
        # than the calls' own Python).
        self.wake = _Wake()


class CallBatcher:
    """One queue of combinable requests and the leader protocol that sends them (see the
    module docstring). ``send(items)`` sends the items of several requests in one call and
    returns one answer per item, in order; if it raises, every request in the call gets the
    exception. ``exclusive``: whether two requests naming one row must go in different calls.
    ``in_flight``: how many calls may be in flight at once (each led by its own caller); a
    call is one server thread's work, so with one the server works each kind of call on one
    thread. Two calls in flight may name one row (as two callers' own calls could): the
    server orders them; only within one call must an exclusive batcher's rows differ."""

    def __init__(self, send: Callable[[list], list], *, linger_s: float = 0.0, max_requests: int = MAX_REQUESTS,
                 exclusive: bool = False, in_flight: int = 1, pause: Callable[[], None] | None = None,
                 lockstep: Lockstep = _NO_GANG,
                 on_call: Callable[[int, int], None] = lambda requests, items: None,
                 on_wait: Callable[[], None] = lambda: None,
                 on_error: Callable[[int, BaseException], None] = lambda requests, error: None) -> None:
        self._send = send
        self._linger_s = linger_s
        self._max = max_requests
        self._exclusive = exclusive
        if in_flight < 1:
            raise ValueError(f"in_flight must be at least 1, not {in_flight}")
        self._max_in_flight = in_flight
        self._pause = pause
        self._lockstep = lockstep
        self._on_call = on_call
        self._on_wait = on_wait
        self._on_error = on_error
        self._cond = threading.Condition()
        self._queue: list[_Slot] = []
        self._in_flight = 0  # calls led and not yet answered

    def submit(self, items: list, rows: frozenset = frozenset()) -> list:
        """Send ``items`` (in a call shared with other callers); returns their answers."""
        with self._lockstep.waiting() as token:
            return self._submit(_Slot(list(items), rows, token=token))

    def _submit(self, slot: _Slot) -> list:
        with self._cond:
            self._queue.append(slot)
            if self._linger_s > 0:
                self._cond.notify_all()  # a lingering leader (the one waiter on _cond) counts what joined
        try:
            while True:
                with self._cond:
                    # Cleared before looking: whoever changes what we look at sets it after.
                    slot.wake.clear()
                    if slot.done:
                        break
                    # (A slot another leader took is out of the queue, in that call: it waits.)
                    if self._in_flight < self._max_in_flight and self._queue and self._queue[0] is slot:
                        self._in_flight += 1  # this caller leads
                        break
                self._wait(slot)
        except BaseException:
            # Interrupted while waiting (the simulation's crash of the process): leave the
            # queue, or the callers behind would wait for this one to lead.
            with self._cond:
                if slot in self._queue:
                    self._queue.remove(slot)
                    self._wake_next()
            raise
        if not slot.done:
            self._lead(slot)
        if slot.error is not None:
            raise slot.error
        return slot.result

    def _wait(self, slot: _Slot) -> None:
        """Until ``slot`` is woken (threads), or one turn of the others (``pause``)."""
        if self._pause is None:
            slot.wake.wait()
        else:
            self._pause()

    def _wake_next(self) -> None:  # lock held
        """Wake the caller that may lead now, if another call may be in flight."""
        if self._in_flight < self._max_in_flight and self._queue:
            self._queue[0].wake.set()

    def _lead(self, own: _Slot) -> None:
        """Send one call for what is queued (this caller's request first), hand out the
        answers, and let the next waiting caller lead."""
        try:
            if self._lockstep.wait_quiet():  # before the batcher's lock: others join meanwhile
                self._on_wait()
            with self._cond:
                self._linger()
                batch = self._take()
                self._wake_next()  # a caller left queued may lead a call beside this one
            self._call(batch, own)
        finally:
            with self._cond:
                if own in self._queue:  # interrupted before taking the batch
                    self._queue.remove(own)
                self._in_flight -= 1
                self._wake_next()

    def _linger(self) -> None:
        """Wait up to ``linger_s`` (lock held on entry and exit) for requests to join."""
        if self._linger_s <= 0:
            return
        deadline = time.monotonic() + self._linger_s
        while sum(len(slot.items) for slot in self._queue) < self._max:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            wait_or_pause(self._cond, remaining, self._pause)

    def _take(self) -> list[_Slot]:
        batch, taken, rows = [], 0, set()
        for slot in list(self._queue):
            if batch and taken + len(slot.items) > self._max:
                break
            if self._exclusive and rows & slot.rows:
                continue
            batch.append(slot)
            taken += len(slot.items)
            rows |= slot.rows
        for slot in batch:
            self._queue.remove(slot)
        return batch

    def _call(self, batch: list[_Slot], own: _Slot) -> None:
        items = [item for slot in batch for item in slot.items]
        self._on_call(len(batch), len(items))
        try:
            answers = self._send(items)
        except Exception as exc:
            self._on_error(len(batch), exc)
            for slot in batch:
                slot.error = exc
                slot.done = True
                self._lockstep.resume(slot.token)
                slot.wake.set()
            return
        except BaseException:
            # The leader itself was interrupted mid-call: the call may have been sent.
            for slot in batch:
                if slot is not own:
                    slot.error = OutcomeUnknown("the call carrying this request was interrupted; it may have applied")
                    slot.done = True
                    slot.wake.set()
            raise
        at = 0
        for slot in batch:
            slot.result = answers[at:at + len(slot.items)]
            at += len(slot.items)
            slot.done = True
            self._lockstep.resume(slot.token)
            slot.wake.set()
