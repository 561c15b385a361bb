"""Ambiguous faults: a reply lost after the server applied a write, a server-side error after
apply, a request re-sent by the pool, GC racing a half-committed transaction.

Each test pins one interleaving that once split a committed transaction or lost an update.
Faults are injected at the client (a wrapped Thrift2 connection, or an in-memory store that
fails on cue), so each interleaving is exact; ``tests/faults/test_faults_hbase.py`` injects the same
kinds of fault at random on the wire, and ``caffeine.sim`` explores interleavings by seed.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid

import pytest
from thriftpy2.transport import TTransportException

from caffeine.percolator import backends, testing as txn_steps
from caffeine.percolator import Application, Observer, TransactionRolledBack
from caffeine.percolator.gc import collect_garbage
from caffeine.percolator.layout import NOTIFY, WRITE, qualifier
from caffeine.percolator.worker import Worker
from caffeine.storage import Decision, FamilySpec, Put, ReadSpec
from caffeine.storage.errors import OutcomeUnknown, StorageUnavailable
from caffeine.storage.memory import MemoryStore
from support.session import require_coprocessor

TABLE = "faults"


def unique(prefix: str) -> bytes:
    return f"{prefix}-{uuid.uuid4().hex[:8]}".encode()


# -- fault injection at the client -------------------------------------------------------------
@contextlib.contextmanager
def thrift2_fault(store, method: str, fault, *, when=lambda args: True, after_apply=None, times=1):
    """Make the next ``times`` calls of Thrift2 ``method`` that match ``when(args)`` reach the
    server (which applies them) and then fail with ``fault`` instead of their reply.
    ``after_apply()`` runs between the two, on the test's thread: what other clients do
    while the reply is lost."""
    pool = store.thrift2
    connect = pool._connect
    left = [times]
    lock = threading.Lock()

    class Faulty:
        def __init__(self, client):
            self._client = client

        def __getattr__(self, name):
            attr = getattr(self._client, name)
            if name != method:
                return attr

            def call(*args):
                result = attr(*args)
                with lock:
                    hit = left[0] > 0 and when(args)
                    if hit:
                        left[0] -= 1
                if hit:
                    if after_apply is not None:
                        after_apply()
                    raise fault
                return result

            return call

        def close(self):
            self._client.close()

    pool.close_all()  # idle connections would bypass the wrapper
    pool._connect = lambda: Faulty(connect())
    try:
        yield left
    finally:
        pool._connect = connect
        pool.close_all()


def writes_write_records(args) -> bool:
    """checkAndMutate(table, row, family, qualifier, op, value, rowMutations) that puts a
    write record: a commit."""
    row_mutations = args[6]
    return any(
        m.put is not None and any(cv.family == WRITE for cv in m.put.columnValues)
        for m in row_mutations.mutations
    )


# Both commit backends: compare-and-set from the client, and the coprocessor's row steps
# (their Python model runs inside the in-memory store).
BACKENDS = pytest.mark.parametrize("committer", ["thrift-cas", "coprocessor"])


class FlakyMemoryStore(MemoryStore):
    """The in-memory store, failing on cue: ``lose_commit_replies`` commits (compare-and-sets
    that put a write record) apply and then raise OutcomeUnknown; right after each, the next
    ``outage_reads`` guarded reads raise StorageUnavailable (the re-read that would settle
    the outcome cannot reach the server)."""

    def __init__(self, *, lose_commit_replies=0, outage_reads=0, committer="thrift-cas"):
        super().__init__(row_step=backends.BACKENDS[committer].row_step)
        self.lose_commit_replies = lose_commit_replies
        self.outage_after_loss = outage_reads
        self.outage_reads = 0
        self.unknown_outcome_deadline_s = 0.0

    def _compare_and_apply(self, table, row, expected_guard, mutations, new_guard):
        applied = super()._compare_and_apply(table, row, expected_guard, mutations, new_guard)
        if applied and self.lose_commit_replies and any(isinstance(m, Put) and m.family == WRITE for m in mutations):
            self.lose_commit_replies -= 1
            self.outage_reads = self.outage_after_loss
            raise OutcomeUnknown("injected: reply lost after apply")
        return applied

    def _send_checked(self, table, writes, tokens):
        # The coprocessor backend's commit: a checked write putting a write record.
        answers = super()._send_checked(table, writes, tokens)
        if self.lose_commit_replies and any(
            answers.get(row, False) is None and any(isinstance(m, Put) and m.family == WRITE for m in w.mutations)
            for row, w in writes.items()
        ):
            self.lose_commit_replies -= 1
            self.outage_reads = self.outage_after_loss
            raise OutcomeUnknown("injected: reply lost after apply")
        return answers

    def _read_guarded(self, table, row, spec):
        if self.outage_reads:
            self.outage_reads -= 1
            raise StorageUnavailable("injected: server unreachable")
        return super()._read_guarded(table, row, spec)


def both(cluster, table, rows, column="v"):
    with cluster.begin() as txn:
        return [txn.get(table, row, column) for row in rows]


# -- 1. split commit after an unknown primary outcome -------------------------------------------
@BACKENDS
def test_a_primary_commit_whose_reply_is_lost_and_cannot_be_rechecked_is_never_split(committer):
    from caffeine.percolator.testing import memory_cluster

    # The commit's reply is lost, and the guard re-read that would settle it fails once.
    store = FlakyMemoryStore(lose_commit_replies=1, outage_reads=1, committer=committer)
    cluster = memory_cluster(store, committer=committer)
    try:
        cluster.create_table(TABLE)
        p, s = unique("p"), unique("s")

        def write(txn):
            txn.set(TABLE, p, "v", b"new")
            txn.set(TABLE, s, "v", b"new")

        try:
            cluster.run(write)
        except Exception:
            pass  # may or may not report success; what was written must be whole
        assert both(cluster, TABLE, [p, s]) == [b"new", b"new"]
    finally:
        cluster.close()


@BACKENDS
def test_a_commit_that_cannot_be_settled_raises_commit_unknown_and_readers_settle_it_whole(committer):
    from caffeine.percolator import CommitUnknown
    from caffeine.percolator.testing import memory_cluster

    # The reply is lost and the store stays unreachable past every re-read.
    store = FlakyMemoryStore(lose_commit_replies=1, outage_reads=10**9, committer=committer)
    cluster = memory_cluster(store, committer=committer)
    try:
        cluster.create_table(TABLE)
        p, s = unique("p"), unique("s")
        calls = []

        def write(txn):
            calls.append(1)
            txn.set(TABLE, p, "v", b"new")
            txn.set(TABLE, s, "v", b"new")

        with pytest.raises(CommitUnknown) as raised:
            cluster.run(write)
        assert len(calls) == 1, "the body of a transaction that may have committed ran again"
        assert raised.value.primary is not None
        store.outage_reads = 0  # the store is back: the first reader settles it, whole
        assert both(cluster, TABLE, [p, s]) == [b"new", b"new"]
    finally:
        cluster.close()


@BACKENDS
def test_an_observer_run_whose_commit_reply_is_lost_keeps_all_its_writes(committer):
    """The observer case: the ack is the primary; losing the commit's reply must not leave
    the ack committed and the observer's other writes rolled back (nothing would redo them)."""
    from caffeine.percolator.testing import memory_cluster

    store = FlakyMemoryStore(outage_reads=1, committer=committer)
    cluster = memory_cluster(store, committer=committer)
    table = "obs_" + uuid.uuid4().hex[:6]

    def copy(txn, row, column):
        txn.set(table, b"copy-" + row, "b", txn.get(table, row, "a"))

    app = Application("copying", [Observer("copy", table, "a", copy)])
    app.install(cluster)
    rows = [unique("r") for _ in range(5)]
    for row in rows:
        with cluster.begin() as txn:
            txn.set(table, row, "a", b"v-" + row)
    store.lose_commit_replies = 5  # every observer run's commit loses its reply once
    worker = Worker(cluster, app, threads=1).start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with cluster.begin() as txn:
                    copies = [txn.get(table, b"copy-" + row, "b") for row in rows]
                    notes = [txn.cluster.store.read_row(table, row, ReadSpec(families=(NOTIFY,))) for row in rows]
            except StorageUnavailable:
                # This reader may roll a half-committed run forward itself; its commit then
                # loses its reply too, and the injected outage is its own to ride out.
                copies = [None]
                time.sleep(0.05)
                continue
            if all(copies) and not any(notes):
                break
            time.sleep(0.05)
    finally:
        worker.stop()
        cluster.close()
    assert copies == [b"v-" + row for row in rows]


