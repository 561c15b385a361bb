"""``/metrics`` over HTTP for a process that has no web server of its own (a worker).

Layer: tools. Imports prometheus-client only.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server


def serve(registry: CollectorRegistry, port: int, host: str = "127.0.0.1"):
    """Serve ``registry`` in the Prometheus text format on ``http://host:port/metrics`` from a
    daemon thread; returns the server (``shutdown()`` stops it). Port 0 picks a free one
    (``server.server_port`` says which)."""
    server, _thread = start_http_server(port, addr=host, registry=registry)
    return server
