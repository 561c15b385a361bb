"""A thread-safe pool of Thrift connections with bounded, visible retries.

Layer: storage. Used for both Thrift servers (happybase connections to Thrift1, thriftpy2
clients of the Thrift2 IDL), so connection failures are handled the same way everywhere.

Why our own pool: happybase's ConnectionPool re-opens a tainted connection inside its error
handler (which raises a second, confusing error while the server is down) and knows nothing of
Thrift2; the protocol needs one policy for both: a transport error discards the connection
(the servers close idle sockets after 60 s, and a restarted server invalidates all of them),
idempotent calls are retried on a fresh connection until a deadline (and sent again a few times
when a server answers with an error that may be passing), and a non-idempotent call
reports ``OutcomeUnknown`` instead of guessing.
"""

from __future__ import annotations

import logging
import queue
import random
import socket
import threading
import time
from typing import Callable, Generic, TypeVar

from thriftpy2.transport import TTransportException

from caffeine.storage.errors import OutcomeUnknown, StorageUnavailable
from caffeine.storage.model import StoreStats
from caffeine.storage.thrift_errors import describe_error

log = logging.getLogger(__name__)

# What a dropped, refused or timed-out connection raises through thriftpy2/happybase.
TRANSPORT_ERRORS = (TTransportException, OSError, EOFError, socket.timeout)

C = TypeVar("C")
R = TypeVar("R")


# Server-side errors raised while a request is checked, before anything is applied (Thrift2's
# TIllegalArgument, Thrift1's IllegalArgument): definite answers even for non-idempotent calls.
_REJECTED_BEFORE_APPLYING = frozenset({"TIllegalArgument", "IllegalArgument"})


def _rejected_before_applying(exc: BaseException) -> bool:
    return type(exc).__name__ in _REJECTED_BEFORE_APPLYING


# How many times an idempotent call answered with a server-side error is sent again. Such an
# answer is ambiguous for a write (the Thrift server's HBase client may have given up after the
# region server applied it) and may be a passing state (a region moving); a resend settles
# both. Only a few: that client has already retried on its own, so an error that comes back
# every time is the answer, and the caller should hear it (a missing table, a bad request).
SERVER_ERROR_RESENDS = 3


def _final_answer(exc: BaseException) -> bool:
    """Whether a server-side error is final even for a call that is safe to resend: an argument
    error, or an error the server marks as not retryable (both Thrift servers set ``canRetry``
    false for HBase's DoNotRetryIOException: a missing family, a coprocessor's refusal)."""
    return _rejected_before_applying(exc) or getattr(exc, "canRetry", None) is False


def _pause(delay: float) -> float:
    """Sleep about ``delay`` (jittered, so clients that failed together retry apart); the next
    delay, doubled up to 1 s."""
    time.sleep(delay * (0.5 + random.random()))
    return min(delay * 2, 1.0)


def _after_transport_error(exc: BaseException) -> bool:
    """Whether a transport error is in the exception's context chain."""
    seen = set()
    cause = exc.__context__
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, TRANSPORT_ERRORS):
            return True
        seen.add(id(cause))
        cause = cause.__context__
    return False


