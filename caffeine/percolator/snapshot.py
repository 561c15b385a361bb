"""Reads at one snapshot: the reader every transaction uses, and the public read-only ``Snapshot``.

Layer: percolator. ``SnapshotReader`` (internal) reads the committed state at ``start_ts``
with a ``WriteBuffer``'s writes overlaid: a read that meets a lock at or below ``start_ts``
resolves it through the ``LockResolver`` or waits for its live owner (up to
``lock_wait_timeout_s``, then ``LockWaitTimeout``); a read that returns is checked against
the GC safe point afterwards (``SnapshotTooOld``), since a check before it alone would miss
a pause between the two. Values read are cached per transaction: a snapshot never changes.

``Snapshot`` (public, ``cluster.snapshot()``) is a read-only view at one timestamp, as Apache
Fluo's: the reads of a transaction and nothing that writes. Several processes (the partitions
of a Spark job) read one consistent state through snapshots at the same timestamp. It holds
GC's horizon until ``close()`` (or the end of its ``with`` block).
"""

from __future__ import annotations

import time
from typing import Iterable, Iterator

from caffeine.percolator import steps
from caffeine.percolator.errors import LockWaitTimeout, TransactionClosed
from caffeine.percolator.history import newest_committed
from caffeine.percolator.host import TransactionHost
from caffeine.percolator.layout import WRITE, column_name, data_family, qualifier
from caffeine.percolator.records import CellRef, Write
from caffeine.percolator.write_buffer import DELETED, WriteBuffer
from caffeine.storage import ReadSpec, Row, as_bytes

_RETRY = object()


