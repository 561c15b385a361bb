"""The coprocessor's row steps and their Python model agree, answer for answer, on any request.

``org.caffeine.hbase.PercolatorRowSteps`` (parsing in ``StepRequest``, deciding in
``RowChecks``) and ``caffeine.percolator.steps.server.check`` (what the in-memory store and
the fault simulation run) are two implementations of one contract. Here hypothesis generates
step requests, well-formed and malformed (every step kind, an unknown step, no step at all;
attributes missing, of the wrong length, timestamps with the top bit set, commit_ts not after
start_ts, column lists empty, truncated, with an empty column, naming columns the row lacks;
unrelated attributes), and rows made of valid protocol cells (a lock per column at most,
write records of every kind at any timestamp naming any start_ts, data). Each case's row is
written fresh to a MemoryStore running the model and to a Percolator table on the real HBase,
the same ``CheckedWrite`` goes to both, and both must give the same answer (word and
arguments) and leave the same row.

That property needs HBase with the coprocessor loaded (``caffeine up``): without it the test
is skipped, except under CI (``CI=true``), where it fails. Its examples are derandomized, so a
run tests the same cases every time. A pure test pins how the answers are read back out of
HBase's error messages (``parse_refusals``).
"""

from __future__ import annotations

import os
import struct
import uuid
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, example, given, note, settings
from hypothesis import strategies as st

from caffeine.percolator import layout
from caffeine.percolator.layout import ACK, DATA, LOCK, NOTIFY, WRITE
from caffeine.percolator.records import CellRef, Kind, Lock, Write
from caffeine.percolator.steps import server
from caffeine.storage import CheckedWrite, Delete, DeleteUpTo, Mutation, Put, ReadSpec, Refusal
from caffeine.storage.memory import MemoryStore
from caffeine.storage.model import parse_refusals
from support.session import require_coprocessor

BASE = 1_000_000
TOP_BIT = 1 << 63
# The row's columns, and one a request may name that the row never has.
ROW_COLUMNS = (b"a", b"b", b"c")
ABSENT = b"z"
# A narrow range of timestamps, so locks, records and requests meet often.
TS = st.integers(BASE, BASE + 8)


@dataclass(frozen=True)
class Case:
    """One row state (plain puts) and one checked write sent to it."""

    state: tuple[Put, ...]
    write: CheckedWrite


# -- building cases ----------------------------------------------------------------------------
def u64(value: int) -> bytes:
    return struct.pack(">Q", value)


def column_list(*qualifiers: bytes) -> bytes:
    """``caffeine.columns`` as the client encodes it: 4-byte big-endian length, then bytes."""
    return b"".join(struct.pack(">I", len(q)) + q for q in qualifiers)


def lock_value(start_ts: int, primary_row: bytes = b"p") -> bytes:
    return Lock(start_ts, Kind.PUT, CellRef("t", primary_row, "c"), 3000, b"owner", 0).encode()


def step_mutations(step: bytes | None, start_ts: int, commit_ts: int, columns) -> tuple[Mutation, ...]:
    """What a client sending ``step`` means to write (valid timestamps whatever the attributes
    say): a probe writes nothing, an unknown or missing step a prewrite's cells."""
    names = list(columns)
    if step == server.PROBE:
        return ()
    if step == server.COMMIT:
        return server.commit_write({c: Kind.PUT for c in names}, start_ts, commit_ts).mutations
    if step == server.ROLLBACK:
        return server.rollback_write(names, start_ts).mutations
    values = {c: b"v%d" % start_ts for c in names}
    return server.prewrite_write(values, {c: lock_value(start_ts) for c in names}, start_ts).mutations


