"""Lazy lock cleanup between clients in one process (real processes: test_crash_recovery.py).

Two clients share a store and an oracle; "client B dies" is B's owner registration ending
(exactly what other clients observe of a dead process: its heartbeats stop).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from caffeine.percolator import testing as txn_steps
from caffeine.config import load_settings
from caffeine.percolator import CommitConflict, TransactionRolledBack
from caffeine.percolator.cluster import Cluster
from caffeine.percolator.testing import InProcessOracle, memory_store
from caffeine.storage.memory import MemoryStore
from support.percolator_helpers import must_locked, must_rolled_back, must_unlocked

TABLE = "locks"


@pytest.fixture(params=["memory", "hbase"])
def clients(request):
    if request.param == "memory":
        store, oracle, settings = memory_store(), InProcessOracle(), load_settings()
    else:
        from support.session import oracle_for

        store = request.getfixturevalue("hbase_store")
        settings = request.getfixturevalue("hbase_settings")
        oracle = oracle_for(settings)
    fast = settings.model_copy(update={"lock_ttl_ms": 400, "lock_wait_timeout_s": 10.0})
    a, b = Cluster(store, oracle, fast), Cluster(store, oracle, fast)
    a.create_table(TABLE)
    yield a, b, store
    for c in (a, b):
        c.executor.shutdown()
        if not c.owners._stop.is_set():
            c.owners.close()


def rows():
    base = uuid.uuid4().hex.encode()
    return b"p-" + base, b"s-" + base


def read(cluster, row, column="v"):
    with cluster.begin() as txn:
        return txn.get(TABLE, row, column)


def seed(cluster, p, s):
    with cluster.begin() as txn:
        txn.set(TABLE, p, "v", b"old")
        txn.set(TABLE, s, "v", b"old")


def test_a_secondary_whose_primary_committed_is_rolled_forward_by_a_reader(clients):
    a, b, store = clients
    p, s = rows()
    seed(a, p, s)
    txn = b.begin()
    txn.set(TABLE, p, "v", b"new")
    txn.set(TABLE, s, "v", b"new")
    txn_steps.prewrite(txn)
    txn_steps.commit_primary(txn)  # ...and B never commits the secondary
    must_locked(store, TABLE, s, "v", txn.start_ts)
    before = a.stats.extra.get("locks_rolled_forward", 0)
    assert read(a, s) == b"new"
    must_unlocked(store, TABLE, s, "v")
    assert a.stats.extra["locks_rolled_forward"] == before + 1


def test_a_dead_owners_primary_is_rolled_back_and_its_late_commit_fails(clients):
    a, b, store = clients
    p, s = rows()
    seed(a, p, s)
    txn = b.begin()
    txn.set(TABLE, p, "v", b"new")
    txn.set(TABLE, s, "v", b"new")
    txn_steps.prewrite(txn)
    b.owners.close()  # B's heartbeats stop: its owner is dead to everyone else
    assert read(a, s) == b"old"  # meets the secondary, settles the primary: rolled back
    must_rolled_back(store, TABLE, p, "v", txn.start_ts)
    must_unlocked(store, TABLE, s, "v")
    with pytest.raises(TransactionRolledBack):
        txn_steps.commit_primary(txn)
    assert (read(a, p), read(a, s)) == (b"old", b"old")


def test_an_expired_lock_of_an_unknown_owner_is_rolled_back(clients):
    a, b, store = clients
    p, s = rows()
    seed(a, p, s)
    txn = b.begin()
    txn.set(TABLE, p, "v", b"new")
    b.owners.owner = b"never-registered"
    txn_steps.prewrite(txn)
    time.sleep(0.5)  # past the 400 ms TTL
    assert read(a, p) == b"old"
    must_rolled_back(store, TABLE, p, "v", txn.start_ts)


def test_a_live_owners_lock_is_waited_on(clients):
    a, b, store = clients
    p, s = rows()
    seed(a, p, s)
    writer = b.begin()
    writer.set(TABLE, p, "v", b"new")
    txn_steps.prewrite(writer)
    reader = a.begin()  # starts after the prewrite: must wait for the writer's outcome
    result = {}

    def read_it():
        t0 = time.monotonic()
        result["value"] = reader.get(TABLE, p, "v")
        result["waited"] = time.monotonic() - t0

    thread = threading.Thread(target=read_it)
    thread.start()
    # A long commit: three times the 400 ms TTL, refreshing its primary lock as it goes,
    # so cleaners keep judging it alive.
    for _ in range(6):
        time.sleep(0.2)
        txn_steps.refresh_primary_lock(writer)
    assert thread.is_alive(), "the reader must still be waiting"
    txn_steps.commit_primary(writer)
    thread.join(timeout=10)
    assert result["value"] == b"old"  # the writer committed after the reader's start_ts
    assert result["waited"] >= 1.0
    assert read(a, p) == b"new"


def test_a_prewrite_that_outlives_the_ttl_keeps_its_primary_alive(clients, monkeypatch):
    """Locking many rows on a busy machine can take longer than the lock TTL: the writer
    refreshes its primary while the other rows are written, so a reader meeting its lock
    waits instead of rolling back a live transaction (which then had to start over)."""
    a, b, store = clients
    base = uuid.uuid4().hex.encode()
    primary, *others = [b"w-" + base + b"-%d" % i for i in range(4)]
    writer = b.begin()
    for key in (primary, *others):
        writer.set(TABLE, key, "v", b"new")
    # The secondaries' writes are slow (whichever backend sends them): each takes three
    # times the 400 ms TTL, after the primary is locked.
    row_transaction, apply_checked = store.row_transaction, store.apply_checked

    def slow_row_transaction(table, row, *args, **kwargs):
        result = row_transaction(table, row, *args, **kwargs)
        if row in others and threading.current_thread().name.startswith("caffeine-commit"):
            time.sleep(1.2)
        return result

    def slow_apply_checked(table, writes):
        result = apply_checked(table, writes)
        if set(writes) & set(others):
            time.sleep(1.2)
        return result

    monkeypatch.setattr(store, "row_transaction", slow_row_transaction)
    monkeypatch.setattr(store, "apply_checked", slow_apply_checked)
    outcome = {}

    def commit():
        try:
            writer.commit()
            outcome["committed"] = True
        except Exception as exc:  # noqa: BLE001 - the assertion below names it
            outcome["error"] = exc

    thread = threading.Thread(target=commit)
    thread.start()
    time.sleep(0.7)  # the primary's lock is older than its TTL by now, unless refreshed
    reader = a.begin()
    assert reader.get(TABLE, primary, "v") is None  # waited for the writer: committed after us
    thread.join(timeout=30)
    assert outcome == {"committed": True}, outcome
    assert all(read(a, key) == b"new" for key in (primary, *others))


def test_a_writer_meeting_a_dead_lock_cleans_it_and_proceeds(clients):
    a, b, store = clients
    p, s = rows()
    seed(a, p, s)
    stale = b.begin()
    stale.set(TABLE, p, "v", b"stale")
    txn_steps.prewrite(stale)
    b.owners.close()
    with a.begin() as txn:
        txn.set(TABLE, p, "v", b"fresh")
    assert read(a, p) == b"fresh"


def test_a_writer_meeting_a_live_lock_aborts(clients):
    a, b, store = clients
    p, s = rows()
    seed(a, p, s)
    holder = b.begin()
    holder.set(TABLE, p, "v", b"holder")
    txn_steps.prewrite(holder)
    txn = a.begin()
    txn.set(TABLE, p, "v", b"loser")
    with pytest.raises(CommitConflict):
        txn.commit()
    txn_steps.commit_primary(holder)
    assert read(a, p) == b"holder"