def puts_write_records(args) -> bool:
    """putMultiple(table, tputs) that puts a write record: a commit step (coprocessor; the
    primary's is the first)."""
    return any(any(cv.family == WRITE for cv in tput.columnValues) for tput in args[1])


@pytest.mark.hbase
@BACKENDS
def test_a_primary_commit_answered_with_an_error_after_apply_is_committed(hbase_store, hbase_settings, committer):
    from caffeine.percolator.cluster import Cluster
    from caffeine.percolator.testing import InProcessOracle

    if committer == "coprocessor":
        require_coprocessor(hbase_store)
    call, when = ("checkAndMutate", writes_write_records) if committer == "thrift-cas" else (
        "putMultiple", puts_write_records)
    cluster = Cluster(hbase_store, InProcessOracle(), hbase_settings, committer=backends.by_name(committer))
    try:
        cluster.create_table(TABLE)
        p, s = unique("p"), unique("s")

        def write(txn):
            txn.set(TABLE, p, "v", b"new")
            txn.set(TABLE, s, "v", b"new")

        error = hbase_store.t2.TIOError(message=b"injected: HBase client gave up after the region server applied")
        with thrift2_fault(hbase_store, call, error, when=when) as left:
            try:
                cluster.run(write)
            except Exception:
                pass
        assert left[0] == 0, "the fault was not injected"
        assert both(cluster, TABLE, [p, s]) == [b"new", b"new"]
    finally:
        cluster.executor.shutdown(wait=True)
        cluster.owners.close()