def request(
    step: bytes | None = server.PREWRITE,
    start_ts: int = BASE + 4,
    commit_ts: int | None = None,
    columns: tuple[bytes, ...] = (b"a",),
    state: tuple[Put, ...] = (),
    **attributes: bytes | None,
) -> Case:
    """A case for the @examples: a request well-formed unless ``attributes`` override one
    (keys ``start``, ``commit``, ``cols``; None leaves it out; other keys are added as
    unrelated attributes ``x.<key>``)."""
    attrs: dict[bytes, bytes | None] = {
        server.STEP: step,
        server.START_TS: u64(start_ts),
        server.COMMIT_TS: None if commit_ts is None else u64(commit_ts),
        server.COLUMNS: column_list(*columns),
    }
    keys = {"start": server.START_TS, "commit": server.COMMIT_TS, "cols": server.COLUMNS}
    for key, value in attributes.items():
        attrs[keys.get(key, b"x." + key.encode())] = value
    pairs = tuple((k, v) for k, v in attrs.items() if v is not None)
    mutations = step_mutations(step, start_ts, commit_ts or start_ts + 1, columns)
    return Case(state, CheckedWrite(pairs, mutations))


def locked(column: bytes, ts: int) -> Put:
    return Put(LOCK, column, ts, lock_value(ts))


def record(column: bytes, ts: int, kind: Kind, start_ts: int) -> Put:
    return Put(WRITE, column, ts, Write(kind, start_ts).encode())


# -- strategies ----------------------------------------------------------------------------------
def near(start_ts: int) -> st.SearchStrategy[int]:
    """A timestamp of the narrow range, start_ts itself a quarter of the time: the checks
    turn on locks and records at start_ts and records naming it."""
    return st.sampled_from([start_ts] * 3 + list(range(BASE, BASE + 9)))


@st.composite
def row_states(draw, start_ts: int) -> tuple[Put, ...]:
    """Valid protocol cells: per column at most one lock (family ``l`` keeps one version),
    write records of any kind at distinct timestamps naming any start_ts, data."""
    cells: list[Put] = []
    for q in draw(st.lists(st.sampled_from(ROW_COLUMNS), unique=True, max_size=len(ROW_COLUMNS))):
        lock_ts = draw(st.none() | near(start_ts))
        if lock_ts is not None:
            primary = draw(st.sampled_from([b"p", b"", bytes(range(7))]))
            cells.append(Put(LOCK, q, lock_ts, lock_value(lock_ts, primary)))
        records = draw(st.dictionaries(
            near(start_ts), st.tuples(st.sampled_from(list(Kind)), near(start_ts)), max_size=3))
        cells += [record(q, ts, kind, start) for ts, (kind, start) in records.items()]
        data = draw(st.dictionaries(near(start_ts), st.binary(min_size=1, max_size=4), max_size=2))
        cells += [Put(DATA, q, ts, value) for ts, value in data.items()]
    return tuple(cells)


def malformed_timestamp(ts: int) -> st.SearchStrategy[bytes | None]:
    """Missing (None), 7 or 9 bytes, or with the top bit set."""
    return st.sampled_from([None, u64(ts)[1:], u64(ts) + b"\x00", u64(ts | TOP_BIT), b"\xff" * 8])


@st.composite
def malformed_columns(draw, columns: list[bytes]) -> bytes | None:
    """Missing (None), empty, cut short, with an empty column, with a length whose top bit
    is set, or with trailing bytes."""
    good = column_list(*columns)
    kind = draw(st.sampled_from(["missing", "empty", "cut", "empty-column", "huge", "trailing"]))
    if kind == "missing":
        return None
    if kind == "empty":
        return b""
    if kind == "cut":
        return good[:draw(st.integers(1, len(good) - 1))]
    if kind == "empty-column":
        at = draw(st.integers(0, len(columns)))
        return column_list(*columns[:at]) + column_list(b"") + column_list(*columns[at:])
    if kind == "huge":
        return good + b"\x80\x00\x00\x01c"
    return good + draw(st.binary(min_size=1, max_size=3))


# Families a carried delete may name: the layout's, one the table lacks, the reserved ones.
DELETE_FAMILIES = (LOCK, DATA, WRITE, NOTIFY, ACK)


