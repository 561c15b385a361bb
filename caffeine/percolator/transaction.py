"""A snapshot-isolated, cross-row transaction, coordinated by this client.

Layer: percolator (public class ``Transaction``; built by ``Cluster.begin``). The paper's
Figure 6, with the commit split into steps that tests can call one at a time:

    txn.prewrite()             lock every written cell: the primary's row first, then the
                               other rows in parallel (refreshing the primary's lock time
                               meanwhile, once it is half its TTL old, so a long prewrite is
                               never taken for an abandoned one)
    txn.commit_primary()       commit_ts from the oracle; committing the primary is the
                               commit point (atomic: one row transaction)
    txn.commit_secondaries()   the other rows, in parallel; a crash here is harmless, readers
                               roll the remaining locks forward

Reads see the snapshot at start_ts plus this transaction's own buffered writes. A read that
meets a lock at or below start_ts resolves it (``LockResolver``) or waits for its live owner.
Writes are buffered until commit. ``with cluster.begin() as txn:`` commits on a normal exit
and rolls back on an exception.

Isolation is snapshot isolation, not serializability: two transactions that read overlapping
data and write disjoint cells can both commit (write skew, G2-item). Everything stronger is
ruled out; ``tests/test_isolation.py`` names each anomaly.
"""

from __future__ import annotations

import enum
import logging
import time
from concurrent.futures import Future, wait as wait_futures
from typing import TYPE_CHECKING, Iterable, Iterator

from caffeine.percolator import steps
from caffeine.percolator.errors import (
    CommitConflict,
    CommitUnknown,
    LockWaitTimeout,
    TransactionClosed,
    TransactionRolledBack,
)
from caffeine.percolator.layout import LOCK, NOTIFY, WRITE, column_name, data_family, qualifier
from caffeine.percolator.records import CellRef, Committed, Kind, Lock, Locked, RolledBack, Write, encode_notify
from caffeine.percolator.committer import CasCommitter
from caffeine.storage import Decision, Delete, DeleteUpTo, Put, ReadSpec, Row, as_bytes

if TYPE_CHECKING:
    from caffeine.percolator.cluster import Cluster

log = logging.getLogger(__name__)

DELETED = None  # the buffered value of a deleted cell
_PREWRITE_LOCK_RETRIES = 5
_DEEP_READ = 64  # write versions per page when rollback records hide the committed write


class State(enum.Enum):
    ACTIVE = "active"
    PREWRITTEN = "prewritten"
    COMMITTED = "committed"
    ROLLED_BACK = "rolled back"
    # The primary's commit may have been applied and reading it back failed: committed or
    # rolled back, not known here. Never rolled back from this state without the primary
    # proven rolled back first.
    UNDETERMINED = "undetermined"


