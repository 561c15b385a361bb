"""``SimStore``: the in-memory store seen through the network of an HBase deployment.

Layer: simulation. A ``caffeine.storage.Store``; delegates to a ``MemoryStore``.

Every public call and both row-transaction primitives (``_read_guarded``,
``_compare_and_apply``) are yield points of the scheduler and meet the nemesis there. The row
transaction itself is the real one (``Store.row_transaction``), running over these
primitives, so its handling of unknown outcomes is what gets tested.

What a fault does is what the HBase store and its connection pool do with it
(``caffeine.storage.hbase``, ``caffeine.storage.pool``):

- reads are idempotent: transport errors are retried inside the pool and only show up as a
  delay, a server-side ``StorageError``, or ``StorageUnavailable`` after an outage longer
  than the pool's deadline;
- blind writes are idempotent and re-sent by the pool: a lost reply means the request applied
  twice (with other actors' steps in between); a first attempt stuck in the server's queue
  lands after the re-sent one. Whether a re-sent request carries the same row guard token
  ("the same request bytes") or a fresh one is ``resend_same_token``: the HBase store built the
  token once per call before e7d0415, and draws one per attempt since;
- conditional writes are not re-sent: a lost reply or a lost request raise ``OutcomeUnknown``,
  and a request may still land later, judged against the guard it expected. A server-side
  error is ``OutcomeUnknown`` too (the pool since 67a9c23), or a plain ``StorageError`` with
  ``cas_error_is_unknown=False`` (the pool before it);
- ``delete_rows`` leaves the row guards alone, as HBase's batch delete does.

Every mutation that lands is also reported to ``on_applied(table, row, mutations)``: the
checkers' record of everything ever written (GC deletes versions; the record keeps them).
"""

from __future__ import annotations

from typing import Callable, Iterator, Sequence

from caffeine.storage.base import Store
from caffeine.storage.errors import OutcomeUnknown, StorageError
from caffeine.storage.memory import MemoryStore
from caffeine.storage.model import GUARD_FAMILY, GUARD_QUALIFIER, Mutation, ReadSpec, Row, puts_of_cells

GUARD_ONLY = ReadSpec(columns=((GUARD_FAMILY, GUARD_QUALIFIER),))
# Rows a simulated scan returns per round trip: small, so that scans interleave with writes.
SCAN_BATCH = 3


