"""Both commit backends pass the whole protocol suite, and ``auto`` picks the right one.

The test session itself runs with the ``committer`` setting as it is (``auto``: the
coprocessor, which ``caffeine up`` loads; in-memory clusters run its Python model). The
protocol suite (isolation, lock recovery, crash recovery, the bank, the ambiguous-fault and
fault-proxy harnesses, HBase kill, GC, observers) then runs again in child pytests with
``CAFFEINE_COMMITTER=thrift-cas``, against the same HBase: every client there uses
read + check-and-mutate, with the coprocessor loaded but unused, as on a managed HBase. The
files that kill or restart the runtime's servers run in a child of their own, alone.
"""

from __future__ import annotations

import os
import uuid

import pytest

from caffeine.percolator import backends
from caffeine.percolator.backends import BackendUnavailable
from caffeine.percolator.backends.cas import CasCommitter
from caffeine.percolator.backends.coprocessor import CoprocessorCommitter
from caffeine.percolator.steps import server
from caffeine.storage import Refusal
from caffeine.storage.memory import MemoryStore
from support.child_sessions import run_child_session

PROTOCOL_SUITE = [
    "tests/protocol/test_isolation.py", "tests/protocol/test_lock_recovery.py", "tests/faults/test_crash_recovery.py",
    "tests/faults/test_ambiguous_faults.py", "tests/faults/test_faults_hbase.py", "tests/protocol/test_gc.py",
    "tests/protocol/test_observers.py", "tests/faults/test_observer_processes.py",
]
# The part of it that kills or restarts the shared runtime's servers: it runs alone
# (tests/support/parallel_runs.py), the rest beside other tests.
PROTOCOL_SUITE_RESTARTS = ["tests/faults/test_bank.py", "tests/faults/test_hbase_kill.py"]


def _store_with_owners(row_step=None):
    from caffeine.percolator.owners import TABLE, ensure_table

    store = MemoryStore(row_step=row_step)
    ensure_table(store)
    return store, TABLE


def test_auto_picks_the_coprocessor_when_the_store_runs_it_and_cas_otherwise():
    store, owners = _store_with_owners(server.row_step)
    assert isinstance(backends.choose("auto", store, owners), CoprocessorCommitter)
    store, owners = _store_with_owners()
    assert isinstance(backends.choose("auto", store, owners), CasCommitter)
    assert isinstance(backends.choose("thrift-cas", store, owners), CasCommitter)


@pytest.mark.parametrize("name", list(backends.BACKENDS))
def test_each_backend_runs_where_its_memory_store_runs_what_it_needs(name):
    """Named, a backend is chosen on its own in-memory store (its probe, if any, finds its
    server side there), and the test helpers build that store for the name."""
    from caffeine.percolator.owners import TABLE, ensure_table
    from caffeine.percolator.testing import memory_cluster

    store = backends.BACKENDS[name].memory_store()
    ensure_table(store)
    assert backends.choose(name, store, TABLE).name == name
    with memory_cluster(committer=name) as cluster:
        assert cluster.committer.name == name


def test_asking_for_the_coprocessor_where_there_is_none_says_what_to_do():
    store, owners = _store_with_owners()
    with pytest.raises(BackendUnavailable, match="CAFFEINE_COMMITTER=auto"):
        backends.choose("coprocessor", store, owners)
    with pytest.raises(ValueError, match="committer must be one of"):
        backends.choose("fast", store, owners)


def test_a_coprocessor_of_protocol_1_is_refused_with_why():
    """Protocol 1 would let a step's puts through and ignore the deletes they carry."""

    def protocol_1(attributes, row, families):
        if dict(attributes).get(server.STEP) == server.PROBE:
            return Refusal("PROBE", ("1",))
        return server.row_step(attributes, row, families)

    store, owners = _store_with_owners(protocol_1)
    for backend in ("auto", "coprocessor"):
        with pytest.raises(BackendUnavailable, match="protocol 1 ignores the deletes.*CAFFEINE_COMMITTER=thrift-cas"):
            backends.choose(backend, store, owners)


class _CountingStore(MemoryStore):
    """The in-memory store running the row steps' model, recording its write calls: (call,
    table, rows, the step of a checked write)."""

    def __init__(self):
        super().__init__(row_step=server.row_step)
        self.calls: list[tuple[str, str, int, bytes | None]] = []

    def apply_checked(self, table, writes):
        step = dict(next(iter(writes.values())).attributes).get(server.STEP)
        self.calls.append(("apply_checked", table, len(writes), step))
        return super().apply_checked(table, writes)

    def put_rows(self, table, rows):
        self.calls.append(("put_rows", table, len(rows), None))
        return super().put_rows(table, rows)

    def delete_rows(self, table, rows):
        self.calls.append(("delete_rows", table, len(rows), None))
        return super().delete_rows(table, rows)