def delete_entry(kind: int, ts: int, family: bytes, qualifier: bytes) -> bytes:
    """One entry of ``caffeine.deletes``, any field allowed out of range."""
    return bytes([kind]) + u64(ts) + bytes([len(family)]) + family + struct.pack(">i", len(qualifier)) + qualifier


@st.composite
def valid_deletes(draw, start_ts: int) -> list:
    """Deletes of the row's protocol cells: exact versions and every version up to a
    timestamp, in any family of the layout."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        family = draw(st.sampled_from(DELETE_FAMILIES))
        q = draw(st.sampled_from(ROW_COLUMNS + (ABSENT,)))
        ts = draw(near(start_ts))
        out.append(DeleteUpTo(family, q, ts) if draw(st.booleans()) else Delete(family, q, ts))
    return out


@st.composite
def deletes_attribute(draw, start_ts: int) -> bytes:
    """``caffeine.deletes``: mostly a valid list; else one flaw: an empty value, an unknown
    kind, a timestamp out of range (top bit, Long.MAX_VALUE), an empty, reserved or unknown
    family, a negative qualifier length, a list cut short anywhere."""
    good = server.encode_deletes(draw(valid_deletes(start_ts)))
    flaw = draw(st.sampled_from(["none"] * 6 + [
        "empty", "kind", "ts-top", "ts-max", "empty-family", "reserved", "unknown-family", "negative", "cut"]))
    ts, q = draw(near(start_ts)), draw(st.sampled_from(ROW_COLUMNS))
    bad = {
        "kind": delete_entry(draw(st.sampled_from([0, 3, 255])), ts, LOCK, q),
        "ts-top": delete_entry(1, ts | TOP_BIT, LOCK, q),
        "ts-max": delete_entry(2, TOP_BIT - 1, LOCK, q),
        "empty-family": delete_entry(1, ts, b"", q),
        "reserved": delete_entry(1, ts, draw(st.sampled_from([b"_g", b"_n"])), q),
        "unknown-family": delete_entry(1, ts, b"x", q),
        "negative": delete_entry(1, ts, LOCK, q)[:-len(q) - 4] + b"\xff\xff\xff\xfe" + q,
    }
    if flaw == "none":
        return good
    if flaw == "empty":
        return b""
    if flaw == "cut":
        return good[:draw(st.integers(1, len(good) - 1))]
    # The flawed entry before, between or after the good ones: the first problem answers.
    at = draw(st.sampled_from([0, len(good)]))
    return good[:at] + bad[flaw] + good[at:]


@st.composite
def attributes(draw, step: bytes | None, start_ts: int, commit_ts: int, columns: list[bytes]) -> tuple:
    """The request's attributes: about half well-formed, the others with one or two flaws;
    now and then unrelated attributes beside them; often a list of carried deletes (their
    own flaws included)."""
    attrs: dict[bytes, bytes | None] = {server.STEP: step, server.START_TS: u64(start_ts)}
    if step == server.COMMIT or draw(st.integers(0, 3)) == 0:
        attrs[server.COMMIT_TS] = u64(commit_ts)
    attrs[server.COLUMNS] = column_list(*columns)
    if draw(st.integers(0, 2)) == 0:
        attrs[server.DELETES] = draw(deletes_attribute(start_ts))
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 1, 2]))):
        name = draw(st.sampled_from([server.START_TS, server.COMMIT_TS, server.COLUMNS]))
        if name == server.COLUMNS:
            attrs[name] = draw(malformed_columns(columns))
        else:
            attrs[name] = draw(malformed_timestamp(start_ts if name == server.START_TS else commit_ts))
    for key in draw(st.lists(st.sampled_from([b"caffeine.other", b"x", b"caffeine.step2"]), unique=True, max_size=2)):
        attrs[key] = draw(st.binary(max_size=9))
    return tuple((k, v) for k, v in attrs.items() if v is not None)


@st.composite
def cases(draw) -> Case:
    step = draw(st.sampled_from([server.PREWRITE, server.COMMIT, server.ROLLBACK] * 5 + [server.PROBE, None, "?"]))
    if step == "?":
        step = draw(st.sampled_from([b"unknown", b"", b"PREWRITE", b"commit\x00"]))
    start_ts = draw(TS)
    # Mostly after start_ts, as a client sends it; sometimes at or below it.
    commit_ts = start_ts + draw(st.sampled_from([1, 2, 3, 5] * 3 + [0, -1, -2]))
    columns = draw(st.lists(st.sampled_from(ROW_COLUMNS + (ABSENT,)), min_size=1, max_size=3, unique=True))
    attrs = draw(attributes(step, start_ts, commit_ts, columns))
    mutations = step_mutations(step, start_ts, commit_ts, [c.decode() for c in columns])
    return Case(draw(row_states(start_ts)), CheckedWrite(attrs, mutations))


# -- the stores ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def twins(hbase_store):
    """(model store, HBase store, table): one Percolator table on each."""
    require_coprocessor(hbase_store)
    model = MemoryStore(row_step=server.row_step)
    table = "cpp" + uuid.uuid4().hex[:10]
    for store in (model, hbase_store):
        layout.create_table(store, table)
    yield model, hbase_store, table
    hbase_store.drop_table(table)


def outcome(store, table: str, case: Case):
    """The answer to the case's write on a fresh row holding its state, and the row after."""
    row = b"r" + uuid.uuid4().hex.encode()
    if case.state:
        store.mutate_row(table, row, list(case.state))
    answer = store.apply_checked(table, {row: case.write})[row]
    cells = sorted((c.family, c.qualifier, c.ts, c.value) for c in store.read_row(table, row, ReadSpec(versions=1000)))
    return answer, cells


