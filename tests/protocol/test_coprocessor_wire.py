"""The coprocessor's wire protocol, end to end through the real Thrift2 server.

What is pinned here is what a Python client can rely on (coprocessor/README.md): a mutation
carrying ``caffeine.step`` attributes is applied only when its row passes the step's check;
otherwise every mutation of that row fails, nothing of it is written, and the failure's text
holds ``CAFFEINE-STEP row=<hex> <ANSWER> [args]`` (found by ``ANSWER_RE``), also inside the
aggregated message of a multi-row ``putMultiple``, whose other rows still apply. HBase does
not retry the failed operations (the answer comes back in well under a second). Plain
mutations, without the attributes, are untouched.

The tests talk raw Thrift2 (the IDL loaded by the storage layer) so they pin HBase's and the
coprocessor's behaviour, not a client's interpretation of it.
"""

from __future__ import annotations

import re
import struct
import threading
import time

import pytest

from caffeine.percolator.layout import FAMILIES
from caffeine.storage.model import GUARD_FAMILY, GUARD_QUALIFIER, GUARD_TS

pytestmark = pytest.mark.hbase

ANSWER_RE = re.compile(r"CAFFEINE-STEP row=([0-9a-f]*) ([A-Z_]+)((?: [0-9a-f]+)*)")
PUT, DELETE, ROLLBACK = 1, 2, 3
# A failed step must answer at once; HBase's client retrying it would take seconds.
FAST_S = 1.0


def u64(v: int) -> bytes:
    return struct.pack(">Q", v)


def columns_attr(*cols: bytes) -> bytes:
    return b"".join(struct.pack(">I", len(c)) + c for c in cols)


def write_record(kind: int, start_ts: int) -> bytes:
    return bytes([kind]) + u64(start_ts)


def step_attrs(step: str, start_ts: int | None = None, cols=(), commit_ts: int | None = None) -> dict:
    attrs = {b"caffeine.step": step.encode()}
    if start_ts is not None:
        attrs[b"caffeine.start_ts"] = u64(start_ts)
    if commit_ts is not None:
        attrs[b"caffeine.commit_ts"] = u64(commit_ts)
    if cols:
        attrs[b"caffeine.columns"] = columns_attr(*cols)
    return attrs


def answers(exc: BaseException) -> list[tuple[bytes, str, list[str]]]:
    """Every (row, ANSWER, args) in a TIOError's message."""
    message = exc.message
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    return [(bytes.fromhex(row), word, args.split()) for row, word, args in ANSWER_RE.findall(message)]


class Wire:
    """Raw Thrift2 calls on one table, with helpers to build the protocol's cells."""

    def __init__(self, store, table: str):
        from thriftpy2.protocol import TBinaryProtocolFactory
        from thriftpy2.rpc import make_client
        from thriftpy2.transport import TBufferedTransportFactory

        self.t2 = store.t2
        self.name = store._name(table)
        s = store.settings
        self.client = make_client(
            self.t2.THBaseService, s.thrift2_host, s.thrift2_port,
            trans_factory=TBufferedTransportFactory(), proto_factory=TBinaryProtocolFactory(),
            timeout=s.thrift_timeout_ms,
        )

    def close(self):
        self.client.close()

    def cv(self, family: bytes, qualifier: bytes, value: bytes, ts: int):
        return self.t2.TColumnValue(family=family, qualifier=qualifier, value=value, timestamp=ts)

    def tput(self, row: bytes, cells, attrs: dict | None = None):
        return self.t2.TPut(row=row, columnValues=[self.cv(*c) for c in cells], attributes=attrs)

    def tdelete(self, row: bytes, cells, attrs: dict | None = None):
        t2 = self.t2
        cols = [t2.TColumn(family=f, qualifier=q, timestamp=ts) for f, q, ts in cells]
        return t2.TDelete(row=row, columns=cols, deleteType=t2.TDeleteType.DELETE_COLUMN, attributes=attrs)

    def mutate_row(self, row: bytes, puts=None, deletes=None):
        t2 = self.t2
        ops = [t2.TMutation(put=p) for p in (puts or [])] + [t2.TMutation(deleteSingle=d) for d in (deletes or [])]
        self.client.mutateRow(self.name, t2.TRowMutations(row=row, mutations=ops))

    def put_multiple(self, tputs):
        self.client.putMultiple(self.name, tputs)

    def put(self, tput):
        self.client.put(self.name, tput)

    def plain(self, row: bytes, cells):
        """Cells written without any step (set-up of a row's state)."""
        self.put(self.tput(row, cells))

    def cells(self, row: bytes) -> dict[tuple[bytes, bytes, int], bytes]:
        result = self.client.get(self.name, self.t2.TGet(row=row, maxVersions=1000))
        return {(c.family, c.qualifier, c.timestamp): c.value for c in (result.columnValues or [])}

    def prewrite(self, row: bytes, start_ts: int, col: bytes = b"c", value: bytes = b"v", lock: bytes = b"L",
                 guard: bytes = b"G", cols=None):
        """The cells a prewrite of ``col`` writes, with the step's attributes."""
        return self.tput(
            row,
            [(b"l", col, lock, start_ts), (b"d", col, value, start_ts), (GUARD_FAMILY, GUARD_QUALIFIER, guard, GUARD_TS)],
            step_attrs("prewrite", start_ts, cols or [col]),
        )


