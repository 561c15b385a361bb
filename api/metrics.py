"""``GET /metrics``: the search service's Prometheus metrics (prometheus-client).

Layer: api. Each app keeps its own ``CollectorRegistry`` (``app.state.metrics``), so apps
built side by side in one process (tests) never share counts. Exported:

- ``caffeine_search_seconds{status}``: ``/search`` requests, from arrival to the last byte
  of the answer, by HTTP status;
- ``caffeine_http_request_seconds{route,method,status}``: every request, by route template
  (``/dups/{fingerprint}``, not the path asked for, so the label set stays small;
  ``unmatched`` for paths no route serves);
- the process's CPU, memory and file descriptors.

With ``caffeine serve --workers N`` each worker process counts its own requests; a scrape
reaches one of them.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, ProcessCollector, generate_latest

# A cached query answers in about a millisecond; the first read of a common term's postings
# takes a few hundred.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

router = APIRouter()


class ServiceMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.search = Histogram("caffeine_search_seconds", "/search requests, arrival to answer sent",
                                ["status"], buckets=LATENCY_BUCKETS, registry=self.registry)
        self.requests = Histogram("caffeine_http_request_seconds", "HTTP requests by route template",
                                  ["route", "method", "status"], buckets=LATENCY_BUCKETS, registry=self.registry)
        ProcessCollector(registry=self.registry)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.labels(route, method, str(status)).observe(seconds)
        if route == "/search":
            self.search.labels(str(status)).observe(seconds)


class TimingMiddleware:
    """Times every HTTP request (plain ASGI: no per-request task or body buffering)."""

    def __init__(self, app, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500

        async def send_and_note(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            self.metrics.observe(template, scope.get("method", ""), status, time.perf_counter() - started)


def install(app) -> None:
    """Give ``app`` its metrics, the timing middleware and the ``/metrics`` route."""
    app.state.metrics = ServiceMetrics()
    app.add_middleware(TimingMiddleware, metrics=app.state.metrics)
    app.include_router(router)


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    """The Prometheus text exposition of this process's metrics."""
    return Response(generate_latest(request.app.state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