# -- the property ----------------------------------------------------------------------------------
S = BASE + 4


@pytest.mark.hbase
@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(case=cases())
# Malformed, one of each kind, on rows where the model's per-column check would let the
# write through or answer otherwise.
@example(case=request(server.COMMIT, state=(locked(b"a", S),)))                       # commit_ts missing
@example(case=request(server.COMMIT, commit_ts=S, state=(locked(b"a", S),)))          # commit_ts == start_ts
@example(case=request(server.COMMIT, commit_ts=S - 1, state=(locked(b"a", S),)))      # commit_ts < start_ts
@example(case=request(server.COMMIT, commit_ts=S + 1, commit=b"\x00" * 7))          # commit_ts 7 bytes
@example(case=request(server.COMMIT, commit_ts=S + 1, commit=u64(S | TOP_BIT)))     # commit_ts top bit
@example(case=request(server.PREWRITE, start=u64(S | TOP_BIT)))                       # start_ts top bit
@example(case=request(server.ROLLBACK, start=b"\xff" * 8))                            # start_ts top bit
@example(case=request(server.PREWRITE, start=b"\x00" * 7))                            # start_ts 7 bytes
@example(case=request(server.PREWRITE, start=None))                                   # start_ts missing
@example(case=request(server.PREWRITE, cols=b""))                                     # no columns
@example(case=request(server.ROLLBACK, cols=None))                                    # columns missing
@example(case=request(server.PREWRITE, cols=column_list(b"a") + b"\x00\x00"))       # truncated
@example(case=request(server.PREWRITE, cols=b"\x00\x00\x00\x09ab"))                 # truncated
@example(case=request(server.PREWRITE, cols=column_list(b"a", b"")))                 # an empty column
@example(case=request(server.PREWRITE, cols=b"\x80\x00\x00\x01a"))                  # a negative length
@example(case=request(b"unknown"))                                                    # unknown step
@example(case=request(b"unknown", start=None, cols=None))                             # unknown, nothing else
@example(case=request(server.PROBE, start=b"\x01", cols=b""))                        # probe ignores the rest
@example(case=request(None))                                                          # no step: a plain write
# Well-formed, where the per-column decisions meet: several columns incl. an absent one,
# a ROLLBACK record at start_ts beside a commit record, our lock beside commit records.
@example(case=request(server.PREWRITE, columns=(b"z", b"a", b"b"), other=b"1", state=(
    record(b"a", S + 2, Kind.ROLLBACK, S + 2), locked(b"b", S - 1))))
