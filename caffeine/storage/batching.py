"""Batched calls: the storage calls of concurrent callers of one process, combined into
multi-row calls (the paper's Section 4: workers "delay and combine" the RPCs of many
transactions; TiKV's batch commands).

Layer: storage. Wraps any ``Store``; knows nothing of transactions.

``BatchingStore(inner)`` is a ``Store``. For each (kind of call, table) it keeps one queue:
a caller whose call can be combined puts its request there; when fewer than ``in_flight``
calls of that kind and table are in flight (default one), the oldest waiting caller becomes
the *leader*: it waits up to
``linger_ms`` for more requests (0: not at all), takes what is queued (at most
``max_requests`` row-requests, and never two requests that must not share a call, see
below) and sends them as ONE multi-row call of the inner store; when that returns it hands
each caller its own answer and the next waiting caller leads the next call. So a caller's
request waits at most for a call in flight to return, plus the linger. A multi-row call is
worked by one server thread: more calls in flight let the server work one kind of call on
several threads, each carrying fewer requests.

What is combined (every other call goes straight to the inner store):

- reads of rows (``read_row``, ``read_rows``, the row transaction's guarded reads, and
  ``read_rows_guarded``): one ``read_many`` (HBase: one Thrift2 ``getMultiple``, each row with
  its own columns and time range);
- puts (``put_rows``, and ``mutate_row`` of puts only): one ``put_rows``, a row's puts from
  several callers applied together (atomically); a serving table's cells (``put_cells``) in
  calls of their own, one ``put_cells``;
- deletes (``delete_rows``): one ``delete_rows``;
- checked writes (``apply_checked``'s attempts, the coprocessor's row steps): one
  ``_send_checked`` (HBase: one ``putMultiple`` for put-only steps), never two of one row in
  one call: a row step is checked against the row as it is before the call, so two steps of
  one row in one call could both pass on a state neither left.

Outcomes stay what a call of one's own would give (docs/FAULTS.md, "Batched calls keep
each caller's outcome"): an error or an unknown outcome of the combined call is every caller's
(each settles its rows as it would after its own call: a checked write re-reads each row's
guard); a checked write's answers are per row, so a row refused answers its caller only.

**Lockstep**: a leader first waits (at most ``lockstep_ms``) until no member of the store's
gang is running (``caffeine.storage.lockstep``), so the calls of a round of concurrent
observer runs go together instead of drifting apart; only who shares a call changes.

``pause``: how a waiting caller lets others run. Threads block, each on its own event, woken
only when answered or when it may lead (default); the fault simulation, whose threads take
turns, passes one that yields to its scheduler.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

from caffeine.storage.base import Store
from caffeine.storage.call_batcher import MAX_REQUESTS, CallBatcher
from caffeine.storage.errors import OutcomeUnknown
from caffeine.storage.wrapping import InnerAdmin
from caffeine.storage.lockstep import Lockstep
from caffeine.storage.model import CheckedWrite, Delete, DeleteUpTo, Put, PutFields, ReadSpec, Refusal, Row

__all__ = ["BatchingStore", "CallBatcher", "Lockstep"]

@dataclass(frozen=True)
class _Read:
    row: bytes
    spec: ReadSpec
    guarded: bool


@dataclass
class _Checked:
    row: bytes
    write: CheckedWrite
    token: bytes


def _merged(items: list[tuple[bytes, Sequence]]) -> dict[bytes, Sequence]:
    """Several callers' ``(row, mutations)`` as one ``{row: mutations}``, a row's mutations
    from several callers in one list (applied together, atomically). A row of one caller (the
    usual case) keeps its caller's sequence, not copied: the inner store only reads it."""
    merged: dict[bytes, Sequence] = {}
    for row, mutations in items:
        earlier = merged.get(row)
        merged[row] = mutations if earlier is None else [*earlier, *mutations]
    return merged


