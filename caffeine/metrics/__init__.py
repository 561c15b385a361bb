"""Prometheus metrics of Caffeine's processes (``prometheus-client``).

Layer: tools. ``worker`` exports an observer worker's counters, its transactions' latency and
the notification backlog; ``api.metrics`` does the search service's. Each process keeps its
own ``CollectorRegistry`` (not the library's global one), so several workers or apps in one
process, as in tests, never collide; ``serve`` puts one on an HTTP port as ``/metrics``.
"""

from caffeine.metrics.http import serve

__all__ = ["serve"]
