"""An observer worker's metrics: runs, commits, conflicts, redos, failures, backlog, latency.

Layer: tools. Reads ``caffeine.percolator.worker.Worker``'s counters and the storage
counters of its cluster; counts pending notifications with ``caffeine.percolator.engine_status``.

Exported (all names start with ``caffeine_``):

- ``observer_<event>_total`` counters, read from the worker's own counters at each scrape:
  runs, commits, conflicts, redos, failures, retries, stale (notified, nothing new to run
  for), and ``notifications_cleared_total``;
- ``observer_transaction_seconds{observer,outcome}``: a histogram of every observer run's
  transaction, from its begin to its commit or rollback (outcome: done, conflict, failed);
- ``storage_<counter>_total``: the storage layer's counters (row transactions, CAS
  conflicts, unknown outcomes, reconnects, retried calls, ...);
- ``notification_backlog{table}`` and ``notification_oldest_age_seconds{table}``: the
  notifications waiting in each observed table (a scan of the notify family, at most one
  per ``backlog_every_s``, so frequent scrapes stay cheap);
- the process's CPU, memory and file descriptors (prometheus-client's process collector).
"""

from __future__ import annotations

import re
import threading
import time

from prometheus_client import CollectorRegistry, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from caffeine.percolator.engine_status import pending_notifications

# Observer transactions take milliseconds (a no-op run) to seconds (a lock wait, a big page).
LATENCY_BUCKETS = (0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# The worker's counters, as Prometheus names them, with their help text.
WORKER_COUNTERS = {
    "runs": ("observer_runs", "observer runs started (strong observers: for a change newer than their ack)"),
    "inline": ("observer_inline_runs", "observer runs done inside the transaction of the run that changed their column (Observer.inline)"),
    "commits": ("observer_commits", "observer transactions committed"),
    "conflicts": ("observer_conflicts", "observer runs that lost a write conflict or timed out waiting on a lock (retried)"),
    "redos": ("observer_redos", "post-commit work redone for an acknowledged change whose notification remained"),
    "failures": ("observer_failures", "observer runs that raised (retried with backoff)"),
    "retries": ("observer_retries", "observer runs scheduled again after a conflict or failure"),
    "stale": ("observer_stale", "notifications with no change newer than the observer's ack"),
    "cleared": ("notifications_cleared", "notifications deleted after their runs"),
    "passes": ("notification_listings", "listings of an observed table's notify cells (scan passes)"),
    "listed": ("notifications_listed", "notify cells those listings walked, the ones still settling included"),
    "listed_settling": ("notifications_listed_settling", "listed notify cells still within their observers' settle time"),
}


def _metric_name(text: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", text)


class WorkerCollector(Collector):
    """Reads a worker's and its storage's counters, and the backlog, when scraped."""

    def __init__(self, worker, *, backlog_every_s: float = 5.0) -> None:
        self.worker = worker
        self.backlog_every_s = backlog_every_s
        self._backlog: dict[str, tuple[int, float | None]] = {}
        self._backlog_at = float("-inf")
        self._backlog_lock = threading.Lock()

    def collect(self):
        counts = self.worker.metrics.as_dict()
        for field, (name, doc) in WORKER_COUNTERS.items():
            family = CounterMetricFamily(f"caffeine_{name}", doc)
            family.add_metric([], counts.get(field, 0))
            yield family
        for field, value in self.worker.cluster.stats.as_dict().items():
            family = CounterMetricFamily(f"caffeine_storage_{_metric_name(field)}",
                                         f"storage layer counter {field!r} of this process")
            family.add_metric([], value)
            yield family
        backlog = GaugeMetricFamily("caffeine_notification_backlog",
                                    "notifications waiting in an observed table", labels=["table"])
        oldest = GaugeMetricFamily("caffeine_notification_oldest_age_seconds",
                                   "age of the oldest waiting notification of an observed table", labels=["table"])
        for table, (count, age) in self._current_backlog().items():
            backlog.add_metric([table], count)
            if age is not None:
                oldest.add_metric([table], age)
        yield backlog
        yield oldest

    def _current_backlog(self) -> dict[str, tuple[int, float | None]]:
        with self._backlog_lock:
            if time.monotonic() - self._backlog_at >= self.backlog_every_s:
                fresh = {}
                for table in self.worker.app.observed_tables:
                    pending = pending_notifications(self.worker.store, [table])
                    fresh[table] = (pending.count, pending.oldest_age_s())
                self._backlog, self._backlog_at = fresh, time.monotonic()
            return dict(self._backlog)


def worker_registry(worker, *, backlog_every_s: float = 5.0) -> CollectorRegistry:
    """A registry holding everything above for ``worker``; it starts timing runs at once."""
    registry = CollectorRegistry()
    registry.register(WorkerCollector(worker, backlog_every_s=backlog_every_s))
    latency = Histogram("caffeine_observer_transaction_seconds",
                        "observer run transactions, from begin to commit or rollback",
                        ["observer", "outcome"], buckets=LATENCY_BUCKETS, registry=registry)
    worker.metrics.on_run(lambda observer, outcome, seconds: latency.labels(observer, outcome).observe(seconds))
    ProcessCollector(registry=registry)
    return registry