@pytest.fixture(scope="module")
def wire(hbase_store, hbase_settings):
    if hbase_settings.coprocessor == "off":
        pytest.skip("CAFFEINE_COPROCESSOR=off: the runtime runs without the coprocessor")
    import uuid

    table = "cp" + uuid.uuid4().hex[:10]
    hbase_store.create_table(table, FAMILIES)
    w = Wire(hbase_store, table)
    # Warm the path once (connection, region location, JIT), so timings below measure answers.
    try:
        w.put(w.tput(b"warm-up", [(GUARD_FAMILY, GUARD_QUALIFIER, b"x", GUARD_TS)], step_attrs("probe")))
    except w.t2.TIOError:
        pass
    yield w
    w.close()
    hbase_store.drop_table(table)


@pytest.fixture
def row(request):
    import uuid

    return b"r-" + uuid.uuid4().hex[:12].encode()


def failing(fn, *args):
    """Run a call that must fail with an answer; return (TIOError, seconds)."""
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:
        fn(*args)
    return info.value, time.monotonic() - t0


# -- probe and plain writes ---------------------------------------------------------------------

def test_probe_answers_and_writes_nothing(wire, row):
    probe = wire.tput(row, [(GUARD_FAMILY, GUARD_QUALIFIER, b"probe", GUARD_TS)], step_attrs("probe"))
    for call in (lambda: wire.put(probe), lambda: wire.mutate_row(row, [probe]), lambda: wire.put_multiple([probe])):
        exc, took = failing(call)
        assert answers(exc) == [(row, "PROBE", ["2"])]
        assert took < FAST_S
    assert wire.cells(row) == {}


def test_plain_mutations_apply_untouched(wire, row):
    wire.put(wire.tput(row, [(b"d", b"c", b"one", 5)]))
    wire.put_multiple([wire.tput(row, [(b"d", b"c", b"two", 6)]), wire.tput(row + b"x", [(b"d", b"c", b"x", 6)])])
    wire.mutate_row(row, [wire.tput(row, [(b"l", b"c", b"lock", 7)])], [wire.tdelete(row, [(b"d", b"c", 5)])])
    wire.client.deleteMultiple(wire.name, [wire.tdelete(row + b"x", [(b"d", b"c", 6)])])
    assert wire.cells(row) == {(b"d", b"c", 6): b"two", (b"l", b"c", 7): b"lock"}
    assert wire.cells(row + b"x") == {}


# -- prewrite ----------------------------------------------------------------------------------

def test_prewrite_on_a_clean_row_applies(wire, row):
    wire.mutate_row(row, [wire.prewrite(row, 100)])
    assert wire.cells(row) == {(b"l", b"c", 100): b"L", (b"d", b"c", 100): b"v", (GUARD_FAMILY, GUARD_QUALIFIER, GUARD_TS): b"G"}


def test_prewrite_conflict_answers_and_writes_nothing(wire, row):
    wire.plain(row, [(b"w", b"c", write_record(PUT, 150), 200), (GUARD_FAMILY, GUARD_QUALIFIER, b"old", GUARD_TS)])
    before = wire.cells(row)
    exc, took = failing(wire.mutate_row, row, [wire.prewrite(row, 100)])
    assert answers(exc) == [(row, "CONFLICT", [b"c".hex(), "200"])]
    assert took < FAST_S
    assert wire.cells(row) == before


