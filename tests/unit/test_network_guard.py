"""Every test runs under the loopback guard (``network_stub.guard_sockets``, autouse in
conftest), whatever its module: a connection, a UDP datagram or a name lookup that would leave
the machine fails the test instead. Only loopback, IP literals and the configured storage and
oracle hosts are let through.

Each check first asserts the function is the guard's, so a missing guard fails here without
the call ever reaching the network. ``guard_escapes`` is the list the guard records into (the
conftest fixture fails the test if it is not empty at the end).
"""

from __future__ import annotations

import socket

import pytest

# The real functions, captured at import (before any fixture patches them).
REAL = {name: getattr(socket, name) for name in
        ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo", "getfqdn")}
REAL_METHODS = {name: getattr(socket.socket, name) for name in ("connect", "connect_ex", "sendto")}


def test_every_module_is_guarded_and_every_resolver_function_too():
    for name, real in REAL.items():
        assert getattr(socket, name) is not real, f"socket.{name} is not guarded"
    for name, real in REAL_METHODS.items():
        assert getattr(socket.socket, name) is not real, f"socket.socket.{name} is not guarded"


@pytest.mark.parametrize("call", [
    lambda: socket.gethostbyname("guard-check.invalid"),
    lambda: socket.gethostbyname_ex("guard-check.invalid"),
    lambda: socket.gethostbyaddr("192.0.2.1"),
    lambda: socket.getnameinfo(("192.0.2.1", 80), 0),
    lambda: socket.getaddrinfo("guard-check.invalid", 80),
])
def test_lookups_that_would_leave_the_machine_fail(call, request):
    test_every_module_is_guarded_and_every_resolver_function_too()  # never call an unguarded one
    escaped = request.getfixturevalue("guard_escapes")
    with pytest.raises(OSError):
        call()
    assert escaped, "the guard did not record it"
    escaped.clear()  # recorded as expected: not a failure of this test


def test_udp_off_loopback_fails_and_loopback_works(request):
    test_every_module_is_guarded_and_every_resolver_function_too()
    escaped = request.getfixturevalue("guard_escapes")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        with pytest.raises(OSError):
            s.sendto(b"x", ("192.0.2.1", 53))
        assert escaped
        escaped.clear()
        s.sendto(b"x", ("127.0.0.1", 9))


def test_loopback_names_need_no_lookup():
    test_every_module_is_guarded_and_every_resolver_function_too()
    assert socket.getfqdn("127.0.0.1") == "127.0.0.1"  # what http.server's server_bind asks
    assert socket.gethostbyname("localhost").startswith("127.")
