"""The storage interface the protocol stands on, and the row transaction built on it.

Layer: storage. Knows nothing of transactions: tables, rows, cells with explicit timestamps.

Contract of every store (``tests/storage/test_storage_contract.py`` runs the same tests on HBase and
on the in-memory twin):

- ``read_row``/``read_rows``/``scan`` return what a single server-side Get/Scan returns: a
  consistent snapshot of each row (HBase guarantees row-level read atomicity).
- ``mutate_row`` applies puts and deletes to one row atomically, each at its own explicit
  timestamp; it also replaces the row guard, so concurrent row transactions notice it.
- ``row_transaction(table, row, spec, decide)``: read the row (plus its guard), call the pure
  ``decide(row) -> Decision``, then apply the decision's mutations only if the guard is still
  the one read. The guard is a fresh random token on every write, so a cell that changed and
  changed back is still a change (no ABA). On a lost compare-and-set the loop re-reads and
  decides again, up to ``max_attempts`` times (then ``RowTransactionAborted``). A write whose
  answer never came (``OutcomeUnknown``) is resolved by re-reading: the guard equal to our
  token means it applied; anything else means decide again on what is there now. ``decide``
  must therefore recognise a row in which its own mutations are already applied (the
  protocol's steps are idempotent for exactly this reason), and must do no I/O.
- ``apply_checked(table, {row: CheckedWrite})``: mutations a row step running inside the
  server checks and applies atomically per row (HBase: a coprocessor), or refuses with an
  answer; ambiguous outcomes are settled by the same guard read-back. Stores without row
  steps raise ``ServerStepsUnavailable``.
"""

from __future__ import annotations

import abc
import logging
import os
import random
import time
from typing import Iterator, Mapping, Sequence

from caffeine.storage.errors import (
    OutcomeUnknown,
    RowTransactionAborted,
    ServerStepsUnavailable,
    StorageError,
    StorageUnavailable,
    TableExists,
)
from caffeine.storage.lockstep import Lockstep
from caffeine.storage.summary_defaults import SummaryDefaults
from caffeine.storage.model import (
    CheckedWrite,
    Decide,
    GUARD_FAMILY,
    GUARD_QUALIFIER,
    FamilySpec,
    Delete,
    DeleteUpTo,
    Mutation,
    Put,
    PutFields,
    ReadSpec,
    Refusal,
    Row,
    StoreStats,
    fresh_tokens,
    puts_of_cells,
)
from caffeine.storage.shards import Shard
from caffeine.storage.regions import Region

log = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS = 64
# A checked write is sent again only when its fate stayed unknown and the row changed since
# (another writer came after it); a few rounds settle any real history.
CHECKED_WRITE_ATTEMPTS = 8
_GUARD_ONLY = ReadSpec(columns=((GUARD_FAMILY, GUARD_QUALIFIER),))