def test_prewrite_conflict_message_is_the_answer_alone_on_atomic_calls(wire, row):
    """The thrown answer carries no stack trace: the client's message ends with it."""
    wire.plain(row, [(b"w", b"c", write_record(DELETE, 150), 200)])
    exc, _ = failing(wire.mutate_row, row, [wire.prewrite(row, 100)])
    message = exc.message.decode() if isinstance(exc.message, bytes) else exc.message
    assert f"CAFFEINE-STEP row={row.hex()} CONFLICT {b'c'.hex()} 200" in message
    assert "\tat " not in message


def test_prewrite_locked_answers_the_lock(wire, row):
    wire.plain(row, [(b"l", b"c", b"\x00other-lock\xff", 90)])
    exc, took = failing(wire.mutate_row, row, [wire.prewrite(row, 100)])
    assert answers(exc) == [(row, "LOCKED", [b"c".hex(), "90", b"\x00other-lock\xff".hex()])]
    assert took < FAST_S
    assert (b"l", b"c", 100) not in wire.cells(row)


def test_prewrite_resent_over_its_own_lock_applies(wire, row):
    wire.mutate_row(row, [wire.prewrite(row, 100, guard=b"G1")])
    wire.mutate_row(row, [wire.prewrite(row, 100, guard=b"G2")])
    assert wire.cells(row)[(GUARD_FAMILY, GUARD_QUALIFIER, GUARD_TS)] == b"G2"


def test_prewrite_after_its_own_rollback_answers_rolled_back(wire, row):
    wire.plain(row, [(b"w", b"c", write_record(ROLLBACK, 100), 100)])
    exc, _ = failing(wire.mutate_row, row, [wire.prewrite(row, 100)])
    assert answers(exc) == [(row, "ROLLED_BACK", [])]
    assert (b"l", b"c", 100) not in wire.cells(row)


def test_prewrite_skips_other_rollbacks_and_older_writes(wire, row):
    wire.plain(row, [
        (b"w", b"c", write_record(ROLLBACK, 120), 120),  # another transaction's rollback, newer
        (b"w", b"c", write_record(PUT, 50), 60),  # committed before our start
    ])
    wire.mutate_row(row, [wire.prewrite(row, 100)])
    assert wire.cells(row)[(b"l", b"c", 100)] == b"L"


def test_prewrite_newest_record_answers_first(wire, row):
    """Newest first: a commit after our start outranks our own rollback record."""
    wire.plain(row, [(b"w", b"c", write_record(ROLLBACK, 100), 100), (b"w", b"c", write_record(PUT, 110), 130)])
    exc, _ = failing(wire.mutate_row, row, [wire.prewrite(row, 100)])
    assert answers(exc) == [(row, "CONFLICT", [b"c".hex(), "130"])]


def test_prewrite_write_at_start_ts_itself_conflicts(wire, row):
    wire.plain(row, [(b"w", b"c", write_record(PUT, 90), 100)])
    exc, _ = failing(wire.mutate_row, row, [wire.prewrite(row, 100)])
    assert answers(exc) == [(row, "CONFLICT", [b"c".hex(), "100"])]


def test_columns_are_checked_in_the_given_order(wire, row):
    wire.plain(row, [(b"l", b"b", b"lock-b", 90), (b"w", b"a", write_record(PUT, 95), 120)])
    put = wire.tput(row, [(b"l", b"a", b"L", 100), (b"l", b"b", b"L", 100)], step_attrs("prewrite", 100, [b"b", b"a"]))
    exc, _ = failing(wire.mutate_row, row, [put])
    assert answers(exc) == [(row, "LOCKED", [b"b".hex(), "90", b"lock-b".hex()])]
    put = wire.tput(row, [(b"l", b"a", b"L", 100), (b"l", b"b", b"L", 100)], step_attrs("prewrite", 100, [b"a", b"b"]))
    exc, _ = failing(wire.mutate_row, row, [put])
    assert answers(exc) == [(row, "CONFLICT", [b"a".hex(), "120"])]


