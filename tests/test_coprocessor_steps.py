"""The coprocessor's row steps: the Java class on the real HBase answers exactly as their
Python model (``caffeine.percolator.steps.server.check``) does, scenario by scenario.

Each scenario runs twice: on the in-memory store running the model, and on HBase with
``org.caffeine.hbase.PercolatorRowSteps`` loaded (``caffeine up`` loads it). Without the
coprocessor the HBase half is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

from caffeine.percolator import layout
from caffeine.percolator.committer import probe_coprocessor
from caffeine.percolator.layout import DATA, LOCK, WRITE
from caffeine.percolator.records import CellRef, Kind, Lock, Write
from caffeine.percolator.steps import server
from caffeine.storage import CheckedWrite, Put, ReadSpec, Refusal
from caffeine.storage.memory import MemoryStore


@pytest.fixture(params=["model", "hbase"])
def checked(request):
    """(store, table): a Percolator table on a store that runs the row steps."""
    if request.param == "model":
        store = MemoryStore(row_step=server.check)
    else:
        store = request.getfixturevalue("hbase_store")
        if probe_coprocessor(store, _probe_table(store)) is None:
            message = "the HBase runtime does not run Caffeine's coprocessor (caffeine up loads it)"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
    table = "cp" + uuid.uuid4().hex[:10]
    layout.create_table(store, table)
    yield store, table
    store.drop_table(table)


def _probe_table(store):
    from caffeine.percolator.owners import TABLE, ensure_table

    ensure_table(store)
    return TABLE


BASE = 1_000_000


def lock(start_ts, primary_row=b"p"):
    return Lock(start_ts, Kind.PUT, CellRef("t", primary_row, "c"), 3000, b"owner", 0).encode()


def prewrite(store, table, rows, start_ts, column="c", value=b"v"):
    writes = {row: server.prewrite_write({column: value}, {column: lock(start_ts)}, start_ts) for row in rows}
    return store.apply_checked(table, writes)


def commit(store, table, row, start_ts, commit_ts, column="c"):
    return store.apply_checked(table, {row: server.commit_write({column: Kind.PUT}, start_ts, commit_ts)})[row]


def rollback(store, table, row, start_ts, column="c"):
    return store.apply_checked(table, {row: server.rollback_write([column], start_ts)})[row]


def test_probe_answers_with_the_protocol_version(checked):
    store, table = checked
    assert probe_coprocessor(store, table) == server.PROTOCOL_VERSION


def test_prewrite_locks_an_empty_row_and_a_resend_is_accepted(checked):
    store, table = checked
    assert prewrite(store, table, [b"r"], BASE) == {b"r": None}
    assert prewrite(store, table, [b"r"], BASE) == {b"r": None}  # our own lock: a re-send
    row = store.read_row(table, b"r", ReadSpec())
    assert row.latest(LOCK, b"c").ts == BASE and row.latest(LOCK, b"c").value == lock(BASE)
    assert row.latest(DATA, b"c").value == b"v"


def test_prewrite_meeting_another_lock_answers_locked_and_writes_nothing(checked):
    store, table = checked
    prewrite(store, table, [b"r"], BASE)
    answer = prewrite(store, table, [b"r"], BASE + 5, value=b"other")[b"r"]
    assert answer == Refusal("LOCKED", (b"c".hex(), str(BASE), lock(BASE).hex()))
    assert server.prewrite_result(answer).lock == Lock.decode(BASE, lock(BASE))
    row = store.read_row(table, b"r", ReadSpec(versions=10))
    assert [c.ts for c in row.versions(DATA, b"c")] == [BASE]


def test_commit_then_a_resend_answers_committed_and_a_late_writer_conflicts(checked):
    store, table = checked
    prewrite(store, table, [b"r"], BASE)
    assert commit(store, table, b"r", BASE, BASE + 10) is None
    row = store.read_row(table, b"r", ReadSpec(versions=10))
    assert row.latest(LOCK, b"c") is None
    assert Write.decode(row.latest(WRITE, b"c").value) == Write(Kind.PUT, BASE)
    assert commit(store, table, b"r", BASE, BASE + 11) == Refusal("COMMITTED", (str(BASE + 10),))
    assert prewrite(store, table, [b"r"], BASE + 3)[b"r"] == Refusal("CONFLICT", (b"c".hex(), str(BASE + 10)))
    assert rollback(store, table, b"r", BASE) == Refusal("COMMITTED", (str(BASE + 10),))
    # A writer that started after the commit is fine.
    assert prewrite(store, table, [b"r"], BASE + 20) == {b"r": None}


def test_a_rollback_fences_the_transaction_for_good(checked):
    store, table = checked
    assert rollback(store, table, b"r", BASE) is None  # nothing there yet: the fence alone
    assert prewrite(store, table, [b"r"], BASE)[b"r"] == Refusal("ROLLED_BACK")
    assert commit(store, table, b"r", BASE, BASE + 10) == Refusal("ROLLED_BACK")
    assert rollback(store, table, b"r", BASE) is None  # idempotent
    # A rollback record of another transaction above start_ts is no conflict.
    assert prewrite(store, table, [b"r"], BASE - 5) == {b"r": None}


def test_rollback_removes_lock_and_data(checked):
    store, table = checked
    prewrite(store, table, [b"r"], BASE)
    assert rollback(store, table, b"r", BASE) is None
    row = store.read_row(table, b"r", ReadSpec(versions=10))
    assert row.latest(LOCK, b"c") is None and row.latest(DATA, b"c") is None
    assert Write.decode(row.latest(WRITE, b"c").value) == Write(Kind.ROLLBACK, BASE)


def test_a_batch_applies_every_row_but_the_refused_one(checked):
    store, table = checked
    prewrite(store, table, [b"b"], BASE)
    started = time.monotonic()
    answers = prewrite(store, table, [b"a", b"b", b"c"], BASE + 5, value=b"new")
    assert time.monotonic() - started < 5, "a refusal must not be retried by HBase's client"
    assert answers == {b"a": None, b"b": Refusal("LOCKED", (b"c".hex(), str(BASE), lock(BASE).hex())), b"c": None}
    for row in (b"a", b"c"):
        assert store.read_row(table, row, ReadSpec()).latest(LOCK, b"c").ts == BASE + 5
    assert store.read_row(table, b"b", ReadSpec()).latest(LOCK, b"c").ts == BASE


def test_plain_writes_pass_untouched(checked):
    store, table = checked
    store.mutate_row(table, b"r", [Put(DATA, b"c", 7, b"plain")])
    store.put_rows(table, {b"s": [Put(DATA, b"c", 7, b"plain")]})
    assert store.read_row(table, b"r", ReadSpec()).latest(DATA, b"c").value == b"plain"
    assert store.read_row(table, b"s", ReadSpec()).latest(DATA, b"c").value == b"plain"


def test_a_malformed_request_is_refused_with_its_token(checked):
    store, table = checked
    bad = CheckedWrite(((server.STEP, b"prewrite"),), (Put(DATA, b"c", 1, b"x"),))
    answer = store.apply_checked(table, {b"r": bad})[b"r"]
    assert answer == Refusal("BAD_REQUEST", ("missing-start_ts",))
    assert store.read_row(table, b"r", ReadSpec()).latest(DATA, b"c") is None


def _with(write, **attributes):
    """``write`` with some attributes replaced (keys: the names after ``caffeine.``)."""
    attrs = dict(write.attributes)
    attrs.update({b"caffeine." + k.encode(): v for k, v in attributes.items()})
    return CheckedWrite(tuple(attrs.items()), write.mutations)


def test_bad_requests_in_a_batch_each_keep_their_token(checked):
    """Puts of several rows go as one putMultiple, whose failures HBase folds into one
    message: each refused row's token is read out of it, the well-formed row applies."""
    store, table = checked
    good = server.prewrite_write({"c": b"v"}, {"c": lock(BASE)}, BASE)
    writes = {
        b"a": _with(good, columns=server.encode_columns(["c"]) + b"\x00\x00\x00\x00"),
        b"b": good,
        b"c": _with(good, start_ts=(BASE | 1 << 63).to_bytes(8, "big")),
    }
    assert store.apply_checked(table, writes) == {
        b"a": Refusal("BAD_REQUEST", ("empty-column",)),
        b"b": None,
        b"c": Refusal("BAD_REQUEST", ("start_ts-out-of-range",)),
    }
    assert store.read_row(table, b"b", ReadSpec()).latest(LOCK, b"c").ts == BASE
    assert not store.read_row(table, b"a", ReadSpec()) and not store.read_row(table, b"c", ReadSpec())


def test_the_model_refuses_two_different_steps_on_one_row_of_a_batch():
    """``check_rows`` decides a mini-batch as the coprocessor does: a row with two different
    requests is refused whole (both were to be checked on the row as it was before either),
    a request sent twice is one, and the batch's other rows are decided on their own."""
    from caffeine.storage import Row

    first = dict(server.prewrite_write({"c": b"v"}, {"c": lock(BASE)}, BASE).attributes)
    second = dict(server.prewrite_write({"c": b"v"}, {"c": lock(BASE + 1)}, BASE + 1).attributes)
    rows = {b"r": Row(b"r"), b"s": Row(b"s")}
    assert server.check_rows([(b"r", first), (b"s", first), (b"r", second)], rows) == {
        b"r": Refusal("BAD_REQUEST", (server.SEVERAL_STEPS,)), b"s": None}
    assert server.check_rows([(b"r", first), (b"r", first), (b"r", {})], rows) == {b"r": None}
    # A malformed request's own token comes first.
    malformed = {**first, server.START_TS: b"\x00"}
    assert server.check_rows([(b"r", first), (b"r", second), (b"r", malformed)], rows) == {
        b"r": Refusal("BAD_REQUEST", ("start_ts-not-8-bytes",))}
