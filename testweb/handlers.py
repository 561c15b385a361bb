"""The test web's HTTP plumbing: a threading server on 127.0.0.1 and its request handlers.

Layer: testweb. Imports the standard library and the pure ``testweb.generated``.
``testweb.web.TestWeb`` starts a ``Server`` with a handler class bound to itself (``web``):
``GeneratedHandler`` answers from the generated web at the current version (and
``POST /_mutate?version=V``, ``GET /_version``), ``DirectoryHandler`` serves a directory's
files. Both record every path requested. What a handler asks of its web is ``ServedWeb``,
which ``TestWeb`` is, so this module imports nothing of ``testweb.web``.
"""

from __future__ import annotations

import http.server
import sys
import threading
import urllib.parse
from typing import Protocol

from testweb.generated import GeneratedWeb
from testweb.response import Response

__all__ = ["Server", "ServedWeb", "GeneratedHandler", "DirectoryHandler"]


class ServedWeb(Protocol):
    """What the handlers use of the web they serve (``testweb.web.TestWeb``)."""

    generated: GeneratedWeb | None  # None when it serves a directory
    version: int
    stopping: threading.Event  # set when the web stops: slow answers stop waiting

    def note_request(self, path: str) -> None: ...

    def set_version(self, version: int) -> None: ...


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # Idle keep-alive connections hold a handler thread; closing must not wait for them.
    block_on_close = False

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return  # the client hung up (size cap, timeout): expected here
        super().handle_error(request, client_address)


class GeneratedHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "CaffeineTestWeb/1"
    timeout = 30  # idle keep-alive connections end eventually
    web: ServedWeb

    def log_message(self, format, *args):  # quiet: tests read TestWeb.requests instead
        pass

    def do_GET(self):
        self._answer(head=False)

    def do_HEAD(self):
        self._answer(head=True)

    def do_POST(self):
        parts = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if parts.path == "/_mutate":
            query = urllib.parse.parse_qs(parts.query)
            try:
                version = int(query.get("version", [""])[0])
            except ValueError:
                self._send(Response(400, "text/plain", b"version=<int> required\n"), head=False)
                return
            self.web.set_version(version)
            self._send(Response(200, "text/plain", f"version {version}\n".encode()), head=False)
            return
        self._send(Response(405, "text/plain", b"method not allowed\n"), head=False)

    def _answer(self, head: bool) -> None:
        path = urllib.parse.urlsplit(self.path).path
        self.web.note_request(path)
        if path == "/_version":
            self._send(Response(200, "text/plain", f"{self.web.version}\n".encode()), head)
            return
        self._send(self.web.generated.respond(path, self.web.version), head)

    def _send(self, r: Response, head: bool) -> None:
        if r.raw is not None:
            self.wfile.write(r.raw)
            self.close_connection = True
            return
        if r.sleep_s and self.web.stopping.wait(r.sleep_s):
            self.close_connection = True
            return
        length = r.stream_bytes or len(r.body)
        self.send_response(r.status)
        if r.content_type:
            self.send_header("Content-Type", r.content_type)
        for name, value in r.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length + r.short_by))
        if r.short_by:
            self.send_header("Connection", "close")
        self.end_headers()
        if head:
            return
        if r.stream_bytes:
            self._stream_html(r.stream_bytes)
        else:
            self.wfile.write(r.body)
        if r.short_by:
            self.close_connection = True

    def _stream_html(self, n: int) -> None:
        head = b"<html><head><title>Huge</title></head><body>\n"
        chunk = b"<p>" + b"huge page filler words repeated " * 30 + b"</p>\n"
        self.wfile.write(head)
        sent = len(head)
        while sent < n:
            piece = chunk[: n - sent]
            self.wfile.write(piece)
            sent += len(piece)


class DirectoryHandler(http.server.SimpleHTTPRequestHandler):
    web: ServedWeb

    def log_message(self, format, *args):
        pass

    def send_head(self):
        self.web.note_request(urllib.parse.urlsplit(self.path).path)
        return super().send_head()