def test_a_failing_row_fails_its_plain_mutations_too(wire, row):
    """mutateRow: the step's put and an unmarked delete in the same call both stay unapplied."""
    wire.plain(row, [(b"l", b"c", b"other", 90), (b"d", b"x", b"keep", 1)])
    exc, _ = failing(wire.mutate_row, row, [wire.prewrite(row, 100)], [wire.tdelete(row, [(b"d", b"x", 1)])])
    assert answers(exc)[0][1] == "LOCKED"
    assert wire.cells(row)[(b"d", b"x", 1)] == b"keep"


# -- putMultiple: one answer per failing row, the others apply ---------------------------------

def test_put_multiple_fails_only_the_locked_row(wire, row):
    rows = [row + b"-1", row + b"-2", row + b"-3"]
    wire.plain(rows[1], [(b"l", b"c", b"their-lock", 90)])
    exc, took = failing(wire.put_multiple, [wire.prewrite(r, 100) for r in rows])
    assert answers(exc) == [(rows[1], "LOCKED", [b"c".hex(), "90", b"their-lock".hex()])]
    assert took < FAST_S
    assert wire.cells(rows[0])[(b"l", b"c", 100)] == b"L"
    assert wire.cells(rows[2])[(b"l", b"c", 100)] == b"L"
    assert (b"l", b"c", 100) not in wire.cells(rows[1])


def test_put_multiple_reports_every_failing_row(wire, row):
    rows = [row + b"-%d" % i for i in range(5)]
    wire.plain(rows[0], [(b"w", b"c", write_record(PUT, 150), 200)])
    wire.plain(rows[2], [(b"l", b"c", b"lk", 80)])
    wire.plain(rows[4], [(b"w", b"c", write_record(ROLLBACK, 100), 100)])
    exc, took = failing(wire.put_multiple, [wire.prewrite(r, 100) for r in rows])
    assert sorted(answers(exc)) == sorted([
        (rows[0], "CONFLICT", [b"c".hex(), "200"]),
        (rows[2], "LOCKED", [b"c".hex(), "80", b"lk".hex()]),
        (rows[4], "ROLLED_BACK", []),
    ])
    assert took < FAST_S
    for r in (rows[1], rows[3]):
        assert wire.cells(r)[(b"l", b"c", 100)] == b"L"


def test_put_multiple_where_every_row_fails(wire, row):
    rows = [row + b"-a", row + b"-b"]
    for r in rows:
        wire.plain(r, [(b"l", b"c", b"x", 1)])
    exc, took = failing(wire.put_multiple, [wire.prewrite(r, 100) for r in rows])
    assert sorted(answers(exc)) == sorted((r, "LOCKED", [b"c".hex(), "1", b"x".hex()]) for r in rows)
    assert took < FAST_S


def test_put_multiple_with_plain_rows_beside_a_failing_step(wire, row):
    wire.plain(row, [(b"l", b"c", b"x", 1)])
    plain = wire.tput(row + b"-plain", [(b"d", b"c", b"p", 3)])
    exc, _ = failing(wire.put_multiple, [wire.prewrite(row, 100), plain])
    assert [a[0] for a in answers(exc)] == [row]
    assert wire.cells(row + b"-plain") == {(b"d", b"c", 3): b"p"}


def test_two_different_steps_on_one_row_in_one_batch_are_both_refused(wire, row):
    """Two transactions' prewrites of one row in one putMultiple must not both be checked
    against the row as it was before either: the row is refused whole, deterministically,
    and the batch's other rows apply."""
    other = row + b"-other"
    first = wire.prewrite(row, 100, lock=b"L100", guard=b"G1")
    second = wire.prewrite(row, 101, lock=b"L101", guard=b"G2")
    exc, took = failing(wire.put_multiple, [first, wire.prewrite(other, 100), second])
    message = exc.message.decode() if isinstance(exc.message, bytes) else exc.message
    assert f"CAFFEINE-STEP row={row.hex()} BAD_REQUEST several-steps-one-row" in message
    assert [a[0] for a in answers(exc)] == [row]
    assert took < FAST_S
    assert wire.cells(row) == {}
    assert wire.cells(other)[(b"l", b"c", 100)] == b"L"


def test_a_step_sent_twice_in_one_batch_is_checked_once(wire, row):
    """The same request twice (a re-sent mutation) is one request: it applies."""
    put = wire.prewrite(row, 100)
    wire.put_multiple([put, put, wire.prewrite(row + b"-x", 100)])
    assert wire.cells(row)[(b"l", b"c", 100)] == b"L"