class Store(SummaryDefaults, abc.ABC):
    """One interface over HBase (and its in-memory twin). Safe for many threads. Its summary
    reads (``read_latest``, ``read_cells``, ``read_prefix``, ``read_common``) have defaults
    built on ``read_rows`` in ``caffeine.storage.summary_defaults``."""

    def __init__(self) -> None:
        self.stats = StoreStats()
        # How long a row transaction keeps re-reading the guard after an unknown outcome
        # (long enough to ride out a server restart) before it gives up.
        self.unknown_outcome_deadline_s = 60.0
        # The gang whose calls a batching store combines (caffeine.storage.lockstep); inert
        # (never waits) elsewhere, so callers may join it whatever the store.
        self.lockstep = Lockstep(0.0)

    # -- admin -----------------------------------------------------------------------------
    @abc.abstractmethod
    def create_table(self, table: str, families: dict[bytes, FamilySpec], split_keys: Sequence[bytes] = ()) -> None:
        """Create a table with these families (plus the reserved ones: the guard family, and
        the count family when a family is ``counted``). TableExists if present. ValueError
        for a family named like a reserved one, or for split keys that are not non-empty and
        strictly increasing (``model.check_split_keys``). ``split_keys``: the table starts as
        ``len(split_keys) + 1`` regions, each new one beginning at a key (HBase spreads them
        over its region servers); what a read or write returns does not depend on them."""

    def regions(self, table: str) -> list[Region]:
        """The table's regions in key order, each with the server that holds it.
        TableNotFound if absent."""
        raise NotImplementedError(f"{type(self).__name__} cannot list a table's regions")

    @abc.abstractmethod
    def drop_table(self, table: str) -> None:
        """Disable and delete a table. TableNotFound if absent."""

    @abc.abstractmethod
    def list_tables(self) -> list[str]:
        """Names (without the deployment's prefix) of the tables this store can see."""

    def table_exists(self, table: str) -> bool:
        return table in self.list_tables()

    def ensure_table(self, table: str, families: dict[bytes, FamilySpec]) -> None:
        """Create the table unless it exists; another process creating it meanwhile is no
        error (bookkeeping tables are created by whichever process needs them first)."""
        if not self.table_exists(table):
            try:
                self.create_table(table, families)
            except TableExists:
                pass

    def upgrade_families(self, table: str, families: dict[bytes, FamilySpec]) -> list[bytes]:
        """Bring an existing table's families up to what ``families`` declare where the store
        keeps settings a table created before could lack (HBase: a churn family's compaction,
        see ``FamilySpec.churn``; the blocks of the counts of ``FamilySpec.counted``); returns
        the families changed. Idempotent; the default keeps nothing to upgrade."""
        return []

    def families(self, table: str) -> tuple[bytes, ...]:
        """The table's column families, the reserved ones (guard, counts) left out, sorted. TableNotFound if
        absent. What tells the tables of different kinds apart (a Percolator table's five
        families, a serving table's own)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list a table's families")

    # -- reads -----------------------------------------------------------------------------
    @abc.abstractmethod
    def read_row(self, table: str, row: bytes, spec: ReadSpec = ReadSpec()) -> Row:
        """One row's cells per ``spec``; an empty Row if nothing matches."""

    def read_rows(self, table: str, rows: Sequence[bytes], spec: ReadSpec = ReadSpec()) -> dict[bytes, Row]:
        """Several rows in one round trip where the server allows; every key gets a Row."""
        return {row: self.read_row(table, row, spec) for row in rows}

    @abc.abstractmethod
    def scan(
        self,
        table: str,
        start_row: bytes = b"",
        stop_row: bytes | None = None,
        spec: ReadSpec = ReadSpec(),
        *,
        limit: int | None = None,
        batch_size: int = 256,
        key_only: bool = False,
        first_cell_only: bool = False,
        shard: "Shard | None" = None,
    ) -> Iterator[Row]:
        """Rows in ``[start_row, stop_row)`` in key order, non-empty ones only.

        ``shard`` = (index, count) asks for the rows of one shard only (``shards.in_shard``:
        the key's CRC-32 modulo count is index), selected where the rows are when the server
        can (HBase with Caffeine's coprocessor). It is a saving, not a promise: a store may
        return other rows too, so a caller keeps its own ``in_shard`` check.

        ``key_only`` asks the server to send no values (a server-side filter), for callers
        that need only which cells exist. ``first_cell_only`` asks it to send one cell per
        row: the newest version (within ``spec``) of the row's first column in (family,
        qualifier) order, for callers that walk the rows of wide tables. Each row is a
        consistent snapshot; the scan as a whole is not (rows are read at different
        moments), which the protocol accounts for.
        A dropped connection mid-scan resumes after the last row returned.
        """

    # -- writes ----------------------------------------------------------------------------
    @abc.abstractmethod
    def mutate_row(self, table: str, row: bytes, mutations: Sequence[Mutation]) -> None:
        """Apply all mutations to one row atomically, and replace the row guard."""

    def put_rows(self, table: str, rows: "Mapping[bytes, Sequence[Put]]") -> None:
        """Write many rows' puts in one round trip where the server allows it.

        Each row's puts are atomic (and replace its guard); the rows are NOT atomic as a
        group: after an error, any subset may have landed. Meant for idempotent writes (the
        same cells at the same explicit timestamps), which are safe to resend.
        """
        for row, puts in rows.items():
            self.mutate_row(table, row, puts)

    def put_cells(self, table: str, rows: "Mapping[bytes, Sequence[PutFields]]") -> None:
        """``put_rows`` of cells given as plain ``(family, qualifier, ts, value)`` tuples (a
        ``Put``'s fields, in its order), that may leave the rows' guards as they are.

        The write of a serving table (an index write: a few hundred rows of one cell each),
        so a store can build its request straight from the tuples, no ``Put`` per cell. The
        HBase store then writes no guard cell either (for an index row, half its cells), so
        only for rows that no checked write, compare-and-set or guard read-back ever looks
        at, such as a serving table's: a concurrent compare-and-set would not see the write.
        Replacing the guard anyway is always correct, which this default does. Same outcomes
        as ``put_rows``: each row's cells atomic, the rows not, safe to resend.
        """
        self.put_rows(table, puts_of_cells(rows))

    def delete_rows(self, table: str, rows: "Mapping[bytes, Sequence[Delete | DeleteUpTo]]") -> None:
        """Delete single versions (``Delete``) or every version up to a timestamp
        (``DeleteUpTo``) in many rows, in one round trip where the server allows it.

        Not atomic across rows, and, unlike every other write, it leaves the row guards as
        they are (HBase's batch delete carries no put): use it only for deletes that no row
        transaction's decision could be invalidated by, such as removing a committed
        transaction's own locks after its write records are in, or notifications.
        """
        for row, deletes in rows.items():
            self.mutate_row(table, row, deletes)

    def read_many(self, table: str, requests: "Sequence[tuple[bytes, ReadSpec, bool]]") -> list[Row]:
        """One ``Row`` per (row, spec, guarded) request, in order, each read with its own spec
        and, where ``guarded``, its guard filled in (as ``_read_guarded``), in one round trip
        where the server allows. Rows may repeat. Each row is a consistent snapshot; the rows
        are not one snapshot together."""
        return [self._read_guarded(table, row, spec) if guarded else self.read_row(table, row, spec)
                for row, spec, guarded in requests]

    def read_rows_guarded(self, table: str, specs: "Mapping[bytes, ReadSpec]") -> dict[bytes, Row]:
        """Several rows, each with its own spec, in one round trip where the server allows,
        each with its guard filled in: snapshots a row transaction can take as ``guess``."""
        return {row: self._read_guarded(table, row, spec) for row, spec in specs.items()}

    def row_transaction(
        self,
        table: str,
        row: bytes,
        spec: ReadSpec,
        decide: Decide,
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        guess: Row | None = None,
        with_guard: bool = False,
    ):
        """Read, decide, apply-if-unchanged; returns the applied decision's ``result``.

        ``guess``: a snapshot the caller already knows the row to be in, guard included
        (typically the state its own previous row transaction left). The first attempt
        decides on it without reading; if the guard has moved, the compare-and-set fails and
        the loop continues with real reads. This saves a round trip on the commit path.
        ``with_guard``: return ``(result, guard)``, the guard the row has after this call,
        so a later call can pass a guess.
        """
        self.stats.bump("row_transactions")
        for attempt in range(1, max_attempts + 1):
            if guess is not None and attempt == 1:
                snapshot = guess
            else:
                snapshot = self._read_guarded(table, row, spec)
            decision = decide(snapshot)
            if not decision.mutations and snapshot is guess:
                # A guess is only trusted through a successful compare-and-set; a decision
                # to write nothing proves nothing about the real row, so read it.
                snapshot = self._read_guarded(table, row, spec)
                decision = decide(snapshot)
            if not decision.mutations:
                return (decision.result, snapshot.guard) if with_guard else decision.result
            token = os.urandom(16)
            try:
                if self._compare_and_apply(table, row, snapshot.guard, decision.mutations, token):
                    return (decision.result, token) if with_guard else decision.result
                self.stats.bump("cas_conflicts" if snapshot is not guess else "guess_misses")
            except OutcomeUnknown as exc:
                self.stats.bump("unknown_outcomes")
                log.warning("row transaction on %s %r: outcome unknown (%s); re-reading", table, row, exc)
                if self._guard_after_unknown(table, row) == token:
                    return (decision.result, token) if with_guard else decision.result
                # Not applied, or applied and overwritten since: decide again on what is
                # there now; decide recognises its own effects.
            if attempt > 2:
                # Back off only when contention persists; the first retries are immediate
                # because most conflicts are one other writer that has already finished.
                time.sleep(min(0.05, 0.0005 * 2 ** min(attempt, 8)) * random.random())
        raise RowTransactionAborted(table, row, max_attempts)

    def _guard_after_unknown(self, table: str, row: bytes) -> bytes | None:
        """Re-read the guard after an unknown outcome, waiting out a server restart."""
        return self._waiting_out_restarts(
            lambda: self._read_guarded(table, row, _GUARD_ONLY).guard
        )

    def _waiting_out_restarts(self, read):
        """``read()``, retried with backoff while the store is unavailable, for up to
        ``unknown_outcome_deadline_s``: settling an unknown outcome must outlast a restart."""
        delay = 0.05
        deadline = time.monotonic() + self.unknown_outcome_deadline_s
        while True:
            try:
                return read()
            except StorageUnavailable:
                if time.monotonic() > deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    # -- checked writes: row steps that run inside the server -------------------------------
    def apply_checked(self, table: str, writes: "Mapping[bytes, CheckedWrite]") -> "dict[bytes, Refusal | None]":
        """Send each row's checked write (one round trip for all rows where the server allows);
        returns, per row, None (the row step accepted and the mutations applied) or the
        step's ``Refusal`` (nothing of that row applied).

        Not atomic across rows. An ambiguous outcome (a lost reply, an error that may have
        come after the write applied, a batch whose failure names only some rows) is settled
        per row by reading the row's guard back: our token means applied; otherwise the row
        is sent again, which the step's idempotence makes safe. Raises
        ``ServerStepsUnavailable`` when the store runs no row steps, and ``StorageError``
        when a row's fate stays unknown after the bounded attempts (the caller settles it).
        """
        pending = dict(writes)
        out: dict[bytes, Refusal | None] = {}
        for attempt in range(1, CHECKED_WRITE_ATTEMPTS + 1):
            tokens = dict(zip(pending, fresh_tokens(len(pending))))
            self.stats.bump("checked_writes", len(pending))
            try:
                answers = self._send_checked(table, pending, tokens)
            except OutcomeUnknown as exc:
                self.stats.bump("unknown_outcomes")
                log.warning("checked write on %s (%d rows): outcome unknown (%s); re-reading", table, len(pending), exc)
                answers = {}
            for row, answer in answers.items():
                out[row] = answer
                del pending[row]
            if not pending:
                return out
            guards = self._guards_after_unknown(table, list(pending))
            for row in list(pending):
                if guards.get(row) == tokens[row]:
                    out[row] = None
                    del pending[row]
            if not pending:
                return out
            self.stats.bump("checked_resends", len(pending))
        raise StorageError(f"checked write on {table!r}: the fate of {len(pending)} row(s) stayed unknown "
                           f"after {CHECKED_WRITE_ATTEMPTS} attempts")

    def _send_checked(
        self, table: str, writes: "Mapping[bytes, CheckedWrite]", tokens: Mapping[bytes, bytes]
    ) -> "dict[bytes, Refusal | None]":
        """One attempt: send every row's checked write, each with its new guard token.
        Returns the rows whose fate the answer proves (accepted: None; refused: the Refusal);
        rows left out are unknown. Raises ``OutcomeUnknown`` when no answer came."""
        raise ServerStepsUnavailable(f"{type(self).__name__} runs no server-side row steps")

    def _guards_after_unknown(self, table: str, rows: Sequence[bytes]) -> dict[bytes, bytes | None]:
        """The guards of ``rows`` after an unknown outcome (one batched read), waiting out a
        server restart."""
        read = self._waiting_out_restarts(lambda: self.read_rows_guarded(table, {row: _GUARD_ONLY for row in rows}))
        return {row: snapshot.guard for row, snapshot in read.items()}

    # -- primitives the row transaction is built from --------------------------------------
    @abc.abstractmethod
    def _read_guarded(self, table: str, row: bytes, spec: ReadSpec) -> Row:
        """``read_row`` in one consistent read that also fills ``Row.guard``."""

    @abc.abstractmethod
    def _compare_and_apply(
        self,
        table: str,
        row: bytes,
        expected_guard: bytes | None,
        mutations: Sequence[Mutation],
        new_guard: bytes,
    ) -> bool:
        """Atomically: if the guard equals ``expected_guard`` (None: absent), apply the
        mutations and set the guard to ``new_guard``; say whether it applied. Raises
        ``OutcomeUnknown`` if the request may have been sent but no answer came."""

    def close(self) -> None:
        """Release connections. The store is unusable afterwards."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
