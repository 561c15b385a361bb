"""The coprocessor's row steps: the Java class on the real HBase answers exactly as their
Python model (``caffeine.percolator.steps.server.check``) does, scenario by scenario.

Each scenario runs twice: on the in-memory store running the model, and on HBase with
``org.caffeine.hbase.PercolatorRowSteps`` loaded (``caffeine up`` loads it). Without the
coprocessor the HBase half is skipped, except under CI, where it fails.
"""

from __future__ import annotations

import time
import uuid

import pytest

from caffeine.percolator import layout
from caffeine.percolator.layout import DATA, LOCK, NOTIFY, WRITE
from caffeine.percolator.records import CellRef, Kind, Lock, Write
from caffeine.percolator.steps import server
from caffeine.storage import CheckedWrite, Delete, DeleteUpTo, FamilySpec, Put, ReadSpec, Refusal
from caffeine.storage.memory import MemoryStore
from caffeine.storage.probe import probe_row_steps
from support.session import require_coprocessor


@pytest.fixture(params=["model", "hbase"])
def checked(request):
    """(store, table): a Percolator table on a store that runs the row steps."""
    if request.param == "model":
        store = MemoryStore(row_step=server.row_step)
    else:
        store = request.getfixturevalue("hbase_store")
        require_coprocessor(store)
    table = "cp" + uuid.uuid4().hex[:10]
    layout.create_table(store, table)
    yield store, table
    store.drop_table(table)


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
    assert probe_row_steps(store, table) == server.PROTOCOL_VERSION


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
    assert server.step_rows([(b"r", first), (b"s", first), (b"r", second)], rows) == {
        b"r": Refusal("BAD_REQUEST", (server.SEVERAL_STEPS,)), b"s": ()}
    assert server.step_rows([(b"r", first), (b"r", first), (b"r", {})], rows) == {b"r": ()}
    # A malformed request's own token comes first.
    malformed = {**first, server.START_TS: b"\x00"}
    assert server.step_rows([(b"r", first), (b"r", second), (b"r", malformed)], rows) == {
        b"r": Refusal("BAD_REQUEST", ("start_ts-not-8-bytes",))}


# -- deletes carried with a step (protocol 2) --------------------------------------------------
def _carrying(write, *deletes):
    """``write`` carrying ``deletes`` (encoded; raw bytes pass as they are) beside its own."""
    attrs = dict(write.attributes)
    own = server.decode_deletes(attrs.get(server.DELETES))
    raw = [d for d in deletes if isinstance(d, bytes)]
    attrs[server.DELETES] = raw[0] if raw else server.encode_deletes([*own, *deletes])
    return CheckedWrite(tuple(attrs.items()), write.mutations)


def test_steps_are_puts_only_and_carry_their_deletes():
    commit_w = server.commit_write({"c": Kind.PUT}, BASE, BASE + 10, [Put(NOTIFY, b"c", BASE + 10, b"n"),
                                                                      DeleteUpTo(NOTIFY, b"c", BASE + 5)])
    assert all(isinstance(m, Put) for m in commit_w.mutations)
    # The lock goes with every version below it (steps.common.unlock_committed).
    assert server.decode_deletes(dict(commit_w.attributes)[server.DELETES]) == (
        DeleteUpTo(LOCK, b"c", BASE), DeleteUpTo(NOTIFY, b"c", BASE + 5))
    rollback_w = server.rollback_write(["c"], BASE)
    assert all(isinstance(m, Put) for m in rollback_w.mutations)
    assert server.decode_deletes(dict(rollback_w.attributes)[server.DELETES]) == (
        Delete(LOCK, b"c", BASE), Delete(DATA, b"c", BASE))
    assert server.DELETES not in dict(server.prewrite_write({"c": b"v"}, {"c": lock(BASE)}, BASE).attributes)


def test_carried_deletes_remove_exactly_their_versions(checked):
    """A ``Delete`` removes the one version at its timestamp, a ``DeleteUpTo`` every version at
    or below it; both with the step's puts, in the same atomic write."""
    store, table = checked
    prewrite(store, table, [b"r"], BASE)
    store.mutate_row(table, b"r", [Put(NOTIFY, b"c", ts, b"n%d" % ts) for ts in (BASE - 3, BASE - 1, BASE + 2)]
                     + [Put(DATA, b"x", ts, b"x%d" % ts) for ts in (BASE - 2, BASE - 1)])
    write = _carrying(server.commit_write({"c": Kind.PUT}, BASE, BASE + 10),
                      DeleteUpTo(NOTIFY, b"c", BASE - 1), Delete(DATA, b"x", BASE - 2))
    assert store.apply_checked(table, {b"r": write}) == {b"r": None}
    row = store.read_row(table, b"r", ReadSpec(versions=10))
    assert [c.ts for c in row.versions(NOTIFY, b"c")] == [BASE + 2]
    assert [c.ts for c in row.versions(DATA, b"x")] == [BASE - 1]
    assert row.latest(LOCK, b"c") is None
    assert Write.decode(row.latest(WRITE, b"c").value) == Write(Kind.PUT, BASE)


