"""The connection pool's answer to a server-side error, per kind of call (no servers needed:
the calls are functions that raise what a Thrift server answers).

The real servers' errors are exercised through the fault proxy in tests/faults/test_faults_hbase.py
(``test_idempotent_writes_ride_out_errors_after_apply``, ``test_an_error_after_apply_...``).
"""

from __future__ import annotations

import pytest

from caffeine.storage.errors import OutcomeUnknown
from caffeine.storage import StoreStats
from caffeine.storage.pool import SERVER_ERROR_RESENDS, ConnectionPool


class TIOError(Exception):
    """Shaped like Thrift2's TIOError: ``message`` and the server's ``canRetry`` hint."""

    def __init__(self, message: str, can_retry: bool | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.canRetry = can_retry


class TIllegalArgument(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def pool() -> ConnectionPool:
    return ConnectionPool("server", connect=object, close=lambda c: None, size=2, stats=StoreStats(),
                          retry_deadline_s=30.0)


def answering(*errors):
    """A call that raises each of ``errors`` in turn, then returns "done"; counts its sends."""
    sends = []

    def call(conn):
        sends.append(conn)
        if len(sends) <= len(errors):
            raise errors[len(sends) - 1]
        return "done"
    return call, sends


@pytest.mark.parametrize("can_retry", [None, True])
def test_an_idempotent_call_answered_with_a_server_error_is_sent_again(can_retry):
    call, sends = answering(TIOError("error after apply", can_retry))
    assert pool().call(call, idempotent=True) == "done"
    assert len(sends) == 2


def test_an_error_the_server_says_not_to_retry_is_raised_at_once():
    call, sends = answering(TIOError("DoNotRetryIOException: refused", can_retry=False))
    with pytest.raises(TIOError):
        pool().call(call, idempotent=True)
    assert len(sends) == 1


def test_an_argument_error_is_raised_at_once():
    call, sends = answering(TIllegalArgument("bad"))
    with pytest.raises(TIllegalArgument):
        pool().call(call, idempotent=True)
    assert len(sends) == 1


def test_a_server_error_that_persists_is_raised_after_a_few_resends_not_until_the_deadline():
    # The Thrift server's own HBase client has already retried: an error that comes back
    # every time is an answer, not a blip.
    call, sends = answering(*[TIOError("region offline")] * 50)
    with pytest.raises(TIOError):
        pool().call(call, idempotent=True)
    assert len(sends) == 1 + SERVER_ERROR_RESENDS


def test_a_call_not_safe_to_resend_answered_with_a_server_error_is_an_unknown_outcome():
    call, sends = answering(TIOError("error after apply"))
    with pytest.raises(OutcomeUnknown):
        pool().call(call, idempotent=False)
    assert len(sends) == 1
