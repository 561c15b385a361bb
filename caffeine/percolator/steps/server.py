"""The row steps as the server runs them: the writes a client sends, their answers, and the Python model.

Layer: percolator. Protocol steps (pure: no I/O). The coprocessor backend
(``caffeine.percolator.backends.coprocessor``) sends prewrite, commit and rollback as
*checked writes*: the row's puts, computed for the state the client expects, plus
attributes that name the step and carry the deletes it needs. Inside HBase, the
RegionObserver ``org.caffeine.hbase.PercolatorRowSteps`` (``coprocessor/``) reads the row
under the region's row lock and lets the puts through, with the carried deletes added to the
same atomic write, or refuses them with an answer, so a step costs one round trip and no
read. Every step is puts only on the wire, so the steps of many rows (of many
transactions) go in one Thrift2 ``putMultiple``: Thrift2 has no multi-row ``mutateRow``.
``row_step`` below is the same in Python: the in-memory store runs it
(``MemoryStore(row_step=row_step)``), and so do the protocol tests and the fault simulation on
it; ``step_rows`` decides a whole mini-batch, ``check`` is the decision alone.

Contract: the model and the Java classes agree answer for answer, word and arguments, and on
the deletes applied, on any attributes, any batch and any row of valid protocol cells:
``parse_request`` and ``check_families`` (``steps.requests``, where the attributes and
their tokens are described) are ``StepRequest.of`` and ``StepRequest.checkFamilies``, ``step_rows`` is
``PercolatorRowSteps.stepRows`` + ``decideAndFail`` and ``_decide`` is ``RowChecks.decide``.
``tests/protocol/test_coprocessor_parity.py`` keeps them agreeing (generated requests and delete
lists, malformed ones included, rows, and batches with several requests on one row, sent to
both); ``tests/protocol/test_coprocessor_steps.py`` runs named scenarios on both.

A batch: a row's mutations share one fate. The row's first malformed request answers its
token; otherwise two different requests on one row answer ``BAD_REQUEST
several-steps-one-row`` (checked together, both would be decided on the row as it was before
either: two transactions' prewrites could both pass); equal requests (a re-sent mutation)
are one, checked once, their deletes applied once. Non-retryable on purpose: the same batch
would be refused again; the batching client must send such requests in separate calls.

The check, per column in order, first refusal wins (the decisions of ``steps.prewrite``,
``steps.commit`` and ``steps.rollback``, over every write version at or above start_ts, so it
is never ``Inconclusive``):

- prewrite: write records at or above start_ts, newest first: a ROLLBACK at start_ts ->
  ``ROLLED_BACK``, one elsewhere is skipped, any other record -> ``CONFLICT col ts``; then
  another transaction's lock -> ``LOCKED col ts lock``; our own lock (a re-send) passes.
- commit: our lock passes; else our commit record -> ``COMMITTED ts``; else ``ROLLED_BACK``.
- rollback: our commit record -> ``COMMITTED ts``; else it passes.
- probe: always ``PROBE version`` (a client learns the coprocessor is there and which
  protocol it speaks; without it, the probe's put simply applies). The probe a client sends
  is ``caffeine.storage.probe``'s.

Arguments are lower-case hex (columns, lock values), decimal (timestamps) or, for
``BAD_REQUEST``, the token.
"""

from __future__ import annotations

import struct
from typing import Iterable, Mapping, Sequence

from caffeine.percolator.layout import LOCK, WRITE, column_name, data_family, qualifier
from caffeine.percolator.records import Committed, Kind, Lock, RolledBack, Write
from caffeine.percolator.steps.common import unlock_committed, unlock_rolled_back
from caffeine.percolator.steps.prewrite import KeyLocked, Prewritten, WriteConflict
from caffeine.percolator.steps.requests import (
    COLUMNS,
    COMMIT,
    COMMIT_TS,
    DELETE_UP_TO,
    DELETE_VERSION,
    DELETES,
    PREWRITE,
    PROBE,
    PROTOCOL_VERSION,
    ROLLBACK,
    SEVERAL_STEPS,
    START_TS,
    STEP,
    BadRequest,
    StepRequest,
    check_families,
    decode_columns,
    decode_deletes,
    encode_columns,
    encode_deletes,
    parse_request,
)
from caffeine.storage import Cell, CheckedWrite, Delete, DeleteUpTo, FamilySpec, Mutation, Put, Refusal, Row

_U64 = struct.Struct(">Q")


class BadAnswer(Exception):
    """The server answered something this client does not understand (a version mismatch)."""


def _attributes(step: bytes, start_ts: int, columns: Iterable[str], commit_ts: int | None = None,
                deletes: Sequence[Delete | DeleteUpTo] = ()):
    attrs = [(STEP, step), (START_TS, _U64.pack(start_ts)), (COLUMNS, encode_columns(columns))]
    if commit_ts is not None:
        attrs.append((COMMIT_TS, _U64.pack(commit_ts)))
    if deletes:
        attrs.append((DELETES, encode_deletes(deletes)))
    return tuple(attrs)