class SnapshotReader:
    """Reads at ``start_ts`` through ``host``, with ``own``'s buffered writes overlaid."""

    def __init__(self, host: TransactionHost, start_ts: int, own: WriteBuffer) -> None:
        self.host = host
        self.start_ts = start_ts
        self.own = own
        # (table, row) -> {column: value} read in this snapshot: reading a cell again (or one
        # the worker fetched with its first read) costs nothing.
        self.cache: dict[tuple[str, bytes], dict[str, bytes | None]] = {}
        # (table, row) -> columns get_row had to fetch with a read of their own (neither
        # cached nor buffered): what a worker prefetches the next time (read-ahead).
        self.fetched: dict[tuple[str, bytes], set[str]] = {}
        # (table, row) -> every present column of the row in this snapshot, as get_all_rows
        # read it (own writes not included): a row read whole again costs nothing.
        self.whole: dict[tuple[str, bytes], dict[str, bytes]] = {}

    # -- point reads -------------------------------------------------------------------------
    def get_row(self, table: str, row: bytes, columns: list[str]) -> dict[str, bytes | None]:
        own = self.own.of_row(table, row)
        known = self.cache.get((table, row), {})
        wanted = [c for c in columns if c not in own and c not in known]
        values = self.read_columns(table, row, wanted) if wanted else {}
        if values:
            self.cache.setdefault((table, row), {}).update(values)
            self.fetched.setdefault((table, row), set()).update(wanted)
        return {c: own[c] if c in own else known[c] if c in known else values[c] for c in columns}

    def get_rows(self, table: str, rows: list[bytes], columns: list[str]) -> dict[bytes, dict[str, bytes | None]]:
        snapshots = self.host.store.read_rows(table, rows, steps.get_spec(columns, self.start_ts))
        out = {}
        for row in rows:
            own = self.own.of_row(table, row)
            wanted = [c for c in columns if c not in own]
            values = self.read_columns(table, row, wanted, snapshots[row]) if wanted else {}
            out[row] = {c: own[c] if c in own else values[c] for c in columns}
        self.still_readable()
        return out

    def get_all_rows(self, table: str, rows: list[bytes]) -> dict[bytes, dict[str, bytes]]:
        missing = sorted(r for r in rows if (table, r) not in self.whole)
        if missing:
            snapshots = self.host.store.read_rows(table, missing, steps.get_spec(None, self.start_ts))
            found = dict(self._snapshot_rows(table, [snapshots[r] for r in missing if snapshots.get(r)], None))
            self.still_readable()
            for r in missing:
                self.whole[(table, r)] = found.get(r, {})
        ordered = sorted(rows)  # merging with own writes walks both in key order
        scanned = ((r, self.whole[(table, r)]) for r in ordered if self.whole[(table, r)])
        own_rows = [r for r in ordered if self.own.of_row(table, r)]
        out: dict[bytes, dict[str, bytes]] = {r: {} for r in rows}
        for key, values in self.own.overlay(table, scanned, own_rows, None):  # overlay copies
            out[key] = values
        return out

    def present_columns(self, table: str, row: bytes) -> set[str]:
        snapshot = self.host.store.read_row(table, row, steps.get.presence_spec(self.start_ts))
        present, unsure = set(), []
        for q in steps.get.columns_in(snapshot):
            known = steps.get.presence(snapshot, q, self.start_ts)
            if known is None:
                unsure.append(column_name(q))
            elif known:
                present.add(column_name(q))
        if unsure:
            present.update(c for c, v in self.read_columns(table, row, unsure).items() if v is not None)
        for column, value in self.own.of_row(table, row).items():
            if value is DELETED:
                present.discard(column)
            else:
                present.add(column)
        self.still_readable()
        return present

    def scan(self, table, start_row: bytes, stop_row: bytes | None, columns, batch_size: int):
        spec = steps.get_spec(columns, self.start_ts)
        own_rows = self.own.rows_of(table, start_row, stop_row)
        scanned = self.host.store.scan(table, start_row, stop_row, spec, batch_size=batch_size)
        for item in self.own.overlay(table, self._snapshot_rows(table, scanned, columns), own_rows, columns):
            self.still_readable()
            yield item

    def committed_write(self, table: str, row: bytes, column: str) -> tuple[int, int] | None:
        self.read_columns(table, row, [column])  # settles any lock at or below start_ts
        found = newest_committed(self.host.store, CellRef(table, row, column), self.start_ts)
        self.still_readable()
        return None if found is None else (found[0], found[1].start_ts)

    def change_and_values(
        self, table: str, row: bytes, column: str, columns: list[str]
    ) -> tuple[tuple[int, int] | None, dict[str, bytes | None]]:
        """``committed_write(column)`` and ``get_row(columns)`` in one read when nothing is
        locked (the common case); the slow paths otherwise."""
        snapshot = self.host.store.read_row(table, row, steps.get_spec([column, *columns], self.start_ts))
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
            values[c] = self.get_row(table, row, [c])[c] if value is _RETRY else value
        self.cache.setdefault((table, row), {}).update(values)
        self.still_readable()
        return change, values

    def still_readable(self) -> None:
        """After a read returned: had GC started deleting before it, it published the safe
        point longer before than a process keeps its copy, so this check sees it."""
        self.host.check_snapshot(self.start_ts)

    # -- the steps' extra I/O ------------------------------------------------------------------
    def read_columns(
        self, table: str, row: bytes, columns: list[str], snapshot: Row | None = None
    ) -> dict[str, bytes | None]:
        settings = self.host.settings
        deadline = time.monotonic() + settings.lock_wait_timeout_s
        store = self.host.store
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
                    f"{table}/{row!r}: waited {settings.lock_wait_timeout_s:.0f}s "
                    f"on locks of live transactions for columns {retry}"
                )
            pending = retry
            snapshot = store.read_row(table, row, steps.get_spec(pending, self.start_ts))
            if any(isinstance(steps.read_cell(snapshot, c, self.start_ts), steps.Blocked) for c in pending):
                time.sleep(delay)
                delay = min(delay * 2, 0.25)
        self.still_readable()
        return out

    def _finish_read(self, table: str, row: bytes, column: str, result):
        """Turn one step result into a value, doing the extra I/O it asks for (or _RETRY)."""
        store = self.host.store
        if isinstance(result, steps.Value):
            return result.value
        if isinstance(result, steps.Blocked):
            self.host.stats.bump("lock_waits")
            self.still_readable()  # a lock read before a pause may be settled and collected
            self.host.resolver.resolve(CellRef(table, row, column), result.lock)
            return _RETRY
        q = qualifier(column)
        if isinstance(result, steps.NeedData):
            family = data_family(q)
            spec = ReadSpec(columns=((family, q),), min_ts=result.data_ts, max_ts=result.data_ts)
            cell = store.read_row(table, row, spec).latest(family, q)
            if cell is None:
                self.still_readable()  # GC may have collected it meanwhile
                raise AssertionError(f"{table}/{row!r}/{column}: committed write points at missing data @{result.data_ts}")
            return cell.value
        if isinstance(result, steps.NeedOlderWrite):
            found = newest_committed(store, CellRef(table, row, column), self.start_ts)
            return self._finish_read(table, row, column, steps.get.points_at(None if found is None else found[1]))
        raise TypeError(result)

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
                for column, value in self.read_columns(table, row.key, slow).items():
                    if value is not None:
                        values[column] = value
            yield row.key, values


