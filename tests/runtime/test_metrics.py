"""``/metrics`` of the observer workers and of the search service, scraped over HTTP and parsed
with ``prometheus_client.parser``; on the real HBase."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request
import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from caffeine.metrics import serve
from caffeine.metrics.worker import worker_registry
from caffeine.percolator import Application, Observer
from caffeine.percolator.worker import Worker
from support.cli_helpers import ROOT, cli_env
from support.session import SESSION_PREFIX
from support.observer_apps import chain_app
from support.ports import free_port

pytestmark = pytest.mark.hbase


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    """Every sample of the exposition at ``url``: (name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        text = response.read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_a_worker_exports_runs_commits_failures_backlog_and_latency(fresh_cluster):
    cluster = fresh_cluster
    table = "m_" + uuid.uuid4().hex[:6]
    chain = chain_app(table)

    def broken(txn, row, column):
        raise RuntimeError("parser bug")

    app = Application("metrics", [*chain.observers, Observer("broken", table, "x", broken)])
    app.install(cluster)
    worker = Worker(cluster, app, threads=2)
    server = serve(worker_registry(worker, backlog_every_s=0), 0)
    url = f"http://127.0.0.1:{server.server_port}/metrics"
    try:
        rows = [b"r%d" % i for i in range(8)]
        with cluster.begin() as txn:
            for row in rows:
                txn.set(table, row, "a", b"v")
            txn.set(table, b"bad", "x", b"1")
        before = scrape(url)
        assert before[("caffeine_notification_backlog", (("table", table),))] == len(rows) + 1
        assert before[("caffeine_notification_oldest_age_seconds", (("table", table),))] >= 0
        assert before[("caffeine_observer_runs_total", ())] == 0

        worker.start()
        deadline = time.monotonic() + 120
        while True:
            after = scrape(url)
            if (after[("caffeine_observer_commits_total", ())] >= 3 * len(rows)
                    and after[("caffeine_observer_failures_total", ())] >= 1
                    and after[("caffeine_notification_backlog", (("table", table),))] == 1):
                break  # only the broken observer's notification is left
            assert time.monotonic() < deadline, after
            time.sleep(0.2)
    finally:
        worker.stop()
        server.shutdown()
    assert after[("caffeine_observer_runs_total", ())] >= 3 * len(rows)
    assert after[("caffeine_observer_commits_total", ())] == 3 * len(rows)
    for observer in ("A", "B", "C"):
        count = after[("caffeine_observer_transaction_seconds_count", (("observer", observer), ("outcome", "done")))]
        assert count >= len(rows)
        total = after[("caffeine_observer_transaction_seconds_sum", (("observer", observer), ("outcome", "done")))]
        assert 0 < total < 60 * count
    assert after[("caffeine_observer_transaction_seconds_count", (("observer", "broken"), ("outcome", "failed")))] >= 1
    # The commit's row steps: row transactions (thrift-cas) or checked writes (coprocessor).
    assert (after[("caffeine_storage_row_transactions_total", ())]
            + after.get(("caffeine_storage_checked_writes_total", ()), 0)) > 0
    for name in ("caffeine_observer_conflicts_total", "caffeine_observer_redos_total", "caffeine_observer_stale_total"):
        assert name in {k[0] for k in after}
    # Every pass lists the table: at least the rows it ran, and never a settling one (none settles).
    assert after[("caffeine_notification_listings_total", ())] >= 1
    assert after[("caffeine_notifications_listed_total", ())] >= len(rows)
    assert after[("caffeine_notifications_listed_settling_total", ())] == 0
    assert after[("process_cpu_seconds_total", ())] > 0


def test_caffeine_worker_metrics_port_serves_metrics(hbase_store):
    table = "mw_" + uuid.uuid4().hex[:6]
    port = free_port()
    env = cli_env(table_prefix=SESSION_PREFIX, test_chain_table=table)
    child = subprocess.Popen(
        [sys.executable, "-m", "caffeine.commands", "worker", "--app", "tests/support/observer_apps.py:chain",
         "--threads", "2", "--metrics-port", str(port)],
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                samples = scrape(f"http://127.0.0.1:{port}/metrics")
                break
            except OSError:
                assert child.poll() is None, child.communicate()
                assert time.monotonic() < deadline
                time.sleep(0.3)
        assert samples[("caffeine_notification_backlog", (("table", table),))] == 0
        assert ("caffeine_observer_runs_total", ()) in samples
    finally:
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert f"metrics on http://127.0.0.1:{port}/metrics" in err


@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_the_search_service_exports_search_latency(fresh_cluster):
    from fastapi.testclient import TestClient

    from api.dependencies import get_cluster
    from api.main import create_app
    from caffeine.search.settings import SearchSettings
    from caffeine.observers.app import application

    cluster = fresh_cluster
    if type(cluster.store).__name__ != "HBaseStore":
        pytest.skip("the HBase variant is the one that matters here")
    from caffeine.index.schema import DOCSTATS, DOCSTATS_FAMILY, POSTINGS, POSTINGS_FAMILY

    application.install(cluster)
    cluster.serving(POSTINGS, [POSTINGS_FAMILY])
    cluster.serving(DOCSTATS, [DOCSTATS_FAMILY])
    app = create_app(SearchSettings(stats_refresh_s=3600))
    app.dependency_overrides[get_cluster] = lambda: cluster
    with TestClient(app) as client:
        assert client.get("/search", params={"q": "espresso"}).status_code == 200
        assert client.get("/search", params={"q": "espresso crema"}).status_code == 200
        assert client.get("/search", params={"q": ""}).status_code == 422
        assert client.get("/dups/0123456789abcdef").status_code in (404, 422)
        assert client.get("/no/such/page").status_code == 404
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples = {}
    for family in text_string_to_metric_families(response.text):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    assert samples[("caffeine_search_seconds_count", (("status", "200"),))] == 2
    assert samples[("caffeine_search_seconds_count", (("status", "422"),))] == 1
    assert 0 < samples[("caffeine_search_seconds_sum", (("status", "200"),))] < 60
    routes = {dict(k[1]).get("route") for k in samples if k[0] == "caffeine_http_request_seconds_count"}
    assert {"/dups/{fingerprint}", "/search", "unmatched"} <= routes
    assert "/metrics" not in app.openapi()["paths"]
