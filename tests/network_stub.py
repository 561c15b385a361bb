"""Nothing leaves loopback: the connection stubs of the crawler's address and trap tests.

``NetworkStub`` gives the crawler its two connection hooks (``crawler.addresses``): a resolver
that knows only IP literals and the names a test maps (no DNS is ever asked) and a connector
that connects to loopback addresses only; asked for any other address it records it and fails,
so a regression shows as a recorded attempt, never as traffic. The ``network`` fixture also
guards the socket layer for the whole test, for code paths that bypass the hooks (the crawler's
default hooks, a command, an ingest): a ``connect`` to a non-loopback address, or a name
resolution other than ``localhost``, is recorded in ``escaped`` and fails. Tests assert both
lists; the fixture asserts ``escaped`` is empty at the end of every test that uses it.

Served sites (``serve``) listen on 127.0.0.1 and record every request they get.
"""

from __future__ import annotations

import errno
import http.server
import ipaddress
import socket
import threading
from contextlib import contextmanager
from typing import Callable

import httpcore
import pytest

from crawler.addresses import system_connector


def is_loopback(address) -> bool:
    try:
        return ipaddress.ip_address(str(address).split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def is_ip_literal(host) -> bool:
    try:
        ipaddress.ip_address(str(host).split("%", 1)[0])
        return True
    except ValueError:
        return False


class NetworkStub:
    def __init__(self) -> None:
        self.names: dict[str, Callable[[], list[str]] | list[str]] = {}
        self.resolved: list[str] = []               # every host the crawler's resolver was asked for
        self.attempts: list[tuple[str, int]] = []    # connector asked for a non-loopback address
        self.escaped: list[object] = []              # socket-level: past the hooks (must stay empty)
        self._lock = threading.Lock()

    def resolve(self, host: str, port: int) -> list[str]:
        with self._lock:
            self.resolved.append(host)
        if host in self.names:
            answer = self.names[host]
            return list(answer() if callable(answer) else answer)
        if is_ip_literal(host):
            return [host]
        raise socket.gaierror(socket.EAI_NONAME, f"stub resolver: {host} is not a name this test knows")

    def connect(self, address: str, port: int, timeout=None, local_address=None, socket_options=None):
        if is_loopback(address):
            return system_connector(address, port, timeout, local_address, socket_options)
        with self._lock:
            self.attempts.append((address, port))
        raise httpcore.ConnectError(f"stub connector: no connection to {address}:{port} (tests stay on loopback)")

    def hooks(self) -> dict:
        return {"resolver": self.resolve, "connector": self.connect}


def guard_sockets(monkeypatch, escaped: list) -> None:
    """For the rest of the test: a socket ``connect`` to a non-loopback address, or a name
    resolution other than ``localhost`` or an IP literal, is appended to ``escaped`` and fails."""
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def off_loopback(sock, address) -> bool:
        return sock.family in (socket.AF_INET, socket.AF_INET6) and not is_loopback(address[0])

    def connect(sock, address):
        if off_loopback(sock, address):
            escaped.append(address)
            raise OSError(errno.ENETUNREACH, f"test guard: no connection to {address}")
        return real_connect(sock, address)

    def connect_ex(sock, address):
        if off_loopback(sock, address):
            escaped.append(address)
            return errno.ENETUNREACH
        return real_connect_ex(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name != "localhost" and not is_ip_literal(name):
            escaped.append(("resolve", name))
            raise socket.gaierror(socket.EAI_NONAME, f"test guard: no name resolution of {name}")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def network(monkeypatch):
    """A ``NetworkStub`` whose socket guard is on for the test (see the module docstring)."""
    stub = NetworkStub()
    guard_sockets(monkeypatch, stub.escaped)
    yield stub
    assert not stub.escaped, f"traffic past the stubs: {stub.escaped}"


class Site:
    """A served site: ``requests`` lists the paths (with query) asked for, ``hosts`` the Host
    headers; ``base`` is ``http://127.0.0.1:PORT``."""

    def __init__(self, respond) -> None:
        self.respond = respond
        self.requests: list[str] = []
        self.hosts: list[str] = []
        self.base = ""

    @property
    def site(self) -> str:
        return self.base.split("//", 1)[1]


@contextmanager
def serve(respond: Callable[[Site, str], tuple[int, dict, bytes]], *, keep_alive: bool = True):
    """Serve ``respond(site, path) -> (status, headers, body)`` on 127.0.0.1."""
    lock = threading.Lock()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def do_GET(self):
            with lock:
                site.requests.append(self.path)
                site.hosts.append(self.headers.get("Host", ""))
            status, headers, body = site.respond(site, self.path)
            self.send_response(status)
            headers = {"Content-Type": "text/html; charset=utf-8", **headers}
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            if not keep_alive:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            self.wfile.write(body)

    site = Site(respond)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.block_on_close = False
    threading.Thread(target=server.serve_forever, daemon=True).start()
    site.base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()


def html(*hrefs: str, status: int = 200) -> tuple[int, dict, bytes]:
    links = "".join(f'<a href="{h}">link</a> ' for h in hrefs)
    return status, {}, f"<html><head><title>t</title></head><body>{links}</body></html>".encode()


def redirect(location: str, status: int = 302) -> tuple[int, dict, bytes]:
    return status, {"Location": location}, b""


NOT_FOUND = (404, {}, b"<p>not here</p>")
