"""The observer registry: installed applications' observed columns live in the deployment.

A process that never imports an application still sets the notify cells of the columns it
observes (``caffeine.percolator.registry``): in memory, between two clusters over one store;
on HBase, a child process writing a page while this process runs the indexing application.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from caffeine.percolator import Application, Observer
from caffeine.percolator.layout import NOTIFY, create_table
from caffeine.percolator.registry import TABLE, AppConfig, read_all
from caffeine.percolator.testing import memory_cluster, memory_store
from caffeine.storage import ReadSpec
from support import ROOT


def _noop(txn, row, column):
    pass


def app(name="counting", table="t", columns=("a",), tables=()):
    return Application(name, [Observer(f"on-{c}", table, c, _noop) for c in columns], tables=tables)


def notified(store, table) -> dict[bytes, list[str]]:
    return {row.key: sorted(q.decode() for q in row.family(NOTIFY))
            for row in store.scan(table, spec=ReadSpec(families=(NOTIFY,)))}


@pytest.fixture
def connect():
    """``connect(**settings)``: another cluster (another process, as far as the protocol can
    tell) over one shared in-memory store, ``connect.store``."""
    from support.session import close_keeping_store

    store = memory_store()
    opened = []

    def open_cluster(**settings):
        opened.append(memory_cluster(store, **settings))
        return opened[-1]

    open_cluster.store = store
    yield open_cluster
    for cluster in opened:
        close_keeping_store(cluster)()


def test_install_records_the_application_and_reinstalling_changes_nothing(connect):
    cluster = connect()
    app(tables=["extra"]).install(cluster)
    assert read_all(connect.store) == {"counting": AppConfig(frozenset({("t", "a")}), ("extra", "t"))}
    assert cluster.install_observers("counting", {("t", "a")}, ["t", "extra"]) is False
    assert {"t", "extra"} <= set(connect.store.list_tables())


def test_an_install_replaces_its_own_record_and_other_applications_add_up(connect):
    cluster = connect()
    app(columns=("a", "b")).install(cluster)
    app(name="other", table="u", columns=("x",)).install(cluster)
    app(columns=("b", "c")).install(cluster)  # the new version of "counting": no more "a"
    assert set(read_all(connect.store)) == {"counting", "other"}
    assert cluster.notify_columns("t", ["a", "b", "c"]) == ["b", "c"]
    assert cluster.notify_columns("u", ["x"]) == ["x"]
    assert cluster.observed_tables() == ["t", "u"]


def test_a_second_cluster_sets_notify_cells_without_installing(connect):
    app().install(connect())
    writer = connect()  # a process that never saw the application
    assert writer.observed_tables() == ["t"]
    with writer.begin() as txn:
        txn.set("t", b"r1", "a", b"1")
        txn.set("t", b"r1", "z", b"1")  # not observed
    assert notified(connect.store, "t") == {b"r1": ["a"]}


def test_a_cluster_connected_before_the_install_takes_it_up_within_its_max_age(connect):
    early, installer = connect(heartbeat_interval_ms=50), connect(heartbeat_interval_ms=50)
    create_table(connect.store, "t")
    assert early.notify_columns("t", ["a"]) == []
    app().install(installer)
    time.sleep(2 * early.observer_registry.max_age_ms / 1000)
    with early.begin() as txn:
        txn.set("t", b"r", "a", b"1")
    assert notified(connect.store, "t") == {b"r": ["a"]}


def test_a_client_connected_before_the_install_notifies_as_soon_as_install_returns(connect):
    """A writer connected before ``Application.install`` must not commit a write to a newly
    observed column without its notification once the install has returned: nothing would
    ever observe that change."""
    early, installer = connect(), connect()
    create_table(connect.store, "t")
    assert early.notify_columns("t", ["a"]) == []  # its copy, read before the install
    app().install(installer)
    with early.begin() as txn:
        txn.set("t", b"r", "a", b"1")
    assert notified(connect.store, "t") == {b"r": ["a"]}


def test_observe_column_stays_in_its_process(connect):
    one, other = connect(), connect()
    one.observe_column("t", "a")
    app(name="other", table="u", columns=("x",)).install(one)  # its refresh keeps the column
    assert one.notify_columns("t", ["a"]) == ["a"]
    assert other.notify_columns("t", ["a"]) == []
    assert read_all(connect.store).keys() == {"other"}


def test_without_any_install_nothing_is_observed_and_no_table_is_created(connect):
    assert connect().observed_tables() == []
    assert TABLE not in connect.store.list_tables()


def test_the_registry_table_name_is_reserved(connect):
    with pytest.raises(ValueError, match="reserved"):
        connect().create_table(TABLE)


# -- real HBase: a writer process that never imports the application ---------------------------

CHILD = """
import sys
from caffeine.index.schema import PAGE_META, REPOSITORY
from caffeine.percolator import connect
from crawler.fetch import FetchResult
from crawler.record import record_fetch