def test_the_coprocessor_commits_each_tables_secondaries_in_one_checked_call():
    """Secondaries: one checked commit step per row, all of a table's rows in one call
    (write record and lock delete atomic per row), no blind writes."""
    from caffeine.percolator.layout import LOCK, WRITE
    from caffeine.percolator.testing import memory_cluster
    from caffeine.storage import ReadSpec

    store = _CountingStore()
    cluster = memory_cluster(store, committer="coprocessor")
    for table in ("t1", "t2"):
        cluster.create_table(table)
    with cluster.begin() as txn:
        for row in (b"a", b"b", b"c"):
            txn.set("t1", row, "c", b"v")
        txn.set("t2", b"x", "c", b"v")
        store.calls.clear()
    commits = [(table, rows) for call, table, rows, step in store.calls if step == server.COMMIT]
    primary, secondaries = commits[0], commits[1:]
    assert primary[1] == 1
    assert len({table for table, _ in secondaries}) == len(secondaries), "one call per table"
    assert sum(rows for _, rows in secondaries) == 3
    assert not [c for c in store.calls if c[0] in ("put_rows", "delete_rows")]
    for table, row in (("t1", b"a"), ("t1", b"b"), ("t1", b"c"), ("t2", b"x")):
        cells = store.read_row(table, row, ReadSpec(versions=10))
        assert cells.latest(LOCK, b"c") is None and cells.latest(WRITE, b"c") is not None


@pytest.mark.hbase
def test_connect_uses_the_coprocessor_of_the_local_runtime(hbase_settings, hbase_store):
    from caffeine.percolator import connect

    with connect(hbase_settings.model_copy(update={"committer": "auto"})) as cluster:
        if os.environ.get("CI") == "true":
            assert cluster.committer.name == "coprocessor", "caffeine up must load the coprocessor"
        elif cluster.committer.name != "coprocessor":
            pytest.skip("the running HBase has no Caffeine coprocessor")
        cluster.create_table("backends")
        with cluster.begin() as txn:
            txn.set("backends", b"r", "c", b"v")
        with cluster.begin() as txn:
            assert txn.get("backends", b"r", "c") == b"v"


def _protocol_suite_with_thrift_cas(files: list[str]) -> None:
    if os.environ.get("CAFFEINE_COMMITTER") == "thrift-cas":
        pytest.skip("this session already runs with the thrift-cas committer")
    # A child session of its own, one test at a time: not a worker of this session's parallel
    # run (whose locks this test already holds).
    summary = run_child_session(files, {"CAFFEINE_COMMITTER": "thrift-cas"}, "thrift-cas")
    print(f"\nprotocol suite with CAFFEINE_COMMITTER=thrift-cas: {summary}")


@pytest.mark.hbase
@pytest.mark.timeout(2400)
def test_the_protocol_suite_passes_with_the_thrift_cas_committer(hbase_store):
    _protocol_suite_with_thrift_cas(PROTOCOL_SUITE)


@pytest.mark.hbase
@pytest.mark.timeout(1200)
@pytest.mark.exclusive
def test_the_protocol_suite_passes_with_the_thrift_cas_committer_through_restarts(hbase_store):
    _protocol_suite_with_thrift_cas(PROTOCOL_SUITE_RESTARTS)


@pytest.mark.hbase
@pytest.mark.parametrize("committer", ["coprocessor", "thrift-cas"])
def test_a_commit_deletes_every_lock_version_at_or_below_its_start(committer, hbase_settings, hbase_store):
    """Each committer's commit removes a column's lock with a marker over every version at or
    below its start_ts (``steps.common.unlock_committed``), so a read of the lock skips the
    column's whole history of written-and-deleted locks at once: a lock version written below
    it afterwards stays hidden, on the primary and on a secondary."""
    from caffeine.percolator import connect
    from caffeine.percolator.layout import LOCK, qualifier
    from caffeine.storage import Put, ReadSpec

    with connect(hbase_settings.model_copy(update={"committer": committer})) as cluster:
        if cluster.committer.name != committer:
            pytest.skip(f"the running HBase cannot run the {committer} committer")
        table = "unlocks"
        cluster.create_table(table)
        rows = [f"{uuid.uuid4().hex}-{role}".encode() for role in ("primary", "secondary")]
        txn = cluster.begin()
        for row in rows:
            txn.set(table, row, "c", b"v")
        txn.commit()
        start = txn.start_ts
        for row in rows:
            cluster.store.put_rows(table, {row: [Put(LOCK, qualifier("c"), start - 1, b"stale")]})
            left = cluster.store.read_row(table, row, ReadSpec(families=(LOCK,), versions=10))
            assert left.latest(LOCK, qualifier("c")) is None, (committer, row)