# -- 2. GC splits a committed transaction -------------------------------------------------------
def test_gc_never_splits_a_committed_transaction_whose_secondary_is_still_locked(cluster):
    cluster.create_table(TABLE)
    p, s = unique("p"), unique("s")
    with cluster.begin() as txn:
        txn.set(TABLE, p, "v", b"old")
        txn.set(TABLE, s, "v", b"old")
    txn = cluster.begin()
    txn.set(TABLE, p, "v", b"new")
    txn.set(TABLE, s, "v", b"new")
    txn_steps.prewrite(txn)
    txn_steps.commit_primary(txn)  # the committer dies here: its secondary stays locked
    with cluster.begin() as later:
        later.set(TABLE, p, "v", b"newer")  # a later write to the primary's cell
    collect_garbage(cluster, cluster.oracle.get_timestamp(), [TABLE], publish_wait_s=0)
    assert both(cluster, TABLE, [p, s]) == [b"newer", b"new"]


# -- 3. a rolled-back writer's notification clear erases an older writer's ----------------------
def test_clearing_a_rolled_back_writers_notification_keeps_an_older_writers(cluster):
    table = "notes_" + uuid.uuid4().hex[:6]
    runs = []
    app = Application("notes", [Observer("note", table, "c", lambda txn, row, column: runs.append(row))])
    app.install(cluster)
    row = unique("r")
    older = cluster.begin()  # B: starts first, writes last
    rolled = cluster.begin()  # A: writes the observed cell, then rolls back
    rolled.set(table, unique("elsewhere"), "p", b"a")  # its primary: not in the notified row
    rolled.set(table, row, "c", b"a")
    txn_steps.prewrite(rolled)
    cluster.resolver.settle(rolled.primary, rolled.start_ts)  # a cleaner rolls A back ...
    with pytest.raises(TransactionRolledBack):
        txn_steps.commit_primary(rolled)  # ... after A set its notification, before its commit point
    notify = cluster.store.read_row(table, row, ReadSpec(families=(NOTIFY,))).latest(NOTIFY, qualifier("c"))
    worker = Worker(cluster, app, threads=1)
    try:
        # The worker handles A's notification: nothing changed, A rolled back, so it clears.
        (observer,) = app.observers
        worker._in_flight.add((table, row, "c"))
        worker._task((table, row, "c"), notify.ts, notify.value, [observer])
        worker._clearer.flush()
        older.set(table, row, "c", b"b")
        older.commit()  # B's change: a rollback record is no conflict
        pending = cluster.store.read_row(table, row, ReadSpec(families=(NOTIFY,))).latest(NOTIFY, qualifier("c"))
        assert pending is not None, "B committed a change to an observed cell and no notification is left"
        worker.start()
        deadline = time.monotonic() + 30
        while not runs and time.monotonic() < deadline:
            time.sleep(0.05)
        assert runs == [row]
    finally:
        worker.stop()


