"""The row steps as the server runs them: the wire format (protocol 2), and the Python model.

Layer: percolator steps (pure: no I/O). The coprocessor backend (``caffeine.percolator.committer``)
sends prewrite, commit and rollback as *checked writes*: the row's puts, computed for the
state the client expects, plus attributes that name the step and carry the deletes it needs.
Inside HBase, the RegionObserver ``org.caffeine.hbase.PercolatorRowSteps`` (``coprocessor/``)
reads the row under the region's row lock and lets the puts through, with the carried deletes
added to the same atomic write, or refuses them with an answer, so a step costs one round trip
and no read. Every step is puts only on the wire, so the steps of many rows (of many
transactions) go in one Thrift2 ``putMultiple``: Thrift2 has no multi-row ``mutateRow``.
``row_step`` below is the same in Python: the in-memory store runs it
(``MemoryStore(row_step=row_step)``), and so do the protocol tests and the fault simulation on
it; ``step_rows`` decides a whole mini-batch, ``check`` is the decision alone.

Contract: the model and the Java classes agree answer for answer, word and arguments, and on
the deletes applied, on any attributes, any batch and any row of valid protocol cells:
``parse_request`` is ``StepRequest.of`` (the same checks in the same order, the same tokens),
``check_families`` is ``StepRequest.checkFamilies``, ``step_rows`` is
``PercolatorRowSteps.stepRows`` + ``decideAndFail`` and ``_decide`` is ``RowChecks.decide``.
``tests/test_coprocessor_parity.py`` keeps them agreeing (generated requests and delete
lists, malformed ones included, rows, and batches with several requests on one row, sent to
both); ``tests/test_coprocessor_steps.py`` runs named scenarios on both.

Attributes (all values bytes):

- ``caffeine.step``: ``prewrite`` | ``commit`` | ``rollback`` | ``probe``; none at all asks for
  nothing (a plain write)
- ``caffeine.start_ts`` (not for probe), ``caffeine.commit_ts`` (commit only, after start_ts):
  8 bytes, big-endian, below 2**63 (HBase's cell timestamps are non-negative Java longs)
- ``caffeine.columns`` (not for probe): the user columns the step covers, at least one, each a
  4-byte big-endian length (at least 1) + bytes
- ``caffeine.deletes`` (optional, not for probe): deletes of the same row, applied with the
  mutation, atomically, only if the row passes. At least one entry, each: a kind byte (1:
  exactly the version at the timestamp, ``Delete``; 2: every version at or below it,
  ``DeleteUpTo``), the timestamp (8 bytes big-endian, below 2**63 - 1, which HBase reads as
  "now"), the family *by name* (a 1-byte length, at least 1, then the name: ``l`` lock, ``d``
  or ``a`` data, ``n`` notify; the name rather than a code, so the coprocessor needs no copy
  of the layout and checks it against the table's own families), the qualifier (a 4-byte
  big-endian length, then the bytes, possibly none). ``commit_write`` carries the locks at
  start_ts and the caller's extra deletes (the piggybacked notification clear, a
  ``DeleteUpTo`` on ``n``); ``rollback_write`` the lock and the data at start_ts.

Malformed attributes answer ``BAD_REQUEST <token>``, before the row is read; the token names
the first check that failed, in this order: ``unknown-step``; ``missing-start_ts``,
``start_ts-not-8-bytes``, ``start_ts-out-of-range``; for a commit ``missing-commit_ts``,
``commit_ts-not-8-bytes``, ``commit_ts-out-of-range``, ``commit_ts-not-after-start_ts``;
``missing-columns``, ``truncated-columns`` / ``empty-column`` (whichever column comes first),
``no-columns``; the delete list, entry by entry (``decode_deletes``): ``no-deletes``,
``unknown-delete-kind``, ``delete-ts-out-of-range``, ``empty-delete-family``,
``reserved-delete-family`` (``_g``, ``_n``), ``truncated-deletes``; then against the table, in
list order: ``unknown-delete-family`` (HBase would fail the whole mini-batch on it, every
other row included), ``counted-delete-family`` (a counted family takes no deletes).
Attributes a step does not use are not looked at (a probe's, a prewrite's commit_ts), nor
are unrelated ones.

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
  protocol it speaks; without it, the probe's put simply applies).

Arguments are lower-case hex (columns, lock values), decimal (timestamps) or, for
``BAD_REQUEST``, the token.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from caffeine.percolator.layout import LOCK, WRITE, column_name, data_family, qualifier
from caffeine.percolator.records import Committed, Kind, Lock, RolledBack, Write
from caffeine.percolator.steps.prewrite import KeyLocked, Prewritten, WriteConflict
from caffeine.storage import Cell, CheckedWrite, Delete, DeleteUpTo, FamilySpec, Mutation, Put, Refusal, Row
from caffeine.storage.model import RESERVED_FAMILIES

STEP = b"caffeine.step"
START_TS = b"caffeine.start_ts"
COMMIT_TS = b"caffeine.commit_ts"
COLUMNS = b"caffeine.columns"
DELETES = b"caffeine.deletes"

# A carried delete's kind byte: exactly the version at its timestamp (``Delete``), or every
# version at or below it (``DeleteUpTo``).
DELETE_VERSION = 1
DELETE_UP_TO = 2

PREWRITE = b"prewrite"
COMMIT = b"commit"
ROLLBACK = b"rollback"
PROBE = b"probe"

_STEPS = (PREWRITE, COMMIT, ROLLBACK, PROBE)

PROTOCOL_VERSION = "2"
# The BAD_REQUEST token of a row with two different step requests in one batch.
SEVERAL_STEPS = "several-steps-one-row"

_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
_U8 = struct.Struct(">B")
# HBase cell timestamps are non-negative Java longs: a request's timestamps are below this.
_TS_LIMIT = 1 << 63
# A carried delete's timestamp is below this too: HBase reads Long.MAX_VALUE as "now".
_DELETE_TS_LIMIT = (1 << 63) - 1


class BadAnswer(Exception):
    """The server answered something this client does not understand (a version mismatch)."""


class BadRequest(ValueError):
    """Attributes that form no valid request; ``token`` is the coprocessor's one-word reason
    (``StepRequest.BadRequest``), sent back as ``BAD_REQUEST <token>``."""

    def __init__(self, token: str) -> None:
        super().__init__(token)
        self.token = token


@dataclass(frozen=True, slots=True)
class StepRequest:
    """The checked row step a write asks for (``StepRequest.java``). A probe has no
    timestamps or columns; commit_ts is 0 except for a commit."""

    step: bytes
    start_ts: int = 0
    commit_ts: int = 0
    columns: tuple[bytes, ...] = ()
    deletes: tuple[Delete | DeleteUpTo, ...] = ()


def encode_columns(columns: Iterable[str]) -> bytes:
    return b"".join(_U32.pack(len(q)) + q for q in map(qualifier, columns))


def decode_columns(data: bytes | None) -> tuple[bytes, ...]:
    """The qualifiers of a ``caffeine.columns`` value, or ``BadRequest``: ``missing-columns``
    for None, ``truncated-columns`` for a length field cut short or a length running past the
    end (a length with the top bit set reads as negative, as in Java), ``empty-column`` for a
    length of 0 (an empty qualifier could not be named in a space-separated answer),
    ``no-columns`` when there is none; the first problem in the value wins."""
    if data is None:
        raise BadRequest("missing-columns")
    out, at = [], 0
    while at < len(data):
        if len(data) - at < 4:
            raise BadRequest("truncated-columns")
        (n,) = _I32.unpack_from(data, at)
        at += 4
        if n <= 0 or n > len(data) - at:
            raise BadRequest("empty-column" if n == 0 else "truncated-columns")
        out.append(data[at:at + n])
        at += n
    if not out:
        raise BadRequest("no-columns")
    return tuple(out)


def encode_deletes(deletes: Iterable[Delete | DeleteUpTo]) -> bytes:
    """``caffeine.deletes``: per delete its kind byte, timestamp (8 bytes), family (1-byte
    length + name) and qualifier (4-byte length + bytes)."""
    out = []
    for d in deletes:
        kind = DELETE_UP_TO if isinstance(d, DeleteUpTo) else DELETE_VERSION
        out.append(_U8.pack(kind) + _U64.pack(d.ts) + _U8.pack(len(d.family)) + d.family
                   + _U32.pack(len(d.qualifier)) + d.qualifier)
    return b"".join(out)


def decode_deletes(data: bytes | None) -> tuple[Delete | DeleteUpTo, ...]:
    """The deletes of a ``caffeine.deletes`` value (none for None), or ``BadRequest`` for the
    first problem met reading each entry in turn: ``unknown-delete-kind``,
    ``delete-ts-out-of-range`` (top bit set, or 2**63-1, which HBase reads as "now"),
    ``empty-delete-family``, ``reserved-delete-family`` (the guard's ``_g``, the counts'
    ``_n``), ``truncated-deletes`` for a field cut short or a length running past the end (a
    qualifier length with the top bit set reads as negative, as in Java); ``no-deletes`` for
    an empty value. ``StepRequest.deletes`` reads the same."""
    if data is None:
        return ()
    if not data:
        raise BadRequest("no-deletes")
    out: list[Delete | DeleteUpTo] = []
    at = 0

    def take(n: int) -> bytes:
        nonlocal at
        if len(data) - at < n:
            raise BadRequest("truncated-deletes")
        at += n
        return data[at - n:at]

    while at < len(data):
        kind = take(1)[0]
        if kind not in (DELETE_VERSION, DELETE_UP_TO):
            raise BadRequest("unknown-delete-kind")
        (ts,) = _U64.unpack(take(8))
        if ts >= _DELETE_TS_LIMIT:
            raise BadRequest("delete-ts-out-of-range")
        family_length = take(1)[0]
        if family_length == 0:
            raise BadRequest("empty-delete-family")
        family = take(family_length)
        if family in RESERVED_FAMILIES:  # StepRequest.RESERVED
            raise BadRequest("reserved-delete-family")
        (qualifier_length,) = _I32.unpack(take(4))
        if qualifier_length < 0:
            raise BadRequest("truncated-deletes")
        qualifier = take(qualifier_length)
        out.append((DeleteUpTo if kind == DELETE_UP_TO else Delete)(family, qualifier, ts))
    return tuple(out)


def check_families(request: StepRequest, families: Mapping[bytes, FamilySpec]) -> None:
    """``StepRequest.checkFamilies``: ``BadRequest`` for the first carried delete in a family
    the table lacks (``unknown-delete-family``) or in a counted one (``counted-delete-family``)."""
    for d in request.deletes:
        spec = families.get(d.family)
        if spec is None:
            raise BadRequest("unknown-delete-family")
        if spec.counted:
            raise BadRequest("counted-delete-family")


def _timestamp(raw: bytes | None, name: str) -> int:
    """A request timestamp (8 bytes, big-endian, below 2**63), or ``BadRequest``
    ``missing-<name>``, ``<name>-not-8-bytes``, ``<name>-out-of-range``."""
    if raw is None:
        raise BadRequest(f"missing-{name}")
    if len(raw) != 8:
        raise BadRequest(f"{name}-not-8-bytes")
    (ts,) = _U64.unpack(raw)
    if ts >= _TS_LIMIT:
        raise BadRequest(f"{name}-out-of-range")
    return ts


def parse_request(attributes: Mapping[bytes, bytes]) -> StepRequest | None:
    """The request a write's attributes make, as ``StepRequest.of`` parses them: None without
    ``caffeine.step``, else the request or ``BadRequest`` for the first failing check (order:
    the step; for all but a probe start_ts; for a commit commit_ts, then commit_ts after
    start_ts; the columns; the carried deletes)."""
    step = attributes.get(STEP)
    if step is None:
        return None
    if step not in _STEPS:
        raise BadRequest("unknown-step")
    if step == PROBE:
        return StepRequest(PROBE)
    start_ts = _timestamp(attributes.get(START_TS), "start_ts")
    commit_ts = 0
    if step == COMMIT:
        commit_ts = _timestamp(attributes.get(COMMIT_TS), "commit_ts")
        if commit_ts <= start_ts:
            raise BadRequest("commit_ts-not-after-start_ts")
    columns = decode_columns(attributes.get(COLUMNS))
    return StepRequest(step, start_ts, commit_ts, columns, decode_deletes(attributes.get(DELETES)))


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
    """Write records at commit_ts, the locks at start_ts deleted; ``extra`` rides along
    (notifications, and the piggybacked clear of one: a ``DeleteUpTo`` on the notify family).
    Puts only: the deletes travel in ``caffeine.deletes``, so commits of many rows can go in
    one multi-row put."""
    puts: list[Put] = []
    deletes: list[Delete | DeleteUpTo] = []
    for column, kind in kinds.items():
        q = qualifier(column)
        puts.append(Put(WRITE, q, commit_ts, Write(kind, start_ts).encode()))
        deletes.append(Delete(LOCK, q, start_ts))
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
        deletes += [Delete(LOCK, q, start_ts), Delete(data_family(q), q, start_ts)]
    return CheckedWrite(_attributes(ROLLBACK, start_ts, columns, deletes=deletes), tuple(puts))


def probe_write() -> CheckedWrite:
    return CheckedWrite(((STEP, PROBE),), ())


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
    "prewrite_write", "commit_write", "rollback_write", "probe_write",
    "prewrite_result", "commit_result", "rollback_result", "check", "row_step", "step_rows", "parse_request",
    "check_families", "encode_columns", "decode_columns", "encode_deletes", "decode_deletes", "Verdict",
    "DELETES", "SEVERAL_STEPS",
]