def test_a_refused_step_applies_none_of_its_deletes(checked):
    store, table = checked
    store.mutate_row(table, b"r", [Put(LOCK, b"c", BASE - 1, lock(BASE - 1)), Put(NOTIFY, b"c", BASE - 5, b"n")])
    write = _carrying(server.commit_write({"c": Kind.PUT}, BASE, BASE + 10), DeleteUpTo(NOTIFY, b"c", BASE))
    assert store.apply_checked(table, {b"r": write}) == {b"r": Refusal("ROLLED_BACK")}
    row = store.read_row(table, b"r", ReadSpec(versions=10))
    assert row.latest(LOCK, b"c").ts == BASE - 1 and row.latest(NOTIFY, b"c").ts == BASE - 5
    assert row.latest(WRITE, b"c") is None


def test_commits_of_many_rows_go_in_one_call_each_row_atomic(checked):
    """Commit steps of several rows in one call: each accepted row has its record and lost its
    lock together; the refused one keeps its lock and gets no record."""
    store, table = checked
    prewrite(store, table, [b"a", b"b"], BASE)
    store.mutate_row(table, b"c", [Put(LOCK, b"c", BASE - 1, lock(BASE - 1))])
    writes = {row: server.commit_write({"c": Kind.PUT}, BASE, BASE + 10) for row in (b"a", b"b", b"c")}
    assert store.apply_checked(table, writes) == {b"a": None, b"b": None, b"c": Refusal("ROLLED_BACK")}
    for row in (b"a", b"b"):
        cells = store.read_row(table, row, ReadSpec(versions=10))
        assert cells.latest(LOCK, b"c") is None and cells.latest(WRITE, b"c").ts == BASE + 10
    cells = store.read_row(table, b"c", ReadSpec(versions=10))
    assert cells.latest(LOCK, b"c").ts == BASE - 1 and cells.latest(WRITE, b"c") is None


def _entry(kind, ts, family, q=b"c"):
    return bytes([kind]) + ts.to_bytes(8, "big") + bytes([len(family)]) + family + len(q).to_bytes(4, "big") + q


@pytest.mark.parametrize("raw, token", [
    (b"", "no-deletes"),
    (_entry(3, BASE, LOCK), "unknown-delete-kind"),
    (_entry(1, 1 << 63, LOCK), "delete-ts-out-of-range"),
    (_entry(2, (1 << 63) - 1, LOCK), "delete-ts-out-of-range"),
    (_entry(1, BASE, b""), "empty-delete-family"),
    (_entry(1, BASE, b"_g", b""), "reserved-delete-family"),
    (_entry(1, BASE, b"_n"), "reserved-delete-family"),
    (_entry(1, BASE, LOCK)[:-1], "truncated-deletes"),
    (_entry(1, BASE, LOCK)[:9], "truncated-deletes"),
    (_entry(1, BASE, LOCK)[:-5] + b"\xff\xff\xff\xff" + b"c", "truncated-deletes"),
    (_entry(1, BASE, b"zz"), "unknown-delete-family"),
    (_entry(1, BASE, LOCK) + _entry(2, BASE, b"zz") + _entry(9, BASE, LOCK), "unknown-delete-kind"),
])
def test_malformed_delete_lists_answer_bad_request(checked, raw, token):
    store, table = checked
    prewrite(store, table, [b"r"], BASE)
    write = _carrying(server.commit_write({"c": Kind.PUT}, BASE, BASE + 10), raw)
    assert store.apply_checked(table, {b"r": write}) == {b"r": Refusal("BAD_REQUEST", (token,))}
    assert store.read_row(table, b"r", ReadSpec()).latest(LOCK, b"c").ts == BASE


def test_a_delete_in_a_counted_family_is_refused(checked):
    store, _ = checked
    table = "cc" + uuid.uuid4().hex[:10]
    store.create_table(table, {LOCK: FamilySpec(), b"p": FamilySpec(counted=True)})
    try:
        write = CheckedWrite(((server.STEP, server.PREWRITE), (server.START_TS, BASE.to_bytes(8, "big")),
                              (server.COLUMNS, server.encode_columns(["c"])),
                              (server.DELETES, server.encode_deletes([Delete(b"p", b"q", 5)]))),
                             (Put(LOCK, b"c", BASE, b"L"),))
        assert store.apply_checked(table, {b"r": write}) == {b"r": Refusal("BAD_REQUEST", ("counted-delete-family",))}
        assert not store.read_row(table, b"r", ReadSpec())
    finally:
        store.drop_table(table)