class ConnectionPool(Generic[C]):
    """Up to ``size`` open connections made by ``connect`` and torn down by ``close``.

    ``call(fn)`` runs ``fn(connection)``; on a transport error the connection is discarded and,
    if ``idempotent``, the call is retried on a new connection with backoff until
    ``retry_deadline_s`` has passed (enough to ride out a Thrift server restart), then
    ``StorageUnavailable`` names the server and the last error.

    An idempotent call answered with a server-side error is sent again up to
    ``SERVER_ERROR_RESENDS`` times (within the deadline), unless the error is final (see
    ``_final_answer``); then that error is raised as is.

    A non-idempotent call (a conditional write) ends in one of three answers: its result
    (applied or not, as the server said), a definite rejection (an argument error, raised as
    is), or ``OutcomeUnknown``: a lost reply, and also any other server-side error, since a
    Thrift server answers with an error when its HBase client gave up after the region
    server applied the write. Only a re-read settles an unknown outcome.
    """

    def __init__(
        self,
        name: str,
        connect: Callable[[], C],
        close: Callable[[C], None],
        *,
        size: int,
        stats: StoreStats,
        retry_deadline_s: float = 60.0,
        max_idle_s: float = 45.0,
        label: str = "calls",
    ) -> None:
        self.name = name
        self._connect = connect
        self._close = close
        # (connection, monotonic time it was last returned)
        self._idle: queue.LifoQueue[tuple[C, float]] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(size)
        self._stats = stats
        self.retry_deadline_s = retry_deadline_s
        self.max_idle_s = max_idle_s
        # Round trips sent through this pool (benchmarks count storage round trips with it).
        self._calls_counter = f"{label}_calls"

    def _acquire(self) -> C:
        self._slots.acquire()
        while True:
            try:
                conn, returned_at = self._idle.get_nowait()
            except queue.Empty:
                break
            if time.monotonic() - returned_at < self.max_idle_s:
                return conn
            # The Thrift servers close sockets idle for 60 s; a request on such a socket
            # would fail after sending, turning a safe write into an unknown outcome.
            self._discard(conn)
        try:
            return self._connect()
        except BaseException:
            self._slots.release()
            raise

    def _discard(self, conn: C) -> None:
        try:
            self._close(conn)
        except Exception:  # a broken socket may fail to close; it is gone either way
            pass

    def _release(self, conn: C, broken: bool) -> None:
        if broken:
            self._discard(conn)
        else:
            self._idle.put((conn, time.monotonic()))
        self._slots.release()

    def call(self, fn: Callable[[C], R], *, idempotent: bool = True) -> R:
        deadline = time.monotonic() + self.retry_deadline_s
        delay = 0.02
        attempt = 0
        server_resends = 0
        while True:
            attempt += 1
            sent = False
            last: BaseException
            try:
                conn = self._acquire()
            except TRANSPORT_ERRORS as exc:
                # Could not even connect: nothing was sent, so retrying is always safe.
                last = exc
            else:
                sent = True
                self._stats.bump(self._calls_counter)
                try:
                    result = fn(conn)
                except TRANSPORT_ERRORS as exc:
                    self._release(conn, broken=True)
                    last = exc
                except Exception as exc:
                    if _after_transport_error(exc):
                        # A transport error inside the call (then another error, raised while
                        # handling it): a reply may still be in flight on this connection, and
                        # the next call on it would read it as its own. Treat it as the
                        # transport error it began as.
                        self._release(conn, broken=True)
                        last = exc
                    else:
                        # An answer arrived (a server-side error): the connection is still good.
                        self._release(conn, broken=False)
                        self._answered_with_error(exc, idempotent, server_resends, deadline, delay)
                        server_resends += 1
                        log.info("%s: %s; sending again (attempt %d)", self.name, describe_error(exc), attempt + 1)
                        delay = _pause(delay)
                        continue
                except BaseException:
                    # Interrupted mid-call: a reply may be left unread on the socket.
                    self._release(conn, broken=True)
                    raise
                else:
                    self._release(conn, broken=False)
                    return result
                if not idempotent:
                    raise OutcomeUnknown(f"{self.name}: {describe_error(last)}") from last
            self._stats.bump("retried_calls")
            if sent:
                self._stats.bump("reconnects")
            if time.monotonic() + delay > deadline:
                raise StorageUnavailable(
                    f"{self.name} did not answer after {attempt} attempts over "
                    f"{self.retry_deadline_s:.0f}s: {describe_error(last)}"
                ) from last
            log.info("%s: %s; retrying (attempt %d)", self.name, describe_error(last), attempt)
            delay = _pause(delay)

    def _answered_with_error(self, exc: Exception, idempotent: bool, resends: int, deadline: float,
                             delay: float) -> None:
        """Raise what a call answered with the server-side error ``exc`` ends in, or return
        (counted as a retry) when it is to be sent again."""
        if not idempotent:
            if _rejected_before_applying(exc):
                raise exc
            # A Thrift server reports an error also when its own HBase client gave up after
            # the region server applied the write: for a call that is not safe to repeat,
            # that is an unknown outcome, not a failure.
            raise OutcomeUnknown(
                f"{self.name}: server-side error, the call may have applied: {describe_error(exc)}"
            ) from exc
        if _final_answer(exc) or resends >= SERVER_ERROR_RESENDS or time.monotonic() + delay > deadline:
            raise exc
        self._stats.bump("retried_calls")
        self._stats.bump("server_error_resends")

    def close_all(self) -> None:
        while True:
            try:
                conn, _ = self._idle.get_nowait()
            except queue.Empty:
                return
            self._discard(conn)