# -- commit ------------------------------------------------------------------------------------

def commit_put(wire, row, start_ts, commit_ts, col=b"c", kind=PUT):
    return wire.tput(row, [(b"w", col, write_record(kind, start_ts), commit_ts), (GUARD_FAMILY, GUARD_QUALIFIER, b"G", GUARD_TS)],
                     step_attrs("commit", start_ts, [col], commit_ts))


def lock_delete(wire, row, start_ts, col=b"c"):
    return wire.tdelete(row, [(b"l", col, start_ts)])


def test_commit_with_its_lock_applies(wire, row):
    wire.mutate_row(row, [wire.prewrite(row, 100)])
    wire.mutate_row(row, [commit_put(wire, row, 100, 110)], [lock_delete(wire, row, 100)])
    cells = wire.cells(row)
    assert cells[(b"w", b"c", 110)] == write_record(PUT, 100)
    assert (b"l", b"c", 100) not in cells


def test_commit_resent_after_it_applied_answers_committed(wire, row):
    wire.mutate_row(row, [wire.prewrite(row, 100)])
    wire.mutate_row(row, [commit_put(wire, row, 100, 110)], [lock_delete(wire, row, 100)])
    exc, _ = failing(wire.mutate_row, row, [commit_put(wire, row, 100, 110)], [lock_delete(wire, row, 100)])
    assert answers(exc) == [(row, "COMMITTED", ["110"])]


def test_commit_without_lock_answers_rolled_back(wire, row):
    exc, _ = failing(wire.mutate_row, row, [commit_put(wire, row, 100, 110)])
    assert answers(exc) == [(row, "ROLLED_BACK", [])]
    wire.plain(row, [(b"w", b"c", write_record(ROLLBACK, 100), 100)])
    exc, _ = failing(wire.mutate_row, row, [commit_put(wire, row, 100, 110)])
    assert answers(exc) == [(row, "ROLLED_BACK", [])]
    assert (b"w", b"c", 110) not in wire.cells(row)


def test_commit_over_another_transactions_lock_answers_rolled_back(wire, row):
    wire.plain(row, [(b"l", b"c", b"theirs", 105)])
    exc, _ = failing(wire.mutate_row, row, [commit_put(wire, row, 100, 110)])
    assert answers(exc) == [(row, "ROLLED_BACK", [])]


def test_commit_batched_over_rows(wire, row):
    rows = [row + b"-1", row + b"-2", row + b"-3"]
    for r in rows[:2]:
        wire.mutate_row(r, [wire.prewrite(r, 100)])
    wire.plain(rows[2], [(b"w", b"c", write_record(DELETE, 100), 107)])
    exc, _ = failing(wire.put_multiple, [commit_put(wire, r, 100, 110) for r in rows])
    assert answers(exc) == [(rows[2], "COMMITTED", ["107"])]
    for r in rows[:2]:
        assert wire.cells(r)[(b"w", b"c", 110)] == write_record(PUT, 100)


# -- deletes carried with a step (protocol 2: puts only on the wire) -------------------------------

def carried(*entries) -> bytes:
    """``caffeine.deletes``: entries (kind, ts, family, qualifier); kind 1 exactly that
    version, 2 every version up to it."""
    return b"".join(bytes([k]) + u64(ts) + bytes([len(f)]) + f + struct.pack(">I", len(q)) + q for k, ts, f, q in entries)


def commit_carrying(wire, row, start_ts, commit_ts, *entries, col=b"c"):
    put = commit_put(wire, row, start_ts, commit_ts, col)
    put.attributes[b"caffeine.deletes"] = carried((1, start_ts, b"l", col), *entries)
    return put


def test_commits_of_many_rows_in_one_put_multiple_delete_their_locks(wire, row):
    """The secondaries' commit in one call: each accepted row's record and lock delete land
    together; a refused row keeps its lock and gets no record, its deletes unapplied."""
    rows = [row + b"-1", row + b"-2", row + b"-3"]
    for r in rows[:2]:
        wire.mutate_row(r, [wire.prewrite(r, 100)])
    wire.plain(rows[2], [(b"l", b"c", b"theirs", 90)])
    exc, took = failing(wire.put_multiple, [commit_carrying(wire, r, 100, 110) for r in rows])
    assert answers(exc) == [(rows[2], "ROLLED_BACK", [])]
    assert took < FAST_S
    for r in rows[:2]:
        cells = wire.cells(r)
        assert cells[(b"w", b"c", 110)] == write_record(PUT, 100)
        assert (b"l", b"c", 100) not in cells and (b"d", b"c", 100) in cells
    assert wire.cells(rows[2])[(b"l", b"c", 90)] == b"theirs"