class Transaction:
    def __init__(self, cluster: "Cluster", start_ts: int, *, read_only: bool = False) -> None:
        self.cluster = cluster
        self.start_ts = start_ts
        self.read_only = read_only
        self.commit_ts: int | None = None
        self.state = State.ACTIVE
        # (table, row) -> {column: value | DELETED}, in first-write order; the first cell
        # written becomes the primary.
        self._writes: dict[tuple[str, bytes], dict[str, bytes | None]] = {}
        self._primary: CellRef | None = None
        # (table, row) -> the row's guard right after our prewrite, and our lock values:
        # lets commit skip its read when nothing touched the row since.
        self._prewritten: dict[tuple[str, bytes], tuple[bytes, dict[str, bytes]]] = {}
        # Rows whose prewrite was sent: on abort all of them are rolled back, since a prewrite
        # that failed with an error (not a conflict) may still have landed.
        self._attempted: set[tuple[str, bytes]] = set()
        # Once the primary's commit may have been sent, only the primary's state (read back)
        # tells whether this transaction committed.
        self._commit_sent = False
        self._prewrite_started_ms = 0
        self._primary_fresh_ms = 0   # when the primary lock's TTL clock last (re)started
        # (table, row) -> {column: value} read in this snapshot: a snapshot never changes, so
        # reading a cell again (or one the worker fetched with its first read) costs nothing.
        self._read_cache: dict[tuple[str, bytes], dict[str, bytes | None]] = {}
        # Weak, notify-only cells (no data write): (table, row) -> columns.
        self._notifies: dict[tuple[str, bytes], set[str]] = {}
        self._on_commit: list = []
        self._clear_at_commit: tuple[str, bytes, DeleteUpTo] | None = None
        self.notification_cleared = False

    # -- reading ---------------------------------------------------------------------------
    def get(self, table: str, row: bytes | str, column: str) -> bytes | None:
        """The cell's value in this transaction's snapshot (own writes included), or None."""
        return self.get_row(table, row, [column])[column]

    def get_row(self, table: str, row: bytes | str, columns: Iterable[str]) -> dict[str, bytes | None]:
        """Several columns of one row in one read (batched); missing cells map to None."""
        self._check_active()
        row = as_bytes(row)
        columns = list(columns)
        own = self._writes.get((table, row), {})
        known = self._read_cache.get((table, row), {})
        wanted = [c for c in columns if c not in own and c not in known]
        values = self._read_columns(table, row, wanted) if wanted else {}
        if values:
            self._read_cache.setdefault((table, row), {}).update(values)
        return {c: own[c] if c in own else known[c] if c in known else values[c] for c in columns}

    def get_rows(self, table: str, rows: Iterable[bytes | str], columns: Iterable[str]) -> dict[bytes, dict[str, bytes | None]]:
        """The same columns of several rows of one table, in one batched read."""
        self._check_active()
        rows = [as_bytes(r) for r in rows]
        columns = list(columns)
        snapshots = self.cluster.store.read_rows(table, rows, steps.get_spec(columns, self.start_ts))
        out = {}
        for row in rows:
            own = self._writes.get((table, row), {})
            wanted = [c for c in columns if c not in own]
            values = self._read_columns(table, row, wanted, snapshots[row]) if wanted else {}
            out[row] = {c: own[c] if c in own else values[c] for c in columns}
        self._still_readable()
        return out

    def get_all(self, table: str, row: bytes | str) -> dict[str, bytes]:
        """Every present column of one row (own writes included), in one read: for rows
        whose columns are not known in advance, e.g. one column per linking page."""
        row = as_bytes(row)
        return self.get_all_rows(table, [row])[row]

    def get_all_rows(self, table: str, rows: Iterable[bytes | str]) -> dict[bytes, dict[str, bytes]]:
        """``get_all`` of several rows of one table in one batched read; every row asked for
        is in the result (``{}`` when it has no present column)."""
        self._check_active()
        rows = list(dict.fromkeys(as_bytes(r) for r in rows))
        snapshots = self.cluster.store.read_rows(table, rows, steps.get_spec(None, self.start_ts)) if rows else {}
        ordered = sorted(rows)  # merging with own writes walks both in key order
        scanned = self._snapshot_rows(table, [snapshots[r] for r in ordered if snapshots.get(r)], None)
        own_rows = [r for r in ordered if (table, r) in self._writes]
        out: dict[bytes, dict[str, bytes]] = {r: {} for r in rows}
        for key, values in self._overlay_own_writes(table, scanned, own_rows, None):
            out[key] = values
        self._still_readable()
        return out

    def present_columns(self, table: str, row: bytes | str) -> set[str]:
        """The columns of one row that have a value in this snapshot (own writes included),
        without reading the values: for counting, e.g. the pages that link to a page. Reads
        only locks and write records, so a wide row costs a fraction of ``get_all``."""
        self._check_active()
        row = as_bytes(row)
        snapshot = self.cluster.store.read_row(table, row, steps.get.presence_spec(self.start_ts))
        present, unsure = set(), []
        for q in steps.get.columns_in(snapshot):
            known = steps.get.presence(snapshot, q, self.start_ts)
            if known is None:
                unsure.append(column_name(q))
            elif known:
                present.add(column_name(q))
        if unsure:
            present.update(c for c, v in self._read_columns(table, row, unsure).items() if v is not None)
        for column, value in self._writes.get((table, row), {}).items():
            if value is DELETED:
                present.discard(column)
            else:
                present.add(column)
        self._still_readable()
        return present

    def _read_columns(
        self, table: str, row: bytes, columns: list[str], snapshot: Row | None = None
    ) -> dict[str, bytes | None]:
        deadline = time.monotonic() + self.cluster.settings.lock_wait_timeout_s
        store = self.cluster.store
        if snapshot is None:
            snapshot = store.read_row(table, row, steps.get_spec(columns, self.start_ts))
        out: dict[str, bytes | None] = {}
        pending = list(columns)
        delay = 0.002
        while pending:
            retry = []
            for column in pending:
                result = steps.read_cell(snapshot, column, self.start_ts)
                value = self._finish_read(table, row, column, result)
                if value is _RETRY:
                    retry.append(column)
                else:
                    out[column] = value
            if not retry:
                break
            if time.monotonic() > deadline:
                raise LockWaitTimeout(
                    f"{table}/{row!r}: waited {self.cluster.settings.lock_wait_timeout_s:.0f}s "
                    f"on locks of live transactions for columns {retry}"
                )
            pending = retry
            snapshot = store.read_row(table, row, steps.get_spec(pending, self.start_ts))
            if any(isinstance(steps.read_cell(snapshot, c, self.start_ts), steps.Blocked) for c in pending):
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        self._still_readable()
        return out

    def _finish_read(self, table: str, row: bytes, column: str, result):
        """Turn one step result into a value, doing the extra I/O it asks for (or _RETRY)."""
        store = self.cluster.store
        if isinstance(result, steps.Value):
            return result.value
        if isinstance(result, steps.Blocked):
            self.cluster.stats.bump("lock_waits")
            self._still_readable()  # a lock read before a pause may be settled and collected
            self.cluster.resolver.resolve(CellRef(table, row, column), result.lock)
            return _RETRY
        q = qualifier(column)
        if isinstance(result, steps.NeedData):
            family = data_family(q)
            spec = ReadSpec(columns=((family, q),), min_ts=result.data_ts, max_ts=result.data_ts)
            cell = store.read_row(table, row, spec).latest(family, q)
            if cell is None:
                self._still_readable()  # GC may have collected it meanwhile
                raise AssertionError(f"{table}/{row!r}/{column}: committed write points at missing data @{result.data_ts}")
            return cell.value
        if isinstance(result, steps.NeedOlderWrite):
            upper = self.start_ts
            while True:
                spec = ReadSpec(columns=((WRITE, q),), max_ts=upper, versions=_DEEP_READ)
                older = store.read_row(table, row, spec)
                writes = older.versions(WRITE, q)
                deeper = steps.get.resolve_write(older, q, upper, all_versions_read=len(writes) < _DEEP_READ)
                if not isinstance(deeper, steps.NeedOlderWrite):
                    return self._finish_read(table, row, column, deeper)
                upper = writes[-1].ts - 1  # a page of nothing but rollback records
        raise TypeError(result)

    def scan(
        self,
        table: str,
        start_row: bytes | str = b"",
        stop_row: bytes | str | None = None,
        columns: Iterable[str] | None = None,
        *,
        batch_size: int = 256,
    ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """Snapshot scan of ``[start_row, stop_row)``: (row, {column: value}) in row order.

        Only present cells appear (deleted and never-written ones do not); rows with none are
        skipped. ``columns=None`` means every column. Locks met are resolved as point reads
        resolve them; this transaction's own buffered writes are merged in.
        """
        self._check_active()
        start_row = as_bytes(start_row)
        stop_row = None if stop_row is None else as_bytes(stop_row)
        columns = None if columns is None else list(columns)
        spec = steps.get_spec(columns, self.start_ts)
        own_rows = sorted(
            r for (t, r) in self._writes if t == table and r >= start_row and (stop_row is None or r < stop_row)
        )
        scanned = self.cluster.store.scan(table, start_row, stop_row, spec, batch_size=batch_size)
        for item in self._overlay_own_writes(table, self._snapshot_rows(table, scanned, columns), own_rows, columns):
            self._still_readable()
            yield item

    def _overlay_own_writes(self, table, snapshot_rows, own_rows, columns):
        """Merge this transaction's buffered writes into snapshot rows (key order kept)."""
        for key, values in _merge_rows(snapshot_rows, own_rows):
            own = self._writes.get((table, key), {})
            merged = dict(values)
            for column, value in own.items():
                if columns is not None and column not in columns:
                    continue
                if value is None:
                    merged.pop(column, None)
                else:
                    merged[column] = value
            if merged:
                yield key, dict(sorted(merged.items()))

    def _snapshot_rows(self, table, rows: Iterable[Row], columns) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        for row in rows:
            names = columns if columns is not None else [column_name(q) for q in steps.get.columns_in(row)]
            values, slow = {}, []
            for column in names:
                result = steps.read_cell(row, column, self.start_ts)
                if isinstance(result, steps.Value):
                    if result.value is not None:
                        values[column] = result.value
                else:
                    slow.append(column)
            if slow:
                for column, value in self._read_columns(table, row.key, slow).items():
                    if value is not None:
                        values[column] = value
            yield row.key, values

    # -- writing ---------------------------------------------------------------------------
    def set(self, table: str, row: bytes | str, column: str, value: bytes | str) -> None:
        """Buffer a write; it becomes visible to others when the transaction commits."""
        self._buffer(table, as_bytes(row), column, as_bytes(value))

    def delete(self, table: str, row: bytes | str, column: str) -> None:
        self._buffer(table, as_bytes(row), column, DELETED)

    def _buffer(self, table: str, row: bytes, column: str, value: bytes | None) -> None:
        self._check_active()
        if self.read_only:
            raise TransactionClosed(f"transaction {self.start_ts} is a read-only snapshot")
        if not isinstance(column, str) or not column:
            raise ValueError(f"column must be a non-empty str, got {column!r}")
        self._writes.setdefault((table, row), {})[column] = value
        if self._primary is None:
            self._primary = CellRef(table, row, column)

    def notify(self, table: str, row: bytes | str, column: str) -> None:
        """Set a weak notification on (table, row, column) without writing data there.

        For hot spots: many transactions can notify one cell without conflicting, because
        nothing is locked. The notification is written at commit_ts before the commit point
        (and names this transaction), so a worker runs the column's observers once the
        commit is visible; if this transaction rolls back, the worker drops the notification.
        """
        self._check_active()
        self._notifies.setdefault((table, as_bytes(row)), set()).add(column)

    def on_commit(self, callback) -> None:
        """Run ``callback()`` after this transaction has committed (never if it did not).

        For side effects outside the transaction, such as idempotent writes to a serving
        table. A callback that raises fails ``commit()`` after the commit point: the data is
        committed and the caller (an observer worker) retries the side effect.
        """
        self._on_commit.append(callback)

    @property
    def has_post_commit_work(self) -> bool:
        """Whether ``on_commit`` callbacks are waiting for the commit."""
        return bool(self._on_commit)

    def committed_write(self, table: str, row: bytes | str, column: str) -> tuple[int, int] | None:
        """(commit_ts, start_ts) of the newest committed write of the cell visible in this
        snapshot (a DELETE counts), or None if none; locks are resolved as reads resolve them."""
        self._check_active()
        row = as_bytes(row)
        self._read_columns(table, row, [column])  # settles any lock at or below start_ts
        q = qualifier(column)
        upper = self.start_ts
        while True:
            spec = ReadSpec(columns=((WRITE, q),), max_ts=upper, versions=_DEEP_READ)
            writes = self.cluster.store.read_row(table, row, spec).versions(WRITE, q)
            for cell in writes:
                write = Write.decode(cell.value)
                if not write.is_rollback:
                    self._still_readable()
                    return cell.ts, write.start_ts
            if len(writes) < _DEEP_READ:
                self._still_readable()
                return None
            upper = writes[-1].ts - 1

    def change_and_values(
        self, table: str, row: bytes, column: str, columns: list[str]
    ) -> tuple[tuple[int, int] | None, dict[str, bytes | None]]:
        """``committed_write(column)`` and ``get_row(columns)`` of one row in one read when
        nothing is locked (the common case); the slow paths otherwise. For the worker, which
        needs the observed change and the observer's ack before every run, and fetches the
        columns the observer declared it reads with them (later ``get_row`` calls of these
        columns are answered from this read)."""
        self._check_active()
        snapshot = self.cluster.store.read_row(table, row, steps.get_spec([column, *columns], self.start_ts))
        q = qualifier(column)
        lock = steps.common.lock_of(snapshot, q)
        newest = next((c for c in snapshot.versions(WRITE, q) if c.ts <= self.start_ts), None)
        write = Write.decode(newest.value) if newest is not None else None
        if (lock is not None and lock.start_ts <= self.start_ts) or (write is not None and write.is_rollback):
            change = self.committed_write(table, row, column)
        else:
            change = None if write is None else (newest.ts, write.start_ts)
        values: dict[str, bytes | None] = {}
        for c in columns:
            value = self._finish_read(table, row, c, steps.read_cell(snapshot, c, self.start_ts))
            values[c] = self.get(table, row, c) if value is _RETRY else value
        self._read_cache.setdefault((table, row), {}).update(values)
        self._still_readable()
        return change, values

    @property
    def primary(self) -> CellRef | None:
        return self._primary

    @property
    def written_cells(self) -> list[CellRef]:
        return [CellRef(t, r, c) for (t, r), cols in self._writes.items() for c in cols]

    # -- committing --------------------------------------------------------------------------
    def commit(self) -> int | None:
        """Prewrite, commit the primary, commit the secondaries; returns commit_ts.

        A read-only transaction commits trivially and returns None. Raises CommitConflict
        (after cleaning up its own locks) when it loses a write-write conflict, and
        TransactionRolledBack when a cleaner rolled it back before its commit point.
        """
        if self.state is State.ACTIVE and not self._writes:
            # Nothing to lock: notifications alone are written without a commit point (a
            # worker finds no primary named in them and simply runs the observers), at a
            # fresh timestamp: newer than any observer run that started before they land.
            if self._notifies:
                self._put_notifications(self._notifies, self.cluster.oracle.get_timestamp(), b"")
            self.state = State.COMMITTED
            self.cluster._closed(self)
            self._run_on_commit()
            return None
        if self.state is State.ACTIVE:
            self.prewrite()
        commit_ts = self.commit_primary()
        self.commit_secondaries()
        self._run_on_commit()
        return commit_ts

    def _run_on_commit(self) -> None:
        callbacks, self._on_commit = self._on_commit, []
        for callback in callbacks:
            callback()

    def _notifications(self) -> dict[tuple[str, bytes], set[str]]:
        """Every notify cell this transaction sets, per row: the observed columns it writes
        (strong notifications) and the cells it ``notify``-ed (weak ones)."""
        out: dict[tuple[str, bytes], set[str]] = {}
        for (table, row), writes in self._writes.items():
            observed = self.cluster.notify_columns(table, writes)
            if observed:
                out[(table, row)] = set(observed)
        for key, columns in self._notifies.items():
            out.setdefault(key, set()).update(columns)
        return out

    def _put_notifications(self, notes: dict[tuple[str, bytes], set[str]], ts: int, value: bytes) -> None:
        """One put_rows per table; idempotent (explicit timestamps), so safe to resend."""
        by_table: dict[str, dict[bytes, list[Put]]] = {}
        for (table, row), columns in notes.items():
            by_table.setdefault(table, {})[row] = [Put(NOTIFY, qualifier(c), ts, value) for c in sorted(columns)]
        for table, rows in by_table.items():
            self.cluster.store.put_rows(table, rows)

    def prewrite(self) -> None:
        self._check_active()
        if not self._writes:
            raise TransactionClosed("nothing to prewrite")
        self._prewrite_started_ms = self._primary_fresh_ms = time.time_ns() // 1_000_000
        primary_key = (self._primary.table, self._primary.row)
        committer = self.cluster.committer
        try:
            # The primary's row first: if it conflicts we abort before locking anything else.
            # (The compare-and-set backend reads every row in one batch first, so each row's
            # prewrite needs only its compare-and-set.)
            guesses = (
                self._read_for_prewrite(list(self._writes))
                if len(self._writes) > 1 and isinstance(committer, CasCommitter) else {}
            )
            self._prewrite_keys([primary_key], guesses)
            others = [key for key in self._writes if key != primary_key]
            # The primary lock is refreshed while the others are written, once it is half its
            # TTL old (the paper's "workers periodically update this wall time while
            # committing"): locking thousands of rows on a busy machine outlives the TTL, and
            # cleaners would otherwise roll back a live transaction each time it retried.
            if others:
                self._prewrite_keys(others, guesses, keepalive=self._keep_primary_alive)
        except BaseException:
            self._rollback_prewritten()
            raise
        self.state = State.PREWRITTEN

    def _read_for_prewrite(self, keys: list[tuple[str, bytes]]) -> dict[tuple[str, bytes], Row]:
        """One batched read per table of the rows about to be prewritten: each row's
        prewrite then decides on its snapshot and needs only its compare-and-set."""
        by_table: dict[str, dict[bytes, ReadSpec]] = {}
        for table, row in keys:
            by_table.setdefault(table, {})[row] = steps.prewrite_spec(self._writes[(table, row)])
        out = {}
        for table, specs in by_table.items():
            for row, snapshot in self.cluster.store.read_rows_guarded(table, specs).items():
                out[(table, row)] = snapshot
        return out

    def _lock_values(self, key: tuple[str, bytes]) -> dict[str, bytes]:
        """The encoded lock of each column this transaction writes in the row."""
        settings = self.cluster.settings
        return {
            c: Lock(
                self.start_ts, Kind.of_value(v), self._primary, settings.lock_ttl_ms, self.cluster.owners.owner,
                self._prewrite_started_ms,
            ).encode()
            for c, v in self._writes[key].items()
        }

    def _prewrite_keys(self, keys: list[tuple[str, bytes]], guesses, *, keepalive=None) -> None:
        """Prewrite the rows through the committer, settling other transactions' locks met
        on the way (and trying those rows again); raises on a conflict or a rollback."""
        cluster = self.cluster
        for _ in range(_PREWRITE_LOCK_RETRIES):
            results = cluster.committer.prewrite(self, keys, guesses, keepalive=keepalive)
            guesses = {}
            retry = []
            for (table, row), result in sorted(results.items()):
                if isinstance(result, steps.Prewritten):
                    continue
                if isinstance(result, steps.WriteConflict):
                    cluster.stats.bump("write_conflicts")
                    raise CommitConflict(
                        f"{table}/{row!r}/{result.column}: written by a transaction that committed at "
                        f"{result.commit_ts}, after this one started at {self.start_ts}",
                        cell=CellRef(table, row, result.column), reason="write after start",
                    )
                if isinstance(result, RolledBack):
                    raise TransactionRolledBack(
                        f"transaction {self.start_ts} was rolled back by a cleaner before it prewrote {table}/{row!r}",
                        reason="rolled back",
                    )
                # KeyLocked: settle the other transaction; wait for nobody (the paper aborts
                # on a live lock: retrying later is cheaper than a distributed wait).
                cell = CellRef(table, row, result.column)
                self._still_readable()
                status = cluster.resolver.resolve(cell, result.lock)
                if isinstance(status, Locked):
                    cluster.stats.bump("lock_conflicts")
                    raise CommitConflict(
                        f"{cell}: locked by live transaction {result.lock.start_ts}",
                        cell=cell, reason="locked",
                    )
                retry.append((table, row))
            if not retry:
                return
            keys = retry
        raise CommitConflict(f"{keys[0][0]}/{keys[0][1]!r}: kept meeting fresh locks", reason="locked")

    def commit_primary(self) -> int:
        """The commit point. Returns commit_ts; raises TransactionRolledBack if too late."""
        if self.state is not State.PREWRITTEN:
            raise TransactionClosed(f"commit_primary needs a prewritten transaction, not {self.state.value}")
        cluster = self.cluster
        # Prewrite's conflict checks were against write records GC keeps only at or above
        # the safe point; a transaction that fell below it must not commit.
        cluster.check_snapshot(self.start_ts)
        self._refresh_primary_if_old()
        commit_ts = cluster.oracle.get_timestamp()
        key = (self._primary.table, self._primary.row)
        # Notifications at commit_ts, before the commit point: the primary's row's ride with
        # the commit itself, the others go just before it. So a notify cell's versions are
        # ordered like the commits they announce, and a worker run whose snapshot is at or
        # above a version sees every change announced at or below it (or meets its lock and
        # waits): clearing "up to the version handled" can then never drop an unobserved
        # change, and no crash between the commit point and a later write can lose one.
        notes = self._notifications()
        primary_notes = notes.pop(key, set())
        value = encode_notify(self._primary, self.start_ts)
        if notes:
            self._put_notifications(notes, commit_ts, value)
        notify_puts = [Put(NOTIFY, qualifier(c), commit_ts, value) for c in sorted(primary_notes)]
        self._commit_sent = True
        try:
            result = self._commit_row(key, commit_ts, notify_puts)
        except BaseException as exc:
            # The commit may have applied (a lost reply that could not be re-read, an error
            # after apply, an interrupt): settle it at the primary before anything else.
            self.state = State.UNDETERMINED
            result = self._settle_or_raise(exc)
        if isinstance(result, Committed):
            self.commit_ts = result.commit_ts
            self.state = State.COMMITTED
            cluster._closed(self)
            return self.commit_ts
        # The primary is rolled back (a cleaner did it, or our settling did): so may the rest.
        self._rollback_prewritten()
        raise TransactionRolledBack(
            f"transaction {self.start_ts} was rolled back before its commit point",
            cell=self._primary, reason="rolled back",
        )

    def _settle_or_raise(self, cause: BaseException) -> Committed | RolledBack:
        """The transaction's fate read back at its primary (rolling the primary back if it
        is not committed); ``CommitUnknown`` if even that fails. The secondaries are left as
        they are until the primary is settled: readers settle them through it."""
        try:
            return self.cluster.resolver.settle(self._primary, self.start_ts)
        except Exception as exc:
            self.cluster.stats.bump("commits_unknown")
            self.cluster._closed(self)
            raise CommitUnknown(
                f"transaction {self.start_ts}: the commit of its primary {self._primary} may have "
                f"applied ({type(cause).__name__}: {cause}), and reading it back failed "
                f"({type(exc).__name__}: {exc}); it is committed or rolled back as a whole, and "
                f"readers will settle it: do not run it again",
                start_ts=self.start_ts, primary=self._primary,
            ) from exc

    def commit_secondaries(self) -> None:
        """Commit the other rows; failures are logged, since readers roll them forward.

        No compare-and-set is needed here: once the primary is committed, the only thing
        anyone may do to our secondary locks is roll them forward to exactly this write
        record, so committing is idempotent and can be sent blind, all rows of a table in
        two round trips: the write records first (a crash between the two leaves locks that
        readers roll forward), then the lock deletes.
        """
        if self.state is not State.COMMITTED or self.commit_ts is None:
            raise TransactionClosed("commit_secondaries needs a committed primary")
        primary_key = (self._primary.table, self._primary.row)
        records: dict[str, dict[bytes, list]] = {}
        unlocks: dict[str, dict[bytes, list]] = {}
        for (table, row), writes in self._writes.items():
            if (table, row) == primary_key:
                continue
            records.setdefault(table, {})[row] = [
                Put(WRITE, qualifier(c), self.commit_ts, Write(Kind.of_value(v), self.start_ts).encode()) for c, v in writes.items()
            ]
            unlocks.setdefault(table, {})[row] = [Delete(LOCK, qualifier(c), self.start_ts) for c in writes]
        store = self.cluster.store
        for table in records:
            try:
                store.put_rows(table, records[table])
                store.delete_rows(table, unlocks[table])
            except Exception as exc:  # committed already; readers will roll the rest forward
                log.warning("secondaries in %s of committed transaction %d not all committed (%s); "
                            "readers will roll them forward", table, self.start_ts, exc)

    def clear_notification_at_commit(self, table: str, row: bytes, column: str, notify_ts: int) -> None:
        """Delete the notify cell versions up to ``notify_ts`` in the same atomic row write as
        this transaction's commit point, when the primary is in that row (the worker makes
        it so by writing the ack first); ``notification_cleared`` then says it happened.
        Saves the worker a round trip per run; the deletion is exactly as late as it must be:
        it happens if and only if the transaction commits."""
        self._clear_at_commit = (table, as_bytes(row), DeleteUpTo(NOTIFY, qualifier(column), notify_ts))

    def _commit_row(self, key: tuple[str, bytes], commit_ts: int, notify_puts: list[Put] = ()):
        extra = self._clear_at_commit
        piggyback = extra is not None and (extra[0], extra[1]) == key
        mutations = [*notify_puts, extra[2]] if piggyback else list(notify_puts)
        result, applied = self.cluster.committer.commit_row(self, key, commit_ts, mutations, piggyback)
        if piggyback and applied:
            self.notification_cleared = True
        return result

    def _refresh_primary_if_old(self) -> bool:
        """Once the primary lock is half its TTL old, refresh it, so cleaners that judge by
        TTL keep waiting for this live transaction. False: the lock is gone (a cleaner
        rolled the transaction back)."""
        now_ms = time.time_ns() // 1_000_000
        ttl = self.cluster.settings.lock_ttl_ms
        if now_ms - self._primary_fresh_ms < ttl // 2:
            return True
        p = self._primary
        q = qualifier(p.column)

        def refresh(snapshot):
            lock = steps.common.lock_of(snapshot, q)
            if lock is None or lock.start_ts != self.start_ts:
                return Decision((), False)
            fresh = Lock(lock.start_ts, lock.kind, lock.primary, lock.ttl_ms, lock.owner, refreshed_ms=now_ms)
            return Decision([Put(LOCK, q, self.start_ts, fresh.encode())], True)

        refreshed = self.cluster.store.row_transaction(
            p.table, p.row, steps.commit_spec([p.column], self.start_ts), refresh
        )
        # Our guessed snapshot of the primary row is stale now; commit will read.
        key = (p.table, p.row)
        guard, locks = self._prewritten[key]
        self._prewritten[key] = (b"", locks)
        if refreshed:
            self._primary_fresh_ms = now_ms
        return refreshed

    # -- rolling back ------------------------------------------------------------------------
    def rollback(self) -> None:
        """Abandon the transaction: nothing it wrote becomes visible. Idempotent.

        Of an ``UNDETERMINED`` transaction (its commit raised ``CommitUnknown``) it settles
        the fate at the primary first: rolled back only if the primary is; if the primary
        turns out committed, the transaction stays committed (its secondaries are committed
        too) and ``state`` says so; if the primary still cannot be read, nothing is touched
        and readers settle it later. A rollback never undoes a commit."""
        if self.state is State.COMMITTED:
            raise TransactionClosed("cannot roll back a committed transaction")
        if self.state is State.ROLLED_BACK:
            return
        if self.state is State.UNDETERMINED:
            try:
                status = self.cluster.resolver.settle(self._primary, self.start_ts)
            except Exception as exc:
                log.warning("transaction %d is still undetermined (%s); readers will settle it", self.start_ts, exc)
                return
            if isinstance(status, Committed):
                self.commit_ts, self.state = status.commit_ts, State.COMMITTED
                self.commit_secondaries()
                return
        self._rollback_prewritten()

    def _rollback_prewritten(self) -> None:
        """Roll back every row whose prewrite was sent: the primary first, and the others
        only once the primary is proven rolled back (a secondary rolled back under a
        committed primary would split the transaction)."""
        self.state = State.ROLLED_BACK
        self.cluster._closed(self)
        if not self._attempted:
            return
        store = self.cluster.store
        primary_key = (self._primary.table, self._primary.row)
        if primary_key in self._attempted:
            try:
                status = self.cluster.resolver.settle(self._primary, self.start_ts)
            except Exception as exc:  # our locks stay; cleaners settle them via the primary
                log.warning("rolling back the primary %s of transaction %d failed: %s; "
                            "its locks are left to cleaners", self._primary, self.start_ts, exc)
                return
            if isinstance(status, Committed):
                # Only reachable once our commit was sent: it applied after all.
                if not self._commit_sent:
                    raise AssertionError(f"transaction {self.start_ts} committed without a commit")
                self.commit_ts, self.state = status.commit_ts, State.COMMITTED
                self.commit_secondaries()
                return

        committer = self.cluster.committer

        def rollback_row(key):
            table, row = key
            try:
                committer.rollback_row(self, key)
            except Exception as exc:  # our locks stay; cleaners will roll them back
                log.warning("rolling back %s/%r of transaction %d failed: %s", table, row, self.start_ts, exc)

        self._in_parallel(rollback_row, sorted(self._attempted - {primary_key}))
        self._prewritten.clear()
        self._attempted.clear()

    # -- plumbing ----------------------------------------------------------------------------
    def _keep_primary_alive(self) -> None:
        if not self._refresh_primary_if_old():
            raise TransactionRolledBack(
                f"transaction {self.start_ts} was rolled back by a cleaner while it prewrote",
                cell=self._primary, reason="rolled back",
            )

    def _in_parallel(self, fn, keys, *, keepalive=None) -> None:
        """``fn(key)`` for every key on the commit executor; the first error is raised once
        all are done. ``keepalive()``, if given, is called every quarter lock TTL meanwhile."""
        if len(keys) <= 1 and keepalive is None:
            for key in keys:
                fn(key)
            return
        futures: list[Future] = [self.cluster.executor.submit(fn, key) for key in keys]
        if keepalive is not None:
            pending = set(futures)
            tick = self.cluster.settings.lock_ttl_ms / 4000
            while pending:
                _, pending = wait_futures(pending, timeout=tick)
                if pending:
                    try:
                        keepalive()
                    except BaseException:
                        for f in pending:
                            f.cancel()
                        wait_futures(pending)
                        raise
        errors = [f.exception() for f in futures]
        for error in errors:
            if error is not None:
                raise error

    def _still_readable(self) -> None:
        """After a read returned: had GC started deleting before it, it published the safe
        point longer before than a process keeps its copy, so this check sees it. A check
        before the read alone would miss a pause between the two."""
        self.cluster.check_snapshot(self.start_ts)

    def _check_active(self) -> None:
        if self.state is not State.ACTIVE:
            raise TransactionClosed(f"transaction {self.start_ts} is {self.state.value}")
        # GC may have collected what this snapshot would read (a process paused past its
        # owner grace drops out of GC's horizon): fail loudly rather than read wrong data.
        self.cluster.check_snapshot(self.start_ts)

    def __enter__(self) -> "Transaction":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            if self.state in (State.ACTIVE, State.PREWRITTEN):
                self.commit()
        elif self.state is not State.COMMITTED:
            self.rollback()

    def __repr__(self) -> str:
        return f"<Transaction start_ts={self.start_ts} {self.state.value} cells={len(self.written_cells)}>"


_RETRY = object()


def _merge_rows(scanned: Iterator[tuple[bytes, dict]], own_rows: list[bytes]) -> Iterator[tuple[bytes, dict]]:
    """Merge scanned rows with rows only this transaction wrote, in key order."""
    own = iter(own_rows)
    next_own = next(own, None)
    for key, values in scanned:
        while next_own is not None and next_own < key:
            yield next_own, {}
            next_own = next(own, None)
        if next_own == key:
            next_own = next(own, None)
        yield key, values
    while next_own is not None:
        yield next_own, {}
        next_own = next(own, None)
