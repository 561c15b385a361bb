"""The timestamp oracle client: one batched request per process for all waiting threads.

Layer: oracle. Imports ``caffeine.config`` and ``caffeine.oracle.errors``; standard library
otherwise. The transaction layer calls ``get_timestamp()`` for every start_ts and commit_ts.

How it works (leader/follower combining): a caller that finds no request in flight becomes the
*leader*: it sends one request for itself plus everyone who queued meanwhile, over the one
persistent TCP connection, and splits the contiguous range the oracle returns. Callers that
arrive while a request is in flight queue up as *followers* and form the next batch. So there
is never more than one request in flight per process, and batching adapts to load: one caller
per round trip when idle, dozens under contention (the paper's batching; TiKV's PD client).
When the leader is done it promotes the first queued caller to lead the next batch.

Why this shape, measured on this project's 2-core VM (``bench/bench_oracle.py``): waking a
blocked Python thread costs an OS wake-up plus a GIL hand-off (8-25 us here, depending on the
machine's load), far more than a caller's share of a round trip, so the design minimises
wake-ups per timestamp:

- the leader is a caller, not a dedicated sender thread, so a lone caller never waits on
  another thread (about 2x the single-thread rate of a sender thread), and under load the
  sender's own wake-up per batch disappears;
- each waiter blocks on its own C-level lock (``_thread.allocate_lock``, made once per
  thread and reused): no per-call allocation as ``Condition.wait`` makes, none of
  ``threading.Event``'s Python-level bookkeeping;
- followers are woken as a *chain*: the leader wakes the first, each woken follower wakes
  the next. Waking all at once makes them stampede for the GIL (each sleeps twice: on its lock,
  then on the GIL); the chain measured ~1.5x faster at 32 threads.

Contract:

- ``get_timestamp()`` returns a timestamp no other call (in any process) ever gets, larger
  than that of every call that *returned* before this one *started* (real-time order): a
  caller's request is sent after the caller arrived, and the oracle serves requests in order.
  Never cached: a timestamp fetched earlier would be too small for a later caller.
- ``get_timestamps(n)`` returns the first of ``n`` consecutive timestamps owned by the caller.
- When the oracle does not answer, the leader reconnects with backoff (a request whose answer
  was lost is simply sent again: the oracle hands out a fresh range and the lost one is never
  used), logs once per outage, and fails each waiting call with ``OracleUnavailable`` once
  that call has waited ``deadline_s`` (default 30 s).
- Failover: the client knows a list of oracle addresses (``Settings.oracle_endpoints``: the
  active oracle and its standby; explicit ``host``/``port`` make it one). It stays with the
  address that last answered; when that one fails (refused, reset, timed out, or a standby
  answered ``OracleNotActive``) it tries the next at once, and backs off (20 ms doubling to
  ``MAX_BACKOFF_S``) only after every address failed in a row. So a client finds the standby
  that took over within ``MAX_BACKOFF_S`` of the takeover, without a restart.
- Timestamps stay strictly increasing across a failover: that is the server's guarantee (a
  new active oracle starts above the persisted high-water mark, which lies above everything
  the previous one handed out, see ``caffeine.oracle.hwm``). The client checks it anyway,
  per round trip: an answer not above the highest timestamp it handed out before means two
  oracles that do not share a high-water mark (different table prefixes or HBases) are in
  its address list, and the callers of that round trip get an ``OracleError`` saying so
  instead of a timestamp.
- Thread-safe; one client per process is the intent (it is what batches). Survives ``fork``:
  the child starts with a fresh connection and empty queue.
- A ``KeyboardInterrupt`` raised in a waiting main thread is re-raised only after that
  caller's place in the batch and in the wake-up chain is settled, so other threads never
  hang on it (the unavoidable exception: a signal landing in the few bytecodes between a
  follower's wake-up and its passing the wake-up on).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import weakref
from _thread import allocate_lock

from caffeine.config import Settings, load_settings
from caffeine.oracle.errors import OracleError, OracleUnavailable, describe_addresses, not_answering_message
from caffeine.oracle.wire import MAX_BATCH, REQUEST, STATUS_REQUEST, read_answer

log = logging.getLogger(__name__)

# Longest sleep between two rounds over every address: bounds how late a client notices that
# a standby took over (or that the oracle is back); connects to a dead port on a live host
# are refused at once, so a round is cheap.
MAX_BACKOFF_S = 0.25


class _Slot:
    """One thread's mailbox. ``lock`` stays locked while nobody waits on it, so the owner's
    ``acquire()`` blocks until someone ``release()``s it, and leaves it locked for next time.

    The waker fills ``result`` or ``error`` (or sets ``lead``: "you lead the next batch") and
    ``next`` (the follower this one must wake in turn) before releasing.
    """

    __slots__ = ("lock", "n", "result", "error", "t0", "lead", "next")

    def __init__(self) -> None:
        self.lock = allocate_lock()
        self.lock.acquire()
        self.n = 1
        self.result = 0
        self.error: BaseException | None = None
        self.t0 = 0.0
        self.lead = False
        self.next: _Slot | None = None


class OracleClient:
    """A process's connection to the active timestamp oracle among ``addresses``.

    ``addresses`` default to ``settings.oracle_endpoints`` (the oracle and its standby); an
    explicit ``host`` or ``port`` means that one address only (the other part from settings).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        host: str | None = None,
        port: int | None = None,
        addresses: list[tuple[str, int]] | None = None,
        deadline_s: float = 30.0,
        io_timeout_s: float = 5.0,
    ) -> None:
        settings = settings or load_settings()
        if addresses is not None:
            self.addresses = [(h, int(p)) for h, p in addresses]
        elif host is not None or port is not None:
            self.addresses = [(settings.oracle_host if host is None else host,
                               settings.oracle_port if port is None else port)]
        else:
            self.addresses = list(settings.oracle_endpoints)
        if not self.addresses:
            raise ValueError("an oracle client needs at least one address")
        self._at = 0  # the address in use, or to try next
        self._failed = 0  # attempts failed in a row (over all addresses)
        self._highest = -1  # the highest timestamp handed out so far, and where from
        self._highest_from = self.addresses[0]
        self.failovers = 0
        self.deadline_s = deadline_s
        # Bound on one connect or one answer; a timed-out request is sent again (see above).
        self.io_timeout_s = io_timeout_s
        self.round_trips = 0
        self.timestamps = 0
        self.connects = 0
        self._closed = False
        self._reset()
        _clients.add(self)

    @property
    def host(self) -> str:
        """The host of the address in use (or to be tried next)."""
        return self.addresses[self._at][0]

    @property
    def port(self) -> int:
        return self.addresses[self._at][1]

    def _reset(self) -> None:
        self._mutex = allocate_lock()  # guards _busy and _pending only; never held across I/O
        self._busy = False  # a leader is active
        self._pending: list[_Slot] = []  # callers waiting for the next batch, in arrival order
        self._local = threading.local()
        self._sock: socket.socket | None = None
        self._down_since: float | None = None

    # -- callers ---------------------------------------------------------------------------
    def get_timestamp(self) -> int:
        """One fresh timestamp (see the module docstring for the guarantees)."""
        return self.get_timestamps(1)

    def get_timestamps(self, n: int) -> int:
        """The first of ``n`` consecutive fresh timestamps (``first .. first + n - 1``)."""
        if not 1 <= n <= MAX_BATCH:
            raise ValueError(f"n must be in 1..{MAX_BATCH}, got {n}")
        if self._closed:
            raise OracleError("oracle client is closed")
        try:
            slot = self._local.slot
        except AttributeError:
            slot = self._local.slot = _Slot()
        slot.n = n
        slot.t0 = time.monotonic()
        mutex = self._mutex
        mutex.acquire()
        if self._busy:
            self._pending.append(slot)
            mutex.release()
            try:
                slot.lock.acquire()
            except BaseException:
                self._settle_interrupted(slot)
                raise
            nxt = slot.next
            if nxt is not None:
                slot.next = None
                nxt.lock.release()
            if not slot.lead:
                if slot.error is None:
                    return slot.result
                error, slot.error = slot.error, None
                raise error
            slot.lead = False
        else:
            self._busy = True
            mutex.release()
        return self._lead(slot)

    def _settle_interrupted(self, slot: _Slot) -> None:
        """A follower's wait was interrupted (KeyboardInterrupt): leave no one stranded."""
        with self._mutex:
            if slot in self._pending:
                self._pending.remove(slot)
                return
        # Already in a batch: its answer (or leadership) is coming and others depend on us
        # passing the wake-up on, so take it uninterruptibly-ish, then let the caller raise.
        while True:
            try:
                slot.lock.acquire()
                break
            except BaseException:
                continue
        nxt, slot.next = slot.next, None
        if nxt is not None:
            nxt.lock.release()
        slot.error = None
        if slot.lead:
            slot.lead = False
            self._hand_over([], None)

    # -- the leader ------------------------------------------------------------------------
    def _lead(self, me: _Slot) -> int:
        """Serve ``me`` and everyone queued, then hand leadership on; runs in ``me``'s thread."""
        batch = [me]
        done: list[_Slot] = []  # followers answered, to be woken as a chain
        delay = 0.02
        try:
            while True:
                with self._mutex:
                    if self._pending:
                        batch += self._pending
                        self._pending = []
                try:
                    self._allocate(batch, done)
                    break
                except OSError as exc:
                    self._drop_connection()
                    batch = self._expire(batch, exc, me)
                    if me.error is not None or not batch:
                        break  # our own deadline passed; the rest go back to the queue
                    if self._move_on(exc):
                        deadline = min(s.t0 for s in batch) + self.deadline_s
                        time.sleep(max(0.0, min(delay, deadline - time.monotonic())))
                        delay = min(delay * 2, MAX_BACKOFF_S)
        except BaseException:
            # Interrupted mid-request (KeyboardInterrupt), or an answer that went back
            # (OracleError): the connection's state is unknown, and the callers we carried
            # must be served by the next leader.
            self._drop_connection()
            self._hand_over(done, me, requeue=[s for s in batch if s is not me and s not in done])
            raise
        if me.error is not None:
            self._hand_over(done, me, requeue=[s for s in batch if s is not me])
            error, me.error = me.error, None
            raise error
        self._hand_over(done, me)
        return me.result

    def _allocate(self, batch: list[_Slot], done: list[_Slot]) -> None:
        """One round trip for the whole batch (several only past MAX_BATCH); fills results.

        Answered slots move from ``batch`` to ``done``, so a failure part-way retries only the
        rest. The order of the moves matters if an interrupt lands between them: a slot is in
        ``done`` before it leaves ``batch``, and the leader requeues what is in ``batch`` but
        not in ``done``, so no caller is ever dropped.
        """
        while batch:
            total = 0
            cut = 0
            for slot in batch:
                if total + slot.n > MAX_BATCH:
                    break
                total += slot.n
                cut += 1
            first = self._round_trip(total)
            if first <= self._highest:
                raise OracleError(
                    f"the timestamp oracle at {self.host}:{self.port} handed out {first}, not above "
                    f"{self._highest} which this client had from {describe_addresses([self._highest_from])}: "
                    "two oracles without a shared high-water mark are in the address list "
                    f"({describe_addresses(self.addresses)}); they must serve one deployment "
                    "(the same HBase and table prefix)"
                )
            if self._failed and self.addresses[self._at] != self._highest_from:
                log.info("timestamp oracle: now using %s:%d (%s:%d stopped answering as the active oracle)",
                         self.host, self.port, *self._highest_from)
            self._highest = first + total - 1
            self._highest_from = self.addresses[self._at]
            self._failed = 0
            self.round_trips += 1
            self.timestamps += total
            if self._down_since is not None:
                log.warning("timestamp oracle at %s:%d answers again after %.1f s",
                            self.host, self.port, time.monotonic() - self._down_since)
                self._down_since = None
            group = batch[:cut]
            for slot in group:
                slot.result = first
                first += slot.n
            done += group
            del batch[:cut]

    def _expire(self, batch: list[_Slot], exc: BaseException, me: _Slot) -> list[_Slot]:
        """After a failed attempt: fail callers past their deadline, keep the others."""
        now = time.monotonic()
        keep = []
        for slot in batch:
            if now - slot.t0 >= self.deadline_s:
                slot.error = OracleUnavailable(self.host, self.port, now - slot.t0, exc, self.addresses)
                if slot is not me:
                    slot.lock.release()
            else:
                keep.append(slot)
        return keep

    def _move_on(self, exc: BaseException) -> bool:
        """After a failed attempt: the next address; True when all failed in a row (back off).

        Says so once per outage, when every address has failed: one that fails while the
        next answers (a standby first in the list, a failover) is no outage.
        """
        self._failed += 1
        failed_all = self._failed % len(self.addresses) == 0
        if failed_all and self._down_since is None:
            self._down_since = time.monotonic()
            log.warning("%s Retrying for up to %.0f s (%s at %s:%d: %s)", not_answering_message(self.addresses),
                        self.deadline_s, type(exc).__name__, self.host, self.port, exc)
        if len(self.addresses) > 1:
            self._at = (self._at + 1) % len(self.addresses)
            self.failovers += 1
        return failed_all

    def _hand_over(self, done: list[_Slot], me: _Slot | None, requeue: list[_Slot] = ()) -> None:
        """Wake the answered followers (as a chain) and pass leadership to the next in line.

        ``me`` (the leader's own slot, which nobody waits on) is left out of the chain.
        """
        with self._mutex:
            if requeue:
                self._pending[:0] = requeue  # they arrived first, they go first
            if self._pending:
                successor = self._pending.pop(0)
                successor.lead = True
            else:
                successor = None
                self._busy = False
                if self._closed:
                    self._drop_connection()
        chain = [s for s in done if s is not me]
        if successor is not None:
            chain.append(successor)
        for i in range(len(chain) - 1):
            chain[i].next = chain[i + 1]
        if chain:
            chain[0].lock.release()

    # -- the wire --------------------------------------------------------------------------
    def _round_trip(self, n: int) -> int:
        sock = self._sock
        if sock is None:
            sock = self._connect()
        sock.sendall(REQUEST.pack(n))
        return read_answer(sock, sock.recv(8), self.addresses[self._at])

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.addresses[self._at], timeout=min(self.io_timeout_s, self.deadline_s))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        self.connects += 1
        return sock

    def _drop_connection(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass

    def status(self) -> int:
        """The active oracle's next timestamp, allocating nothing (protocol request 0).

        Every timestamp handed out so far is below it; unchanged between two calls means none
        was handed out in between (after a failover the new oracle's answer is higher, so a
        failover never looks like quiet). Uses its own short connection, so it never waits
        behind batched traffic. Asks the addresses in turn, from the one in use, and raises
        the last ``OSError`` if none answers as the active oracle (``OracleNotActive``: a
        standby answered).
        """
        return self.status_at()[0]

    def status_at(self) -> tuple[int, tuple[str, int]]:
        """``status()`` and the address that answered it: the active oracle's. The client's
        own connection (``host``/``port``) does not move; its next batch finds the active one
        by itself."""
        error: OSError | None = None
        for host, port in self.addresses[self._at:] + self.addresses[:self._at]:
            try:
                with socket.create_connection((host, port), timeout=self.io_timeout_s) as sock:
                    sock.sendall(REQUEST.pack(STATUS_REQUEST))
                    return read_answer(sock, b"", (host, port)), (host, port)
            except OSError as exc:
                error = exc
        raise error

    # -- lifecycle -------------------------------------------------------------------------
    def stats(self) -> dict[str, float]:
        """Round trips, timestamps, connects so far; ``timestamps_per_round_trip`` is the batching."""
        return {
            "round_trips": self.round_trips,
            "timestamps": self.timestamps,
            "connects": self.connects,
            "timestamps_per_round_trip": self.timestamps / self.round_trips if self.round_trips else 0.0,
        }

    def close(self) -> None:
        """Close the connection once no request is in flight; later calls raise ``OracleError``."""
        with self._mutex:
            self._closed = True
            if not self._busy:
                self._drop_connection()
            # else: the last leader drops it in _hand_over

    def __enter__(self) -> "OracleClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _after_fork_in_child(self) -> None:
        # The parent's waiting threads do not exist here, and its lock states are meaningless:
        # start over. Closing the socket closes this process's descriptor only; the parent's
        # connection stays up.
        sock = self._sock
        self._reset()
        if sock is not None:
            try:
                sock.close()
            except OSError:
                pass


_clients: "weakref.WeakSet[OracleClient]" = weakref.WeakSet()


def _reset_clients_after_fork() -> None:
    for client in list(_clients):
        client._after_fork_in_child()


os.register_at_fork(after_in_child=_reset_clients_after_fork)