def test_a_carried_delete_is_exact_or_up_to_its_timestamp(wire, row):
    wire.mutate_row(row, [wire.prewrite(row, 100)])
    wire.plain(row, [(b"n", b"c", b"n%d" % ts, ts) for ts in (80, 90, 95, 120)] + [(b"d", b"x", b"x", ts) for ts in (5, 6)])
    wire.put(commit_carrying(wire, row, 100, 110, (2, 95, b"n", b"c"), (1, 6, b"d", b"x"), (1, 7, b"d", b"x")))
    cells = wire.cells(row)
    assert sorted(k for k in cells if k[0] in (b"n", b"l") or k[1] == b"x") == [(b"d", b"x", 5), (b"n", b"c", 120)]


def test_an_unknown_delete_family_answers_before_it_could_fail_the_batch(wire, row):
    """HBase would fail the whole mini-batch on a delete in a family the table lacks: the
    coprocessor answers that row BAD_REQUEST instead, and the batch's other rows apply."""
    wire.mutate_row(row, [wire.prewrite(row, 100)])
    exc, _ = failing(wire.put_multiple, [commit_carrying(wire, row, 100, 110, (1, 5, b"nope", b"c")),
                                         wire.prewrite(row + b"-ok", 100)])
    message = exc.message.decode() if isinstance(exc.message, bytes) else exc.message
    assert f"CAFFEINE-STEP row={row.hex()} BAD_REQUEST unknown-delete-family" in message
    assert (b"l", b"c", 100) in wire.cells(row)
    assert (b"l", b"c", 100) in wire.cells(row + b"-ok")


# -- rollback ----------------------------------------------------------------------------------

def rollback_put(wire, row, start_ts, col=b"c"):
    return wire.tput(row, [(b"w", col, write_record(ROLLBACK, start_ts), start_ts), (GUARD_FAMILY, GUARD_QUALIFIER, b"G", GUARD_TS)],
                     step_attrs("rollback", start_ts, [col]))


def test_rollback_of_a_lock_applies(wire, row):
    wire.mutate_row(row, [wire.prewrite(row, 100)])
    wire.mutate_row(row, [rollback_put(wire, row, 100)],
                    [wire.tdelete(row, [(b"l", b"c", 100), (b"d", b"c", 100)])])
    cells = wire.cells(row)
    assert cells[(b"w", b"c", 100)] == write_record(ROLLBACK, 100)
    assert (b"l", b"c", 100) not in cells and (b"d", b"c", 100) not in cells


def test_rollback_of_a_committed_transaction_answers_committed(wire, row):
    wire.plain(row, [(b"w", b"c", write_record(PUT, 100), 110), (b"d", b"c", b"v", 100)])
    exc, took = failing(wire.mutate_row, row, [rollback_put(wire, row, 100)], [wire.tdelete(row, [(b"d", b"c", 100)])])
    assert answers(exc) == [(row, "COMMITTED", ["110"])]
    assert took < FAST_S
    assert wire.cells(row)[(b"d", b"c", 100)] == b"v"


def test_rollback_through_delete_multiple(wire, row):
    """deleteMultiple carries attributes too: a rollback's deletes refused when committed."""
    wire.plain(row, [(b"w", b"c", write_record(PUT, 100), 110), (b"d", b"c", b"v", 100)])
    d = wire.tdelete(row, [(b"d", b"c", 100)], step_attrs("rollback", 100, [b"c"]))
    exc, _ = failing(wire.client.deleteMultiple, wire.name, [d])
    assert answers(exc) == [(row, "COMMITTED", ["110"])]
    assert wire.cells(row)[(b"d", b"c", 100)] == b"v"


