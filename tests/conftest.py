"""Shared fixtures: the real HBase (as configured by CAFFEINE_* settings) and its in-memory twin.

Every test session uses its own table prefix (``support.session.SESSION_PREFIX``), so runs
never see each other's tables, and drops what it created at the end. When HBase is not
reachable, storage tests fail under CI (``CI=true``) and are skipped with a reason elsewhere, so
a developer without a running HBase still gets the pure tests.

The long kill and fault tests (``faults/``, ``cluster/``) share three more: ``children``
(client processes, ``tests/support/<script>.py``, SIGKILLed at teardown), ``workers``
(``caffeine worker`` processes running an application of ``tests/support``, stopped at
teardown) and ``say`` (progress lines timed from the test's start; ``pytest -s`` shows them).

Helpers a test imports live in ``tests/support`` (``from support.session import ...``), never
here: each folder may have a conftest of its own, and a module named ``conftest`` is not one
thing to import.
"""

from __future__ import annotations

import functools
import os
import tempfile
import time
import uuid

import pytest

from caffeine.config import load_settings
from caffeine.storage.memory import MemoryStore
from support.child_helpers import Child
from support.session import (
    SESSION_PREFIX, close_keeping_store, drop_all, fresh_hbase_cluster, oracle_for, session_settings,
)
from support.workers import WorkerProcess, stop_workers

# Time per test file, in the summary and (CAFFEINE_TEST_TIMINGS) as each file ends; and what
# runs together or alone when the suite runs in parallel (pytest -n).
pytest_plugins = ["support.file_timings", "support.parallel_runs"]

# Commands run by the tests (in-process or as children) log to a file of the session's own,
# not to the runtime's logs directory.
os.environ.setdefault("CAFFEINE_CLI_LOG", os.path.join(tempfile.gettempdir(), f"caffeine-tests-{SESSION_PREFIX}cli.log"))


@functools.lru_cache(maxsize=1)
def _infrastructure() -> tuple[frozenset, frozenset]:
    """The configured storage and oracle hosts (a name in a Docker setup) and their addresses:
    the only places off loopback a test may reach. Resolved once per session."""
    import socket

    settings = load_settings()
    hosts = {settings.thrift1_host, settings.thrift2_host, settings.oracle_host}
    hosts |= {host for host, _ in settings.oracle_endpoints}
    addresses: set[str] = set()
    for host in hosts:
        try:
            addresses |= {str(info[4][0]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)}
        except OSError:
            pass
    return frozenset(hosts), frozenset(addresses)


@pytest.fixture(autouse=True)
def guard_escapes(monkeypatch):
    """Every test: a connection, UDP datagram or name lookup that would leave the machine (but
    for the configured storage and oracle hosts) fails the test (``network_stub.guard_sockets``);
    the list of what was caught."""
    from support.network_stub import guard_sockets

    hosts, addresses = _infrastructure()
    escaped: list = []
    guard_sockets(monkeypatch, escaped, hosts, addresses)
    yield escaped
    assert not escaped, f"traffic off loopback: {escaped}"


@pytest.fixture(scope="session")
def hbase_settings():
    return session_settings()


@pytest.fixture(scope="session")
def hbase_store(hbase_settings):
    from caffeine.storage.hbase import HBaseStore
    from caffeine.storage.errors import StorageError

    try:
        store = HBaseStore(hbase_settings)
        store.thrift1.retry_deadline_s = 5.0
        store.list_tables()
        store.thrift1.retry_deadline_s = 60.0
    except (StorageError, OSError) as exc:
        message = f"HBase is not reachable ({exc}); start it with `caffeine up`"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    yield store
    drop_all(store)
    store.close()


@pytest.fixture(params=["memory", "hbase"])
def store(request):
    """Each contract test runs once on the in-memory store and once on the real HBase."""
    if request.param == "memory":
        return MemoryStore()
    return request.getfixturevalue("hbase_store")


@pytest.fixture
def table_name(request):
    """A fresh table name per test (tables live in the session's prefix)."""
    return "t" + uuid.uuid4().hex[:10]


@pytest.fixture(params=["memory", "hbase"])
def cluster(request):
    """A transaction client over the in-memory store, and one over the real HBase.

    The HBase one uses the real timestamp oracle when ``CAFFEINE_TEST_ORACLE`` is not "inprocess".
    """
    from caffeine.percolator.testing import memory_cluster

    if request.param == "memory":
        c = memory_cluster()
    else:
        from caffeine.percolator.cluster import Cluster

        store = request.getfixturevalue("hbase_store")
        settings = request.getfixturevalue("hbase_settings")
        c = Cluster(store, oracle_for(settings), settings)
        c.close = close_keeping_store(c)  # the session's store outlives each test
    yield c
    c.close()


@pytest.fixture(params=["memory", "hbase"])
def fresh_cluster(request):
    """Like ``cluster``, but with a table prefix of its own (the application's fixed table
    names, such as ``repository``, then start empty); its tables are dropped afterwards."""
    from caffeine.percolator.testing import memory_cluster

    if request.param == "memory":
        c = memory_cluster()
        yield c
        c.close()
        return
    request.getfixturevalue("hbase_store")  # skips/fails early when HBase is down
    with fresh_hbase_cluster() as c:
        yield c


# -- processes of the long kill and fault tests (faults/, cluster/) ---------------------------


@pytest.fixture
def children():
    """Start children with ``children(script, args, env)``; all are killed at teardown."""
    started: list[Child] = []

    def start(script: str, args: list[str], env: dict[str, str], *, name: str = "") -> Child:
        child = Child(script, args, env, name=name)
        started.append(child)
        return child

    yield start
    for child in started:
        child.close()


@pytest.fixture
def workers():
    """Start workers with ``workers("observer_apps.py:chain", env, threads=4)``; every one
    still running is stopped at teardown."""
    started: list[WorkerProcess] = []

    def start(app: str, env: dict[str, str], *, threads: int = 4) -> WorkerProcess:
        worker = WorkerProcess(app, env, threads)
        started.append(worker)
        return worker

    yield start
    stop_workers(started)
    for worker in started:
        worker.close()


@pytest.fixture
def say():
    """``say(message)``: print a progress line with the seconds since the test began."""
    t0 = time.monotonic()

    def say(message: str) -> None:
        print(f"[{time.monotonic() - t0:5.1f}s] {message}", flush=True)

    return say
