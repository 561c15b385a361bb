"""The row steps' requests: the attributes a checked write carries, and how they are parsed.

Layer: percolator. Protocol steps (pure: no I/O). What ``caffeine.percolator.steps.server`` sends and
models, and what ``StepRequest.java`` in ``coprocessor/`` parses: ``parse_request`` is
``StepRequest.of`` and ``check_families`` ``StepRequest.checkFamilies``, the same checks in the
same order, answering the same tokens (``tests/protocol/test_coprocessor_parity.py``).

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
  big-endian length, then the bytes, possibly none). ``commit_write`` carries its locks (a
  ``DeleteUpTo`` at start_ts each: ``steps.common.unlock_committed``) and the caller's extra
  deletes (the piggybacked notification clear, a ``DeleteUpTo`` on ``n``);
  ``rollback_write`` the lock and the data at start_ts (exact versions).

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
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, Mapping

from caffeine.percolator.layout import qualifier
from caffeine.storage import Delete, DeleteUpTo, FamilySpec
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


__all__ = [
    "STEP", "START_TS", "COMMIT_TS", "COLUMNS", "DELETES", "DELETE_VERSION", "DELETE_UP_TO",
    "PREWRITE", "COMMIT", "ROLLBACK", "PROBE", "PROTOCOL_VERSION", "SEVERAL_STEPS",
    "BadRequest", "StepRequest", "encode_columns", "decode_columns", "encode_deletes", "decode_deletes",
    "check_families", "parse_request",
]
