"""The region server probe (``health.probe_regionserver``) against a stand-in ``/jmx``.

A region server that has not reported for duty answers ``/jmx`` with no beans. ``caffeine
status`` asks a few times (the beans also vanish for a moment while HBase restarts its
metrics); ``caffeine up``'s wait polls every server anyway, so there one request per poll is
enough, and each retry would only delay the poll's look at the other servers.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from caffeine.runtime import health


@pytest.fixture
def jmx():
    """(port, requests seen, beans to answer): a loopback ``/jmx`` stand-in."""
    state = {"requests": 0, "beans": []}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            state["requests"] += 1
            body = json.dumps({"beans": state["beans"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], state
    finally:
        server.shutdown()
        server.server_close()


def test_a_server_not_yet_reporting_is_asked_again_by_default(jmx):
    port, state = jmx
    ok, detail, metrics = health.probe_regionserver("127.0.0.1", port, timeout_s=3.0)
    assert not ok and "not yet reported" in detail and metrics == {}
    assert state["requests"] == health.JMX_ATTEMPTS


def test_a_poll_asks_once_and_does_not_wait(jmx):
    port, state = jmx
    began = time.monotonic()
    ok, detail, _ = health.probe_regionserver("127.0.0.1", port, timeout_s=3.0, attempts=1)
    assert not ok and "not yet reported" in detail
    assert state["requests"] == 1
    assert time.monotonic() - began < health.JMX_PAUSE_S


def test_a_reporting_server_answers_its_counts(jmx):
    port, state = jmx
    state["beans"] = [{"regionCount": 7, "totalRequestCount": 40, "readRequestCount": 30, "writeRequestCount": 10}]
    ok, detail, metrics = health.probe_regionserver("127.0.0.1", port, timeout_s=3.0, attempts=1)
    assert ok and metrics["regions"] == 7 and "7 regions" in detail
    assert state["requests"] == 1