@example(case=request(server.COMMIT, commit_ts=S + 3, columns=(b"a", b"b"), state=(
    locked(b"a", S), record(b"b", S, Kind.ROLLBACK, S), record(b"b", S + 2, Kind.PUT, S))))
@example(case=request(server.PREWRITE, columns=(b"a",), state=(
    record(b"a", S, Kind.ROLLBACK, S), record(b"a", S + 1, Kind.PUT, S - 3))))
@example(case=request(server.ROLLBACK, columns=(b"a", b"b"), state=(
    locked(b"a", S), record(b"b", S + 3, Kind.DELETE, S), record(b"b", S, Kind.ROLLBACK, S))))
def test_model_and_coprocessor_answer_alike(twins, case):
    model, hbase, table = twins
    note(f"row state: {case.state}")
    note(f"attributes: {dict(case.write.attributes)}")
    note(f"mutations: {case.write.mutations}")
    expected = outcome(model, table, case)
    got = outcome(hbase, table, case)
    assert got[0] == expected[0], f"answers differ: HBase {got[0]}, model {expected[0]}"
    assert got[1] == expected[1], "rows differ after the write"


# -- several requests on one row in one batch -------------------------------------------------------
@st.composite
def batches(draw) -> tuple[tuple[Put, ...], tuple[tuple[bytes, CheckedWrite], ...]]:
    """A row state and a putMultiple of 2 to 4 checked writes on two rows: the first row
    always gets two of them, now equal (a re-sent request: checked once, its deletes applied
    once), now different (refused whole), now one malformed."""
    first = draw(cases())
    second = first if draw(st.booleans()) else draw(cases())
    writes = [(b"one", first.write), (b"one", second.write)]
    for _ in range(draw(st.integers(0, 2))):
        writes.append((draw(st.sampled_from([b"one", b"two"])), draw(cases()).write))
    order = draw(st.permutations(range(len(writes))))
    return first.state, tuple(writes[i] for i in order)


def batch_outcome_hbase(store, table: str, state, writes, prefix: bytes):
    """The batch as one raw putMultiple on rows holding ``state``: the answers read out of the
    error (rows it does not name applied) and the rows after."""
    from caffeine.storage.thrift_errors import step_answers

    keys = sorted({prefix + row for row, _ in writes})
    for key in keys:
        if state:
            store.mutate_row(table, key, list(state))
    tputs = [store.codec.guarded_tput(prefix + row, w.mutations, os.urandom(16), w.attributes) for row, w in writes]
    name = store._name(table)
    answers: dict[bytes, Refusal] = {}
    try:
        store.thrift2.call(lambda c: c.putMultiple(name, tputs), idempotent=False)
    except Exception as exc:  # noqa: BLE001 - the refusals are in the message
        answers = step_answers(exc)
        assert answers, f"not an answer: {exc!r}"
    return ({key[len(prefix):]: answers.get(key) for key in keys},
            {key[len(prefix):]: cells_of(store, table, key) for key in keys})


def batch_outcome_model(model, table: str, state, writes, prefix: bytes):
    """The same batch decided by ``server.step_rows`` on the model's rows and applied as the
    coprocessor applies it: a refused row not at all, an accepted one whole, deletes included."""
    keys = sorted({prefix + row for row, _ in writes})
    for key in keys:
        if state:
            model.mutate_row(table, key, list(state))
    rows = {key: model.read_row(table, key, ReadSpec(versions=1000)) for key in keys}
    verdicts = server.step_rows([(prefix + row, dict(w.attributes)) for row, w in writes], rows,
                                {f: spec for f, spec in layout.FAMILIES.items()})
    answers = {}
    for key in keys:
        verdict = verdicts.get(key, ())
        answers[key[len(prefix):]] = verdict if isinstance(verdict, Refusal) else None
        if not isinstance(verdict, Refusal):
            mutations = [m for row, w in writes if prefix + row == key for m in w.mutations]
            model.mutate_row(table, key, [*mutations, *verdict])
    return answers, {key[len(prefix):]: cells_of(model, table, key) for key in keys}