class SnapshotReads:
    """The read methods of a transaction and a snapshot (one implementation, two owners).

    Subclasses set ``_reader`` and implement ``_check_open()`` (raises if reads are over)."""

    _reader: SnapshotReader
    start_ts: int

    def _check_open(self) -> None:
        raise NotImplementedError

    def get(self, table: str, row: bytes | str, column: str) -> bytes | None:
        """The cell's value in this snapshot (own writes included), or None."""
        return self.get_row(table, row, [column])[column]

    def get_row(self, table: str, row: bytes | str, columns: Iterable[str]) -> dict[str, bytes | None]:
        """Several columns of one row in one read (batched); missing cells map to None."""
        self._check_open()
        return self._reader.get_row(table, as_bytes(row), list(columns))

    def get_rows(self, table: str, rows: Iterable[bytes | str], columns: Iterable[str]) -> dict[bytes, dict[str, bytes | None]]:
        """The same columns of several rows of one table, in one batched read."""
        self._check_open()
        return self._reader.get_rows(table, [as_bytes(r) for r in rows], list(columns))

    def get_all(self, table: str, row: bytes | str) -> dict[str, bytes]:
        """Every present column of one row (own writes included), in one read: for rows
        whose columns are not known in advance, e.g. one column per linking page."""
        row = as_bytes(row)
        return self.get_all_rows(table, [row])[row]

    def get_all_rows(self, table: str, rows: Iterable[bytes | str]) -> dict[bytes, dict[str, bytes]]:
        """``get_all`` of several rows of one table in one batched read; every row asked for
        is in the result (``{}`` when it has no present column)."""
        self._check_open()
        return self._reader.get_all_rows(table, list(dict.fromkeys(as_bytes(r) for r in rows)))

    def present_columns(self, table: str, row: bytes | str) -> set[str]:
        """The columns of one row that have a value in this snapshot (own writes included),
        without reading the values: for counting, e.g. the pages that link to a page. Reads
        only locks and write records, so a wide row costs a fraction of ``get_all``."""
        self._check_open()
        return self._reader.present_columns(table, as_bytes(row))

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
        resolve them; a transaction's own buffered writes are merged in.
        """
        self._check_open()
        return self._reader.scan(
            table, as_bytes(start_row), None if stop_row is None else as_bytes(stop_row),
            None if columns is None else list(columns), batch_size,
        )

    def committed_write(self, table: str, row: bytes | str, column: str) -> tuple[int, int] | None:
        """(commit_ts, start_ts) of the newest committed write of the cell visible in this
        snapshot (a DELETE counts), or None if none; locks are resolved as reads resolve them."""
        self._check_open()
        return self._reader.committed_write(table, as_bytes(row), column)


class Snapshot(SnapshotReads):
    """A read-only view of the committed state at ``start_ts`` (``cluster.snapshot()``).

    ``with cluster.snapshot() as snap: snap.get(...)``. Reads after ``close()`` raise
    ``TransactionClosed``; a snapshot below the GC safe point raises ``SnapshotTooOld``.
    """

    def __init__(self, host: TransactionHost, start_ts: int) -> None:
        self.start_ts = start_ts
        self._host = host
        self._reader = SnapshotReader(host, start_ts, WriteBuffer())
        self.closed = False

    def _check_open(self) -> None:
        if self.closed:
            raise TransactionClosed(f"snapshot {self.start_ts} is closed")
        # GC may have collected what this snapshot would read: fail loudly rather than read wrong data.
        self._host.check_snapshot(self.start_ts)

    def close(self) -> None:
        """End the snapshot: it no longer holds GC's horizon. Idempotent."""
        if not self.closed:
            self.closed = True
            self._host.release(self)

    def __enter__(self) -> "Snapshot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Snapshot start_ts={self.start_ts}{' closed' if self.closed else ''}>"