# -- 4. a re-sent blind write reuses its row guard token ----------------------------------------
@pytest.mark.hbase
def test_a_resent_blind_write_gets_a_fresh_guard_token(hbase_store, table_name):
    store = hbase_store
    store.create_table(table_name, {b"d": FamilySpec(max_versions=1)})
    row = b"counter"
    store.mutate_row(table_name, row, [Put(b"d", b"n", 1, b"0")])
    spec = ReadSpec(columns=((b"d", b"n"),))

    def increment(snapshot):
        value = int(snapshot.latest(b"d", b"n").value) + 1
        return Decision([Put(b"d", b"n", 1, str(value).encode())], value)

    seen = {}

    def others_while_the_reply_is_lost():
        seen["z"] = store.read_rows_guarded(table_name, {row: spec})[row]  # Z reads
        store.row_transaction(table_name, row, spec, increment)  # Y increments 0 -> 1

    lost = TTransportException(message="injected: reply lost")
    with thrift2_fault(store, "mutateRow", lost, after_apply=others_while_the_reply_is_lost) as left:
        store.mutate_row(table_name, row, [Put(b"d", b"other", 1, b"x")])  # re-sent by the pool
    assert left[0] == 0
    store.row_transaction(table_name, row, spec, increment, guess=seen["z"])  # Z increments
    assert store.read_row(table_name, row, spec).latest(b"d", b"n").value == b"2"


@pytest.mark.hbase
def test_re_sent_batched_puts_get_fresh_guard_tokens(hbase_store, table_name):
    store = hbase_store
    store.create_table(table_name, {b"d": FamilySpec(max_versions=1)})
    row = b"counter"
    store.mutate_row(table_name, row, [Put(b"d", b"n", 1, b"0")])
    spec = ReadSpec(columns=((b"d", b"n"),))

    def increment(snapshot):
        value = int(snapshot.latest(b"d", b"n").value) + 1
        return Decision([Put(b"d", b"n", 1, str(value).encode())], value)

    seen = {}

    def others_while_the_reply_is_lost():
        seen["z"] = store.read_rows_guarded(table_name, {row: spec})[row]
        store.row_transaction(table_name, row, spec, increment)

    lost = TTransportException(message="injected: reply lost")
    with thrift2_fault(store, "putMultiple", lost, after_apply=others_while_the_reply_is_lost) as left:
        store.put_rows(table_name, {row: [Put(b"d", b"other", 1, b"x")]})
    assert left[0] == 0
    store.row_transaction(table_name, row, spec, increment, guess=seen["z"])
    assert store.read_row(table_name, row, spec).latest(b"d", b"n").value == b"2"


def test_notifications_are_written_at_commit_ts_naming_the_writer(cluster):
    """Versions ordered like the commits: what makes clearing up to a handled version safe."""
    from caffeine.percolator.records import decode_notify

    table = "notes_" + uuid.uuid4().hex[:6]
    Application("notes", [Observer("note", table, "c", lambda txn, row, column: None)]).install(cluster)
    primary, written, notified = unique("p"), unique("w"), unique("n")
    txn = cluster.begin()
    txn.set(table, primary, "c", b"1")  # the primary's own notification rides with the commit
    txn.set(table, written, "c", b"2")
    txn.notify(table, notified, "weak")
    txn_steps.prewrite(txn)
    for row, column in ((primary, "c"), (written, "c"), (notified, "weak")):
        assert cluster.store.read_row(table, row, ReadSpec(families=(NOTIFY,))).latest(NOTIFY, qualifier(column)) is None
    commit_ts = txn.commit()
    for row, column in ((primary, "c"), (written, "c"), (notified, "weak")):
        cell = cluster.store.read_row(table, row, ReadSpec(families=(NOTIFY,))).latest(NOTIFY, qualifier(column))
        assert cell.ts == commit_ts and decode_notify(cell.value, cell.ts) == (txn.primary, txn.start_ts)


def test_a_delayed_older_heartbeat_never_overwrites_a_newer_one():
    from caffeine.percolator.owners import BEAT, FAMILY, TABLE as OWNERS, OwnerRegistry, _BEAT, ensure_table

    store = MemoryStore()
    ensure_table(store)
    now = [10_000]
    registry = OwnerRegistry(store, heartbeat_interval_ms=1000, owner_grace_ms=60_000,
                             oldest_open_start_ts=lambda: 42, wall_clock_ms=lambda: now[0])
    registry.beat()  # "oldest open transaction: 42"
    # An earlier beat from before that transaction began, delayed in the network (or re-sent
    # by the pool), arrives last: it must not report "no open transaction" to GC.
    store.mutate_row(OWNERS, registry.owner, [Put(FAMILY, BEAT, 9_000, _BEAT.pack(9_000, 0))])
    gc_view = OwnerRegistry(store, heartbeat_interval_ms=1000, owner_grace_ms=60_000, wall_clock_ms=lambda: now[0])
    assert gc_view.oldest_open_start_ts() == 42