class SimStore(Store):
    def __init__(self, sim, inner: MemoryStore | None = None, *, resend_same_token: bool = False,
                 cas_error_is_unknown: bool = True) -> None:
        super().__init__()
        self.sim = sim
        self.inner = inner or MemoryStore()
        self.resend_same_token = resend_same_token
        self.cas_error_is_unknown = cas_error_is_unknown
        self.on_applied: Callable[[str, bytes, Sequence[Mutation]], None] = lambda t, r, m: None
        self._tokens = 0

    # -- admin: setup only, never faulted --------------------------------------------------
    def create_table(self, table, families, split_keys=()):
        self.inner.create_table(table, families, split_keys)

    def drop_table(self, table):
        self.inner.drop_table(table)

    def list_tables(self):
        return self.inner.list_tables()

    def families(self, table):
        return self.inner.families(table)

    # -- reads -----------------------------------------------------------------------------
    def _read(self, what: str) -> None:
        kind = self.sim.enter("read", what)
        if kind == "error":
            raise StorageError(f"simulated server-side error on {what}")

    def read_row(self, table, row, spec=ReadSpec()) -> Row:
        self._read(f"read {table}/{row!r}")
        return self.inner.read_row(table, row, spec)

    def read_rows(self, table, rows, spec=ReadSpec()):
        self._read(f"read_rows {table}/{len(rows)}")
        return self.inner.read_rows(table, rows, spec)

    def read_many(self, table, requests):
        self._read(f"read_many {table}/{[r for r, _, _ in requests]}")
        return self.inner.read_many(table, requests)

    def _read_guarded(self, table, row, spec) -> Row:
        self._read(f"read_guarded {table}/{row!r}")
        return self.inner._read_guarded(table, row, spec)

    def scan(self, table, start_row=b"", stop_row=None, spec=ReadSpec(), *, limit=None,
             batch_size=256, key_only=False, first_cell_only=False, shard=None) -> Iterator[Row]:
        # One round trip per few rows, each a consistent snapshot of its rows, like a
        # scanner's batches; later batches see what others wrote meanwhile.
        returned = 0
        start = start_row
        while limit is None or returned < limit:
            self._read(f"scan {table} from {start!r}")
            batch = list(self.inner.scan(
                table, start, stop_row, spec, limit=SCAN_BATCH, key_only=key_only, first_cell_only=first_cell_only,
                shard=shard,
            ))
            for row in batch:
                yield row
                returned += 1
                if limit is not None and returned >= limit:
                    return
            if len(batch) < SCAN_BATCH:
                return
            start = batch[-1].key + b"\x00"  # the next key after the last row returned

    # -- blind writes ----------------------------------------------------------------------
    def mutate_row(self, table, row, mutations) -> None:
        self._blind(f"mutate_row {table}/{row!r}", table, {row: list(mutations)}, keep_guard=False)

    def put_rows(self, table, rows) -> None:
        if rows:
            self._blind(f"put_rows {table}/{sorted(rows)}", table, {r: list(p) for r, p in rows.items()},
                        keep_guard=False)

    def put_cells(self, table, rows) -> None:
        if rows:
            # As the HBase store does it: the guard stays (a compare-and-set of a row written
            # so would miss the write, which the contract forbids).
            self._blind(f"put_cells {table}/{sorted(rows)}", table,
                        puts_of_cells(rows), keep_guard=True)

    def delete_rows(self, table, rows) -> None:
        if rows:
            self._blind(f"delete_rows {table}/{sorted(rows)}", table, {r: list(d) for r, d in rows.items()}, keep_guard=True)

    def _token(self) -> bytes:
        self._tokens += 1
        return b"sim-guard-%012d" % self._tokens

    def _deliver(self, table, rows, tokens) -> None:
        for row, mutations in rows.items():
            current = self.inner._read_guarded(table, row, GUARD_ONLY).guard
            guard = current if tokens is None else tokens[row]
            if not self.inner._compare_and_apply(table, row, current, mutations, guard):
                raise AssertionError("the in-memory store changed under a single runner")
            self.on_applied(table, row, mutations)

    def _blind(self, what: str, table: str, rows: dict, *, keep_guard: bool) -> None:
        kind = self.sim.enter("write", what)

        def tokens():
            return None if keep_guard else {row: self._token() for row in rows}

        first = tokens()
        if kind is None:
            self._deliver(table, rows, first)
        elif kind == "error_before":
            # A multi-row batch fails per region: any subset may have landed.
            landed = {r: m for r, m in rows.items() if len(rows) > 1 and self.sim.fault_rng.random() < 0.5}
            self._deliver(table, landed, None if first is None else {r: first[r] for r in landed})
            raise StorageError(f"simulated server-side error on {what} ({len(landed)}/{len(rows)} rows applied)")
        elif kind == "error_after":
            self._deliver(table, rows, first)
            raise StorageError(f"simulated server-side error after applying {what}")
        elif kind == "crash_after":
            self._deliver(table, rows, first)
            self.sim.crash_current()
        elif kind == "lost_reply":
            self._deliver(table, rows, first)
            self.sim.idle(self.sim.fault_rng.randint(0, 15))  # the pool's backoff before it re-sends
            self._deliver(table, rows, first if self.resend_same_token else tokens())
        elif kind == "stuck_attempt":
            again = first if self.resend_same_token else tokens()
            self._deliver(table, rows, again)
            self.sim.later(f"stuck first attempt of {what} lands", lambda: self._deliver(table, rows, first),
                           frozenset((table, r) for r in rows))
        else:
            raise AssertionError(kind)

    # -- conditional writes ----------------------------------------------------------------
    def _compare_and_apply(self, table, row, expected_guard, mutations, new_guard) -> bool:
        what = f"check_and_mutate {table}/{row!r}"
        kind = self.sim.enter("cas", what)
        self.sim.worst_moment(table, row)
        mutations = list(mutations)

        def attempt() -> bool:
            applied = self.inner._compare_and_apply(table, row, expected_guard, mutations, new_guard)
            if applied:
                self.on_applied(table, row, mutations)
            return applied

        def server_error(message):
            if self.cas_error_is_unknown:
                return OutcomeUnknown(f"simulated server-side error, the call may have applied: {message}")
            return StorageError(f"simulated server-side error: {message}")

        if kind is None:
            return attempt()
        if kind == "error_before":
            raise server_error(f"{what} (not applied)")
        if kind == "error_after":
            applied = attempt()
            raise server_error(f"{what} ({'applied' if applied else 'compare failed'})")
        if kind == "crash_after":
            attempt()
            self.sim.crash_current()
        if kind == "lost_reply":
            applied = attempt()
            raise OutcomeUnknown(f"simulated lost reply of {what} ({'applied' if applied else 'compare failed'})")
        if kind == "lost_request":
            raise OutcomeUnknown(f"simulated lost request {what}")
        if kind == "late_delivery":
            self.sim.later(f"late {what} lands", attempt, frozenset({(table, row)}))
            raise OutcomeUnknown(f"simulated timeout of {what} (it will land later)")
        raise AssertionError(kind)

    # -- checked writes (the coprocessor's row steps) ------------------------------------------
    def _send_checked(self, table, writes, tokens):
        """Like a conditional write: never re-sent by the pool, every fault an unknown outcome;
        a request that lands late is checked by the row step against the row as it is then."""
        what = f"checked_write {table}/{sorted(writes)}"
        kind = self.sim.enter("cas", what)
        for row in sorted(writes):
            self.sim.worst_moment(table, row)

        def attempt(rows=writes):
            out = self.inner._send_checked(table, rows, tokens)
            for row, answer in out.items():
                if answer is None:
                    self.on_applied(table, row, list(rows[row].mutations))
            return out

        if kind is None:
            return attempt()
        if kind == "error_before":
            # A multi-row batch fails per region: any subset may have landed.
            landed = {r: w for r, w in writes.items() if len(writes) > 1 and self.sim.fault_rng.random() < 0.5}
            attempt(landed)
            raise OutcomeUnknown(f"simulated server-side error on {what} ({len(landed)}/{len(writes)} rows applied)")
        if kind == "error_after":
            attempt()
            raise OutcomeUnknown(f"simulated server-side error after {what}")
        if kind == "crash_after":
            attempt()
            self.sim.crash_current()
        if kind == "lost_reply":
            attempt()
            raise OutcomeUnknown(f"simulated lost reply of {what}")
        if kind == "lost_request":
            raise OutcomeUnknown(f"simulated lost request {what}")
        if kind == "late_delivery":
            self.sim.later(f"late {what} lands", attempt, frozenset((table, r) for r in writes))
            raise OutcomeUnknown(f"simulated timeout of {what} (it will land later)")
        raise AssertionError(kind)

    # -- what the servers do on their own -----------------------------------------------------
    def compact(self) -> None:
        """An HBase flush/compaction: versions beyond a family's ``max_versions`` are dropped
        for good. Until then a version hidden by a newer one comes back when the newer one is
        deleted (the in-memory store keeps them all); after it, it never does. A churn family
        (``FamilySpec.churn``: notifications, which the coprocessor major-compacts on its own)
        is major-compacted: the versions its delete markers hide are dropped with the markers,
        so a put written later below an old marker is no longer hidden. Reaches into the
        in-memory store's tables: this is the server's own housekeeping, not a client call."""
        inner = self.inner
        with inner._lock:
            for table in inner._tables.values():
                for cells in table.rows.values():
                    for (family, _), history in cells.items():
                        if family == GUARD_FAMILY:
                            continue
                        visible = history.visible()
                        keep = {ts for ts, _ in visible[:table.families[family].max_versions]}
                        if table.families[family].churn:
                            history.versions = {ts: v for ts, v in history.versions.items() if ts in keep}
                            history.deleted_exact.clear()
                            history.deleted_up_to = -1
                            continue
                        for ts, _ in visible[table.families[family].max_versions:]:
                            del history.versions[ts]

    def close(self) -> None:
        pass