url, html = sys.argv[1], sys.argv[2].encode()
page = FetchResult(url=url, status=200, content_type="text/html; charset=utf-8", final_url=url,
                   error=None, truncated=False, content=html, fetched_at=1.0)
with connect() as cluster:
    assert cluster.notify_columns(REPOSITORY, [PAGE_META]) == [PAGE_META], "not learned from the registry"
    cluster.run(lambda txn: record_fetch(txn, REPOSITORY, page))
assert "caffeine.observers" not in sys.modules, "the writer imported the application"
print("recorded")
"""


@pytest.fixture
def own_deployment(hbase_store, hbase_settings):
    """A cluster over HBase with a table prefix of its own: its registry and the indexing
    application's fixed table names start empty."""
    from support.session import fresh_hbase_cluster
    from support.child_helpers import require_oracle

    require_oracle(hbase_settings)
    with fresh_hbase_cluster() as cluster:
        yield cluster


@pytest.mark.hbase
@pytest.mark.timeout(300)
def test_a_process_without_the_application_feeds_the_index(own_deployment):
    import os

    from caffeine.observers.app import application
    from caffeine.percolator.engine_status import wait_until_quiescent
    from caffeine.percolator.worker import Worker
    from support.reference_index import incremental

    cluster = own_deployment
    url = "http://registry.test/quokka.html"
    html = "<html><head><title>Quokka</title></head><body><p>zanzibarquokka smiles</p></body></html>"
    env = dict(os.environ, CAFFEINE_TABLE_PREFIX=cluster.settings.table_prefix,
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    with Worker(cluster, application, threads=2):  # the worker installs the application
        child = subprocess.run([sys.executable, "-c", CHILD, url, html], cwd=ROOT, env=env,
                               capture_output=True, text=True, timeout=120)
        assert child.returncode == 0, child.stderr
        assert child.stdout.split() == ["recorded"]
        wait_until_quiescent(cluster, cluster.observed_tables(), timeout_s=120, poll_s=0.1)
    index = incremental(cluster)
    assert url in index["docs"]
    assert any(url in posting for posting in index["postings"].get("zanzibarquokka", {}))


@pytest.mark.hbase
def test_on_hbase_a_client_connected_before_the_install_notifies_once_it_returns(own_deployment):
    """The same over HBase, with a second client (another process, as far as the protocol can
    tell) whose copy of the registry is fresh when the install begins."""
    from caffeine.percolator.cluster import Cluster

    installer = own_deployment
    create_table(installer.store, "t")
    early = Cluster(installer.store, installer.oracle, installer.settings)
    try:
        assert early.notify_columns("t", ["a"]) == []
        app().install(installer)
        with early.begin() as txn:
            txn.set("t", b"r", "a", b"1")
        assert notified(installer.store, "t") == {b"r": ["a"]}
    finally:  # the store and the oracle client are the installer's
        early.executor.shutdown(wait=True)
        early.owners.close()