def cells_of(store, table: str, key: bytes):
    return sorted((c.family, c.qualifier, c.ts, c.value) for c in store.read_row(table, key, ReadSpec(versions=1000)))


@pytest.mark.hbase
@settings(max_examples=120, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(batch=batches())
def test_batches_with_several_requests_on_one_row_answer_alike(twins, batch):
    model, hbase, table = twins
    state, writes = batch
    note(f"row state: {state}")
    for row, write in writes:
        note(f"{row!r}: attributes {dict(write.attributes)}, mutations {write.mutations}")
    prefix = b"b" + uuid.uuid4().hex.encode() + b"-"
    expected = batch_outcome_model(model, table, state, writes, prefix)
    got = batch_outcome_hbase(hbase, table, state, writes, prefix)
    assert got[0] == expected[0], f"answers differ: HBase {got[0]}, model {expected[0]}"
    assert got[1] == expected[1], "rows differ after the batch"


# -- reading the answers back ----------------------------------------------------------------------
# Messages as HBase 2.6 words them through Thrift2 (stack traces shortened): one mutateRow, and
# one putMultiple whose refusals HBase folds into one message.
MUTATE_ROW = ("TIOError: Failed 1 action: org.apache.hadoop.hbase.DoNotRetryIOException: "
              "CAFFEINE-STEP row=7231 BAD_REQUEST commit_ts-not-after-start_ts\n: 1 time, "
              "servers with issues: localhost,16020,1795820209338")
_AT = "\n\tat org.apache.hadoop.hbase.regionserver.RSRpcServices.doBatchOp(RSRpcServices.java:1134)\n: 1 time, "
PUT_MULTIPLE = ("TIOError: Failed 4 actions: org.apache.hadoop.hbase.DoNotRetryIOException: "
                "CAFFEINE-STEP row=6c6b LOCKED 63 7 4c4f434b" + _AT
                + "org.apache.hadoop.hbase.DoNotRetryIOException: CAFFEINE-STEP row=7232 BAD_REQUEST empty-column" + _AT
                + "org.apache.hadoop.hbase.DoNotRetryIOException: CAFFEINE-STEP row=7233 ROLLED_BACK" + _AT
                + "org.apache.hadoop.hbase.DoNotRetryIOException: CAFFEINE-STEP row=7234 BAD_REQUEST no-columns" + _AT
                + "servers with issues: localhost,16020,1795820209338")


def test_refusals_are_read_out_of_hbase_messages():
    """A BAD_REQUEST's token is its one argument and stops where it ends; the other answers'
    arguments read as hex and decimal words, as before."""
    assert parse_refusals(MUTATE_ROW) == {b"r1": Refusal("BAD_REQUEST", ("commit_ts-not-after-start_ts",))}
    assert parse_refusals(PUT_MULTIPLE) == {
        b"lk": Refusal("LOCKED", ("63", "7", "4c4f434b")),
        b"r2": Refusal("BAD_REQUEST", ("empty-column",)),
        b"r3": Refusal("ROLLED_BACK"),
        b"r4": Refusal("BAD_REQUEST", ("no-columns",)),
    }
    assert parse_refusals("CAFFEINE-STEP row=72 BAD_REQUEST unknown-step: 1 time, x y") == {
        b"r": Refusal("BAD_REQUEST", ("unknown-step",))}
    assert parse_refusals("CAFFEINE-STEP row=72 PROBE 1\n") == {b"r": Refusal("PROBE", ("1",))}