# -- the writes a client sends ----------------------------------------------------------------
def prewrite_write(writes: Mapping[str, bytes | None], locks: Mapping[str, bytes], start_ts: int) -> CheckedWrite:
    """Data at start_ts (none for a delete) and the lock, for every column of the row."""
    mutations: list[Mutation] = []
    for column, value in writes.items():
        q = qualifier(column)
        if value is not None:
            mutations.append(Put(data_family(q), q, start_ts, value))
        mutations.append(Put(LOCK, q, start_ts, locks[column]))
    return CheckedWrite(_attributes(PREWRITE, start_ts, writes), tuple(mutations))


def commit_write(
    kinds: Mapping[str, Kind], start_ts: int, commit_ts: int, extra: Iterable[Mutation] = ()
) -> CheckedWrite:
    """Write records at commit_ts, the locks at start_ts deleted (``unlock_committed``: every
    lock version at or below start_ts); ``extra`` rides along
    (notifications, and the piggybacked clear of one: a ``DeleteUpTo`` on the notify family).
    Puts only: the deletes travel in ``caffeine.deletes``, so commits of many rows can go in
    one multi-row put."""
    puts: list[Put] = []
    deletes: list[Delete | DeleteUpTo] = []
    for column, kind in kinds.items():
        q = qualifier(column)
        puts.append(Put(WRITE, q, commit_ts, Write(kind, start_ts).encode()))
        deletes.append(unlock_committed(q, start_ts))
    for m in extra:
        (puts if isinstance(m, Put) else deletes).append(m)
    return CheckedWrite(_attributes(COMMIT, start_ts, kinds, commit_ts, deletes), tuple(puts))


def rollback_write(columns: Iterable[str], start_ts: int) -> CheckedWrite:
    """A ROLLBACK record at start_ts fences late prewrites; lock and data at start_ts deleted
    (carried in ``caffeine.deletes``: puts only, as ``commit_write``)."""
    columns = list(columns)
    puts: list[Put] = []
    deletes: list[Delete] = []
    for column in columns:
        q = qualifier(column)
        puts.append(Put(WRITE, q, start_ts, Write(Kind.ROLLBACK, start_ts).encode()))
        deletes += unlock_rolled_back(q, start_ts)
    return CheckedWrite(_attributes(ROLLBACK, start_ts, columns, deletes=deletes), tuple(puts))


# -- what an answer means ---------------------------------------------------------------------
def prewrite_result(answer: Refusal | None):
    """``Prewritten``, ``WriteConflict``, ``KeyLocked`` or ``RolledBack``."""
    if answer is None:
        return Prewritten()
    if answer.answer == "CONFLICT":
        column, ts = answer.args
        return WriteConflict(column_name(bytes.fromhex(column)), int(ts))
    if answer.answer == "LOCKED":
        column, ts, value = answer.args
        return KeyLocked(column_name(bytes.fromhex(column)), Lock.decode(int(ts), bytes.fromhex(value)))
    if answer.answer == "ROLLED_BACK":
        return RolledBack()
    raise BadAnswer(f"prewrite answered {answer}")


def commit_result(answer: Refusal | None, commit_ts: int):
    """``Committed`` (at this commit_ts, or the one found) or ``RolledBack``."""
    if answer is None:
        return Committed(commit_ts)
    if answer.answer == "COMMITTED":
        return Committed(int(answer.args[0]))
    if answer.answer == "ROLLED_BACK":
        return RolledBack()
    raise BadAnswer(f"commit answered {answer}")


def rollback_result(answer: Refusal | None):
    """``RolledBack`` or ``Committed`` (rolling back a committed transaction refused)."""
    if answer is None:
        return RolledBack()
    if answer.answer == "COMMITTED":
        return Committed(int(answer.args[0]))
    raise BadAnswer(f"rollback answered {answer}")


# -- the check, as the server makes it ----------------------------------------------------------
# What the coprocessor does with a step row: refuse it, or apply its mutations together with
# the deletes its request carries (this tuple; empty when it carries none).
Verdict = Refusal | tuple[Delete | DeleteUpTo, ...]


def check(attributes: Mapping[bytes, bytes], row: Row, families: Mapping[bytes, FamilySpec] | None = None) -> Refusal | None:
    """The coprocessor's decision on ``row`` (every version of the row) for a checked write
    with these attributes: None lets its mutations apply (also when they name no step), else
    the refusal, ``BAD_REQUEST <token>`` for malformed attributes (see the module docstring).
    ``families``: the table's (None: carried deletes are not checked against them).
    ``PercolatorRowSteps`` answers the same, word and arguments."""
    verdict = row_step(attributes, row, families)
    return verdict if isinstance(verdict, Refusal) else None


