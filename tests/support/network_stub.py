"""Nothing leaves loopback: the connection stubs of the crawler's address and trap tests.

``NetworkStub`` gives the crawler its two connection hooks (``crawler.addresses``): a resolver
that knows only IP literals and the names a test maps (no DNS is ever asked) and a connector
that connects to loopback addresses only; asked for any other address it records it and fails,
so a regression shows as a recorded attempt, never as traffic. ``guard_sockets`` guards the
socket layer for code paths that bypass the hooks (the crawler's default hooks, a command, an
ingest): conftest's autouse ``guard_escapes`` fixture turns it on for every test of the suite,
so a connection or UDP datagram off loopback, a name lookup other than ``localhost``, or a
reverse lookup is recorded and fails (the configured storage and oracle hosts excepted). The
``network`` fixture's ``escaped`` is that list; a test asserts it and conftest asserts it is
empty at the end of every test.

Served sites (``serve``) listen on 127.0.0.1 and record every request they get; their server
names itself without the reverse lookup ``http.server`` would make.
"""

from __future__ import annotations

import errno
import http.server
import ipaddress
import socket
import socketserver
import threading
from contextlib import contextmanager
from typing import Callable, Iterable

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


def guard_sockets(monkeypatch, escaped: list, allowed_hosts: Iterable[str] = (),
                  allowed_addresses: Iterable[str] = ()) -> None:
    """For the rest of the test: a socket ``connect``/``connect_ex``/``sendto`` to an address
    that is neither loopback nor in ``allowed_addresses``, or a name lookup (``getaddrinfo``,
    ``gethostbyname(_ex)``) of a name other than ``localhost``, an IP literal or one of
    ``allowed_hosts``, is appended to ``escaped`` and fails. Reverse lookups
    (``gethostbyaddr``, ``getnameinfo``, ``getfqdn``) never ask anyone: a loopback address is
    answered as ``localhost`` (``getfqdn``: the name given, as http.server's ``server_bind``
    asks it), ``getnameinfo`` numerically, any other address is an escape."""
    hosts = {"localhost", *allowed_hosts}
    addresses = set(allowed_addresses)
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex
    real_sendto = socket.socket.sendto
    real_getaddrinfo, real_gethostbyname = socket.getaddrinfo, socket.gethostbyname
    real_gethostbyname_ex, real_getnameinfo = socket.gethostbyname_ex, socket.getnameinfo

    def local(address) -> bool:
        return is_loopback(address) or str(address).split("%", 1)[0] in addresses

    def off_loopback(sock, address) -> bool:
        return (sock.family in (socket.AF_INET, socket.AF_INET6) and isinstance(address, tuple)
                and not local(address[0]))

    def refuse(what):
        escaped.append(what)
        return OSError(errno.ENETUNREACH, f"test guard: {what} would leave the machine")

    def connect(sock, address):
        if off_loopback(sock, address):
            raise refuse(address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        if off_loopback(sock, address):
            escaped.append(address)
            return errno.ENETUNREACH
        return real_connect_ex(sock, address)

    def sendto(sock, data, *args):
        address = args[-1] if args else None
        if off_loopback(sock, address):
            raise refuse(("sendto", address))
        return real_sendto(sock, data, *args)

    def check_name(host) -> None:
        name = host.decode() if isinstance(host, bytes) else host
        if name is not None and name not in hosts and not is_ip_literal(name):
            escaped.append(("resolve", name))
            raise socket.gaierror(socket.EAI_NONAME, f"test guard: no name resolution of {name}")

    def getaddrinfo(host, *args, **kwargs):
        check_name(host)
        return real_getaddrinfo(host, *args, **kwargs)

    def gethostbyname(host):
        check_name(host)
        return real_gethostbyname(host)

    def gethostbyname_ex(host):
        check_name(host)
        return real_gethostbyname_ex(host)

    def gethostbyaddr(address):
        if is_loopback(address) or address == "localhost":
            return "localhost", [], [str(address) if is_ip_literal(address) else "127.0.0.1"]
        escaped.append(("reverse lookup", address))
        raise socket.herror(1, f"test guard: no reverse lookup of {address}")

    def getnameinfo(sockaddr, flags):
        if not local(sockaddr[0]):
            escaped.append(("reverse lookup", sockaddr[0]))
            raise socket.gaierror(socket.EAI_NONAME, f"test guard: no reverse lookup of {sockaddr[0]}")
        return real_getnameinfo(sockaddr, flags | socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)

    def getfqdn(name=""):
        name = name.strip()
        if not name or name == "0.0.0.0" or name == "::":
            return "localhost"
        if is_loopback(name) or name in hosts or local(name):
            return name
        escaped.append(("reverse lookup", name))
        return name

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket.socket, "sendto", sendto)
    for name, fn in [("getaddrinfo", getaddrinfo), ("gethostbyname", gethostbyname),
                     ("gethostbyname_ex", gethostbyname_ex), ("gethostbyaddr", gethostbyaddr),
                     ("getnameinfo", getnameinfo), ("getfqdn", getfqdn)]:
        monkeypatch.setattr(socket, name, fn)


@pytest.fixture
def network(guard_escapes):
    """A ``NetworkStub`` whose ``escaped`` is the socket guard's list (conftest guards every
    test; see the module docstring)."""
    stub = NetworkStub()
    stub.escaped = guard_escapes
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

    class Server(http.server.ThreadingHTTPServer):
        def server_bind(self):  # HTTPServer's asks socket.getfqdn (a reverse lookup)
            socketserver.TCPServer.server_bind(self)
            self.server_name, self.server_port = self.server_address[:2]

    site = Site(respond)
    server = Server(("127.0.0.1", 0), Handler)
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