# -- malformed requests ------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, token", [
    ({b"caffeine.step": b"prewrite!"}, "unknown-step"),
    ({b"caffeine.step": b"prewrite", b"caffeine.columns": columns_attr(b"c")}, "missing-start_ts"),
    ({b"caffeine.step": b"prewrite", b"caffeine.start_ts": b"\x00" * 7, b"caffeine.columns": columns_attr(b"c")},
     "start_ts-not-8-bytes"),
    ({b"caffeine.step": b"prewrite", b"caffeine.start_ts": b"\xff" * 8, b"caffeine.columns": columns_attr(b"c")},
     "start_ts-out-of-range"),
    ({b"caffeine.step": b"prewrite", b"caffeine.start_ts": u64(5)}, "missing-columns"),
    ({b"caffeine.step": b"prewrite", b"caffeine.start_ts": u64(5), b"caffeine.columns": b""}, "no-columns"),
    ({b"caffeine.step": b"prewrite", b"caffeine.start_ts": u64(5), b"caffeine.columns": b"\x00\x00\x00\x09ab"},
     "truncated-columns"),
    ({b"caffeine.step": b"prewrite", b"caffeine.start_ts": u64(5), b"caffeine.columns": b"\x00\x00\x00\x00"},
     "empty-column"),
    ({b"caffeine.step": b"commit", b"caffeine.start_ts": u64(5), b"caffeine.columns": columns_attr(b"c")},
     "missing-commit_ts"),
    ({b"caffeine.step": b"commit", b"caffeine.start_ts": u64(5), b"caffeine.commit_ts": u64(5),
      b"caffeine.columns": columns_attr(b"c")}, "commit_ts-not-after-start_ts"),
])
def test_malformed_attributes_answer_bad_request(wire, row, attrs, token):
    put = wire.tput(row, [(b"l", b"c", b"L", 5)], attrs)
    exc, took = failing(wire.mutate_row, row, [put])
    message = exc.message.decode() if isinstance(exc.message, bytes) else exc.message
    assert f"CAFFEINE-STEP row={row.hex()} BAD_REQUEST {token}" in message
    assert took < FAST_S
    assert wire.cells(row) == {}
    # In a batch: only that row fails.
    ok = wire.prewrite(row + b"-ok", 100)
    exc, _ = failing(wire.put_multiple, [put, ok])
    assert [(a[0], a[1]) for a in answers(exc)] == [(row, "BAD_REQUEST")]
    assert (b"l", b"c", 100) in wire.cells(row + b"-ok")


# -- atomicity under concurrency ---------------------------------------------------------------

@pytest.mark.parametrize("call", ["putMultiple", "mutateRow", "mixed"])
def test_concurrent_prewrites_of_one_row_admit_exactly_one(wire, hbase_store, row, call):
    """Many clients prewrite the same row with different start_ts at once: exactly one lock
    lands, every other one is answered LOCKED or CONFLICT-free refused. putMultiple batches
    hold only a shared HBase row lock, so this needs the coprocessor's own serialization."""
    n_threads, rounds = 8, 5
    for rnd in range(rounds):
        r = row + b"-%d" % rnd
        won, refused, errors = [], [], []
        barrier = threading.Barrier(n_threads)

        def worker(i):
            w = Wire(hbase_store, wire.name.decode()[len(hbase_store.prefix):])
            start_ts = 1000 + i
            put = w.prewrite(r, start_ts, lock=b"lock-%d" % i)
            use_multi = call == "putMultiple" or (call == "mixed" and i % 2 == 0)
            barrier.wait()
            try:
                if use_multi:
                    # A second, unrelated row in the batch keeps it a real multi-row batch.
                    w.put_multiple([put, w.tput(r + b"-side-%d" % i, [(b"d", b"c", b"s", 1)])])
                else:
                    w.mutate_row(r, [put])
                won.append(start_ts)
            except w.t2.TIOError as exc:
                got = answers(exc)
                if [(a[0], a[1]) for a in got] == [(r, "LOCKED")]:
                    refused.append(start_ts)
                else:
                    errors.append(got or exc.message)
            finally:
                w.close()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert len(won) == 1, (won, refused)
        cells = wire.cells(r)
        # The lock family keeps one version, so count the data each prewrite leaves too.
        assert {k: v for k, v in cells.items() if k[0] == b"l"} == {(b"l", b"c", won[0]): b"lock-%d" % (won[0] - 1000)}
        assert [k for k in cells if k[0] == b"d"] == [(b"d", b"c", won[0])]