class BatchingStore(InnerAdmin, Store):
    """``inner`` with the combinable calls of concurrent callers combined (module docstring).
    Shares ``inner``'s statistics; closing it closes ``inner``."""

    def __init__(self, inner: Store, *, linger_ms: float = 0.0, lockstep_ms: float = 0.0,
                 max_requests: int = MAX_REQUESTS, in_flight: int = 1,
                 pause: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.inner = inner
        self.stats = inner.stats
        self.unknown_outcome_deadline_s = inner.unknown_outcome_deadline_s
        self.lockstep = Lockstep(lockstep_ms / 1000, pause=pause)  # replaces the inert one
        self._options = dict(linger_s=linger_ms / 1000, max_requests=max_requests, in_flight=in_flight,
                             pause=pause, lockstep=self.lockstep)
        self._batchers: dict[tuple[str, str], CallBatcher] = {}
        self._lock = threading.Lock()

    def _batcher(self, kind: str, table: str) -> CallBatcher:
        key = (kind, table)
        batcher = self._batchers.get(key)
        if batcher is None:
            with self._lock:
                batcher = self._batchers.get(key)
                if batcher is None:
                    send = getattr(self, f"_call_{kind}")
                    batcher = CallBatcher(lambda items: send(table, items), exclusive=kind == "checked",
                                          on_call=self._count, on_error=self._count_error,
                                          on_wait=lambda: self.stats.bump("lockstep_waits"), **self._options)
                    self._batchers[key] = batcher
        return batcher

    def _count(self, requests: int, items: int) -> None:
        self.stats.bump("batched_calls")
        self.stats.bump("batched_requests", requests)
        self.stats.bump("batched_rows", items)
        if requests > 1:
            self.stats.bump("combined_calls")

    def _count_error(self, requests: int, error: BaseException) -> None:
        # A combined call that failed failed for every request in it (each caller settles its
        # own rows); counted so the simulation shows it exercised that path.
        if requests > 1:
            self.stats.bump("combined_calls_failed")
            if isinstance(error, OutcomeUnknown):
                self.stats.bump("combined_calls_unknown")

    # -- combined reads ----------------------------------------------------------------------
    def _call_read(self, table: str, items: list[_Read]) -> list[Row]:
        if len(items) == 1:  # alone: the inner store's own call for it (Thrift1 where it serves)
            item = items[0]
            if item.guarded:
                return [self.inner._read_guarded(table, item.row, item.spec)]
            return [self.inner.read_row(table, item.row, item.spec)]
        return self.inner.read_many(table, [(i.row, i.spec, i.guarded) for i in items])

    def read_row(self, table: str, row: bytes, spec: ReadSpec = ReadSpec()) -> Row:
        return self._batcher("read", table).submit([_Read(row, spec, False)])[0]

    def read_rows(self, table: str, rows: Sequence[bytes], spec: ReadSpec = ReadSpec()) -> dict[bytes, Row]:
        rows = list(dict.fromkeys(rows))
        if not rows:
            return {}
        answers = self._batcher("read", table).submit([_Read(row, spec, False) for row in rows])
        return dict(zip(rows, answers))

    def _read_guarded(self, table: str, row: bytes, spec: ReadSpec) -> Row:
        return self._batcher("read", table).submit([_Read(row, spec, True)])[0]

    def read_rows_guarded(self, table: str, specs: Mapping[bytes, ReadSpec]) -> dict[bytes, Row]:
        if not specs:
            return {}
        rows = list(specs)
        answers = self._batcher("read", table).submit([_Read(row, specs[row], True) for row in rows])
        return dict(zip(rows, answers))

    def read_many(self, table: str, requests: Sequence[tuple[bytes, ReadSpec, bool]]) -> list[Row]:
        return self._batcher("read", table).submit([_Read(*request) for request in requests])

    # -- combined writes -----------------------------------------------------------------------
    def _call_put(self, table: str, items: list[tuple[bytes, list[Put]]]) -> list[None]:
        self.inner.put_rows(table, _merged(items))
        return [None] * len(items)

    def _call_cells(self, table: str, items: list[tuple[bytes, Sequence[PutFields]]]) -> list[None]:
        self.inner.put_cells(table, _merged(items))
        return [None] * len(items)

    def _call_delete(self, table: str, items: list[tuple[bytes, list]]) -> list[None]:
        self.inner.delete_rows(table, _merged(items))
        return [None] * len(items)

    def put_rows(self, table: str, rows: Mapping[bytes, Sequence[Put]]) -> None:
        if rows:
            self._batcher("put", table).submit([(row, list(puts)) for row, puts in rows.items()])

    def put_cells(self, table: str, rows: Mapping[bytes, Sequence[PutFields]]) -> None:
        if rows:
            # Calls of their own (a call carries one guard policy); the callers' sequences are
            # only read, never kept past the call, so they go as they are.
            self._batcher("cells", table).submit(list(rows.items()))

    def mutate_row(self, table: str, row: bytes, mutations) -> None:
        mutations = list(mutations)
        if mutations and all(isinstance(m, Put) for m in mutations):
            self._batcher("put", table).submit([(row, mutations)])
        else:  # puts and deletes applied atomically: one row's own call
            with self.lockstep.waiting():
                self.inner.mutate_row(table, row, mutations)

    def delete_rows(self, table: str, rows: Mapping[bytes, Sequence[Delete | DeleteUpTo]]) -> None:
        if rows:
            self._batcher("delete", table).submit([(row, list(d)) for row, d in rows.items()])

    def _send_checked(self, table: str, writes: Mapping[bytes, CheckedWrite],
                      tokens: Mapping[bytes, bytes]) -> dict[bytes, Refusal | None]:
        items = [_Checked(row, write, tokens[row]) for row, write in writes.items()]
        answers = self._batcher("checked", table).submit(items, frozenset(writes))
        return {item.row: answer for item, answer in zip(items, answers) if answer is not _UNKNOWN}

    def _call_checked(self, table: str, items: list[_Checked]) -> list:
        answers = self.inner._send_checked(table, {i.row: i.write for i in items}, {i.row: i.token for i in items})
        refused = sum(answer is not None for answer in answers.values())
        if 0 < refused < len(items):
            # Refused for some rows only (the others applied, or left to the guard read-back):
            # each row keeps its own answer.
            self.stats.bump("checked_calls_partly_refused")
        return [answers.get(item.row, _UNKNOWN) for item in items]

    # -- everything else goes straight through -------------------------------------------------
    # (A member blocked in one of these calls is waiting, not running: see ``Lockstep``.)
    def _compare_and_apply(self, table, row, expected_guard, mutations, new_guard) -> bool:
        with self.lockstep.waiting():
            return self.inner._compare_and_apply(table, row, expected_guard, mutations, new_guard)

    def scan(self, table, start_row=b"", stop_row=None, spec=ReadSpec(), **options) -> Iterator[Row]:
        return self.inner.scan(table, start_row, stop_row, spec, **options)

    def read_latest(self, *args, **kwargs):
        with self.lockstep.waiting():
            return self.inner.read_latest(*args, **kwargs)

    def read_cells(self, *args, **kwargs):
        with self.lockstep.waiting():
            return self.inner.read_cells(*args, **kwargs)

    def read_prefix(self, *args, **kwargs):
        with self.lockstep.waiting():
            return self.inner.read_prefix(*args, **kwargs)

    def read_common(self, *args, **kwargs):
        with self.lockstep.waiting():
            return self.inner.read_common(*args, **kwargs)

    def close(self) -> None:
        self.inner.close()


# A checked write whose row the combined call's answer does not name: unknown to its caller.
_UNKNOWN = object()
