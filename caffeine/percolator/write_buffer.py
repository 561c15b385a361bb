"""A transaction's buffered writes: what it will lock and commit, and what its reads overlay.

Layer: percolator. Internal (no I/O). Contract:

- ``put(table, row, column, value)`` buffers a write (``value`` ``DELETED`` for a delete);
  the first cell written becomes the transaction's ``primary``. Rows keep first-write order.
- ``notify(table, row, column)`` buffers a weak notification (no data, no lock).
- ``overlay(table, rows, own_rows, columns)`` merges the buffered writes into snapshot rows,
  so a transaction reads its own writes.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from caffeine.percolator.records import CellRef, Kind, Lock

DELETED = None  # the buffered value of a deleted cell

RowKey = tuple[str, bytes]


class WriteBuffer:
    def __init__(self) -> None:
        # (table, row) -> {column: value | DELETED}, in first-write order.
        self.rows: dict[RowKey, dict[str, bytes | None]] = {}
        self.primary: CellRef | None = None
        # Weak, notify-only cells (no data write): (table, row) -> columns.
        self.notifies: dict[RowKey, set[str]] = {}

    def __bool__(self) -> bool:
        """Whether any data write is buffered (notifications alone do not count)."""
        return bool(self.rows)

    def put(self, table: str, row: bytes, column: str, value: bytes | None) -> None:
        if not isinstance(column, str) or not column:
            raise ValueError(f"column must be a non-empty str, got {column!r}")
        self.rows.setdefault((table, row), {})[column] = value
        if self.primary is None:
            self.primary = CellRef(table, row, column)

    def notify(self, table: str, row: bytes, column: str) -> None:
        self.notifies.setdefault((table, row), set()).add(column)

    def of_row(self, table: str, row: bytes) -> dict[str, bytes | None]:
        """The buffered writes of one row ({} if none)."""
        return self.rows.get((table, row), {})

    @property
    def primary_key(self) -> RowKey:
        return (self.primary.table, self.primary.row)

    def cells(self) -> list[CellRef]:
        return [CellRef(t, r, c) for (t, r), cols in self.rows.items() for c in cols]

    def rows_of(self, table: str, start_row: bytes = b"", stop_row: bytes | None = None) -> list[bytes]:
        """The written rows of ``table`` in ``[start_row, stop_row)``, in key order."""
        return sorted(r for (t, r) in self.rows if t == table and r >= start_row and (stop_row is None or r < stop_row))

    def lock_values(self, key: RowKey, start_ts: int, ttl_ms: int, owner: str, written_ms: int) -> dict[str, bytes]:
        """The encoded lock of each column written in the row."""
        return {
            c: Lock(start_ts, Kind.of_value(v), self.primary, ttl_ms, owner, written_ms).encode()
            for c, v in self.rows[key].items()
        }

    def notifications(self, observed_columns) -> dict[RowKey, set[str]]:
        """Every notify cell to set, per row: the written columns ``observed_columns(table,
        columns)`` names (strong notifications) and the ``notify``-ed cells (weak ones)."""
        out: dict[RowKey, set[str]] = {}
        for (table, row), writes in self.rows.items():
            observed = observed_columns(table, writes)
            if observed:
                out[(table, row)] = set(observed)
        for key, columns in self.notifies.items():
            out.setdefault(key, set()).update(columns)
        return out

    def overlay(
        self, table: str, snapshot_rows: Iterable[tuple[bytes, dict]], own_rows: list[bytes], columns
    ) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """Merge the buffered writes of ``own_rows`` (sorted) into snapshot rows (in key
        order); rows left with no present column are dropped."""
        for key, values in _merge_rows(iter(snapshot_rows), own_rows):
            merged = dict(values)
            for column, value in self.of_row(table, key).items():
                if columns is not None and column not in columns:
                    continue
                if value is DELETED:
                    merged.pop(column, None)
                else:
                    merged[column] = value
            if merged:
                yield key, dict(sorted(merged.items()))


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