def row_step(attributes: Mapping[bytes, bytes], row: Row, families: Mapping[bytes, FamilySpec] | None = None) -> Verdict:
    """What the coprocessor does with one checked write on ``row`` (every version of it) of a
    table with these ``families``: the refusal, or the deletes to apply atomically with the
    write's mutations (none for a write that names no step). ``MemoryStore(row_step=...)``
    runs it."""
    return step_rows([(row.key, attributes)], {row.key: row}, families).get(row.key, ())


def step_rows(
    writes: Sequence[tuple[bytes, Mapping[bytes, bytes]]], rows: Mapping[bytes, Row],
    families: Mapping[bytes, FamilySpec] | None = None,
) -> dict[bytes, Verdict]:
    """The coprocessor's verdicts on one mini-batch: ``writes`` are its mutations in batch
    order, as (row key, attributes); ``rows`` every version of each row before the batch;
    ``families`` the table's (None: carried deletes are not checked against them). Returns,
    per row with at least one step mutation, the refusal (none of the row's mutations
    applies) or the deletes its request carries (all of the row's mutations apply, and these
    with them); rows without one are left out (plain writes).

    A row's mutations share one fate. The first malformed request of the row answers
    ``BAD_REQUEST <token>``; else two different requests on the row answer ``BAD_REQUEST
    several-steps-one-row`` (decided together they would both be checked on the row as it was
    before either); equal ones (a re-sent mutation) are one request, checked once, whose
    deletes apply once."""
    requests: dict[bytes, list[StepRequest]] = {}
    bad: dict[bytes, str] = {}
    for key, attributes in writes:
        try:
            request = parse_request(attributes)
            if request is not None and families is not None:
                check_families(request, families)
        except BadRequest as exc:
            bad.setdefault(key, exc.token)
            requests.setdefault(key, [])
            continue
        if request is not None:
            distinct = requests.setdefault(key, [])
            if request not in distinct:
                distinct.append(request)
    out: dict[bytes, Verdict] = {}
    for key, distinct in requests.items():
        if key in bad:
            out[key] = Refusal("BAD_REQUEST", (bad[key],))
        elif len(distinct) > 1:
            out[key] = Refusal("BAD_REQUEST", (SEVERAL_STEPS,))
        else:
            refusal = _check_request(distinct[0], rows[key])
            out[key] = refusal if refusal is not None else distinct[0].deletes
    return out


def _check_request(request: StepRequest, row: Row) -> Refusal | None:
    """``RowChecks.check``: a well-formed request's decision on the row."""
    if request.step == PROBE:
        return Refusal("PROBE", (PROTOCOL_VERSION,))
    for q in request.columns:
        writes = [c for c in row.versions(WRITE, q) if c.ts >= request.start_ts]
        refusal = _decide(request, q, row.latest(LOCK, q), writes)
        if refusal is not None:
            return refusal
    return None


def _decide(request: StepRequest, q: bytes, lock: Cell | None, writes: list[Cell]) -> Refusal | None:
    """``RowChecks.decide`` for one column: its latest lock and its write records at or
    above start_ts, newest first."""
    start_ts = request.start_ts
    if request.step == PREWRITE:
        for w in writes:
            if _is_rollback(w):
                if w.ts == start_ts:
                    return Refusal("ROLLED_BACK")
                continue
            return Refusal("CONFLICT", (q.hex(), str(w.ts)))
        if lock is not None and lock.ts != start_ts:
            return Refusal("LOCKED", (q.hex(), str(lock.ts), lock.value.hex()))
        return None
    if request.step == COMMIT and lock is not None and lock.ts == start_ts:
        return None
    record = _commit_record_of(writes, start_ts)
    if record is not None:
        return Refusal("COMMITTED", (str(record.ts),))
    return Refusal("ROLLED_BACK") if request.step == COMMIT else None


def _is_rollback(w: Cell) -> bool:
    """Whether a write cell is a ROLLBACK record (Java reads only the kind byte; an empty value
    is "not a rollback")."""
    return bool(w.value) and w.value[0] == Kind.ROLLBACK


def _commit_record_of(writes: list[Cell], start_ts: int) -> Cell | None:
    """The newest PUT/DELETE record (not a ROLLBACK) naming ``start_ts``, or None."""
    for w in writes:
        if len(w.value) >= 9 and not _is_rollback(w) and _U64.unpack_from(w.value, 1)[0] == start_ts:
            return w
    return None


__all__ = [
    "STEP", "START_TS", "COMMIT_TS", "COLUMNS", "PROTOCOL_VERSION", "BadAnswer", "BadRequest", "StepRequest",
    "prewrite_write", "commit_write", "rollback_write",
    "prewrite_result", "commit_result", "rollback_result", "check", "row_step", "step_rows", "parse_request",
    "check_families", "encode_columns", "decode_columns", "encode_deletes", "decode_deletes", "Verdict",
    "DELETES", "DELETE_VERSION", "DELETE_UP_TO", "SEVERAL_STEPS", "PREWRITE", "COMMIT", "ROLLBACK", "PROBE",
]
