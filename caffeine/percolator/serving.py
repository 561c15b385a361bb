"""Serving tables: non-transactional tables written idempotently, for what serves queries.

Layer: percolator. Public: ``ServingTable``, from ``Cluster.serving(name, families)``.

Percolator's own tables pay a lock and a commit per cell; a serving system (the inverted
index) is better written the paper's way: by an observer, *after* its transaction committed,
with idempotent writes. Here every write carries an explicit cell timestamp that the writer
uses as a sequence number (typically its transaction's start_ts):

- a replay writes the same cells at the same timestamps: no change;
- a late, older write lands below a newer one and stays hidden (HBase serves the newest);
- a removal is a *tombstone*, an empty value at the newer sequence number, which readers of
  this class never see (``get`` and ``scan`` skip empty values).

Columns are named ``"family:qualifier"``; a table's families are fixed when it is created, and
so is which of them are *counted* (the store keeps each row's number of live cells of the
family, for ``read_prefix``; ``FamilySpec.counted``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterable, Iterator, Mapping, Sequence

from caffeine.storage import MAX_COMMON_ROWS, MAX_PREFIX, CommonCells, FamilySpec, ReadSpec, RowPrefix, Store, TableExists, TableNotFound, as_bytes

# TableNotFound: what a read of a table that does not exist raises.
__all__ = ["MAX_COMMON_ROWS", "MAX_PREFIX", "TOMBSTONE", "CommonCells", "ServingTable", "TableNotFound"]

TOMBSTONE = b""


def _live(latest: Mapping[bytes, Mapping[bytes, bytes]], keys: Iterable[bytes]) -> dict[bytes, dict[str, bytes]]:
    """Each of ``keys`` mapped to its live cells (tombstones skipped) of a ``read_latest`` or
    ``read_cells`` answer, columns as text."""
    return {
        key: {
            column.decode("utf-8", "surrogateescape"): value
            for column, value in latest.get(key, {}).items() if value != TOMBSTONE
        }
        for key in keys
    }


def _split(column: str) -> tuple[bytes, bytes]:
    family, sep, qualifier = column.partition(":")
    if not sep or not family:
        raise ValueError(f"serving columns are 'family:qualifier', got {column!r}")
    return family.encode(), qualifier.encode("utf-8")


def _join(family: bytes, qualifier: bytes) -> str:
    return family.decode() + ":" + qualifier.decode("utf-8", "surrogateescape")


def _cells(row, *, tombstones: bool) -> dict[str, bytes]:
    """A row's newest cells as ``{"family:qualifier": value}``, with or without tombstones."""
    return {_join(c.family, c.qualifier): c.value for c in row.newest_cells() if tombstones or c.value != TOMBSTONE}


# Serving tables are read by row and by named column: a search's lookups of its candidates'
# postings read a few hundred columns of rows with a cell per document. HBase seeks to each
# column and walks its data block from the block's start, so the block size sets the cost:
# at 60,000 documents, 500 columns of three such rows took 73 ms with HBase's 64 KB blocks
# and 31-37 ms with 8 KB ones, while whole-row reads took the same time with either. A table
# created before keeps its blocks: HBase's alter of the family's BLOCKSIZE, then a major
# compaction, rewrites it.
BLOCK_SIZE = 8 * 1024


class ServingTable:
    """``counted``: the families (among ``families``) whose live cells the store counts per row
    when it creates the table (``FamilySpec.counted``), so ``read_prefix`` answers their count
    without walking the row; counted families take no deletes, which a serving table never
    sends (a removal is a tombstone). Every family is created with ``BLOCK_SIZE`` blocks, and
    the table split at ``split_keys`` (``Store.create_table``).
    It says how the table is created, nothing else: an existing table keeps the layout it was
    created with, but for what the store upgrades in place (``create``)."""

    def __init__(self, store: Store, name: str, families: Iterable[str], *, counted: Iterable[str] = (),
                 split_keys: Sequence[bytes] = ()) -> None:
        self.store = store
        self.name = name
        self.families = tuple(f.encode() for f in families)
        self.counted = frozenset(f.encode() for f in counted)
        self.split_keys = tuple(split_keys)
        if not self.counted <= set(self.families):
            raise ValueError(f"counted families {sorted(counted)} must be among {list(families)}")

    def create(self) -> None:
        """Create the table, or bring one created before up to what the store now gives a new
        one where it can in place (``Store.upgrade_families``)."""
        families = {f: FamilySpec(max_versions=1, counted=f in self.counted, block_size=BLOCK_SIZE)
                    for f in self.families}
        if self.name not in self.store.list_tables():
            try:
                self.store.create_table(self.name, families, self.split_keys)
                return
            except TableExists:
                pass
        self.store.upgrade_families(self.name, families)

    def put(self, rows: Mapping[bytes | str, Mapping[str, bytes | str]], ts: int) -> None:
        """Write every cell at timestamp ``ts`` (one round trip); empty values are tombstones."""
        batch = {}
        # The rows of an index write share a few columns: each is split once, into the
        # (family, qualifier, ts) its cells begin with.
        heads: dict[str, tuple[bytes, bytes, int]] = {}
        for row, cells in rows.items():
            out = []
            for column, value in cells.items():
                head = heads.get(column)
                if head is None:
                    head = heads[column] = (*_split(column), ts)
                out.append((*head, value if type(value) is bytes else as_bytes(value)))
            if out:
                batch[as_bytes(row)] = out
        # Unguarded: nothing checks or compares-and-sets a serving table's rows.
        self.store.put_cells(self.name, batch)

    def get(self, row: bytes | str, columns: Iterable[str] | None = None) -> dict[str, bytes]:
        """The row's live cells (tombstones skipped)."""
        return self.get_many([row], columns).get(as_bytes(row), {})

    def get_many(self, rows: Iterable[bytes | str], columns: Iterable[str] | None = None) -> dict[bytes, dict[str, bytes]]:
        """Every row asked for, mapped to its live cells (``{}`` when it has none): all of its
        cells, or those of ``columns``."""
        keys = [as_bytes(r) for r in rows]
        # The store's latest-values path, which skips per-cell objects: most of a wide row's
        # read cost on the client (a query's posting lists, or a thousand of their cells).
        if columns is None:
            latest = self.store.read_latest(self.name, keys, self.families)
        else:
            named = [_split(c) for c in columns]   # "family:" is the whole family
            latest = self.store.read_latest(self.name, keys, [f for f, q in named if not q], [(f, q) for f, q in named if q])
        return _live(latest, keys)

    def get_cells(self, wanted: Mapping[bytes | str, Iterable[str]]) -> dict[bytes, dict[str, bytes]]:
        """Each row asked for, mapped to its live cells among its own ``columns``
        ("family:qualifier"; ``{}`` when it has none): ``get_many`` with different columns
        per row, in one round trip (``Store.read_cells``)."""
        named = {as_bytes(row): [_split(c) for c in columns] for row, columns in wanted.items()}
        return _live(self.store.read_cells(self.name, named), named)

    def read_prefix(self, rows: Iterable[bytes | str], limit: int, since: int | None = None) -> dict[bytes, RowPrefix]:
        """Each row's first ``limit`` live cells (tombstones skipped) of the table's first
        family, in qualifier order, with ``since`` also its later live cells written at a
        sequence number ``>= since``, and its number of live cells, in one round trip
        (``Store.read_prefix``: summarized inside HBase where the coprocessor is loaded).
        ``limit`` is at most ``MAX_PREFIX`` (ValueError otherwise)."""
        return self.store.read_prefix(self.name, [as_bytes(r) for r in rows], self.families[0], limit, since)

    def read_common(self, rows: Iterable[bytes | str], limit: int, sizes: Iterable[int] | None = None, *,
                    server_only: bool = False) -> CommonCells | None:
        """The live cells of the table's first family that ``rows`` have in common, in one
        round trip (``Store.read_common``: intersected inside HBase where the coprocessor is
        loaded): per row, its cells of the first ``limit`` qualifiers live in every row
        (qualifier order) as ``{qualifier: value}`` (the qualifier as text: the family is the
        table's first; wide answers skip the prefix), and how many such qualifiers there are
        in all (``CommonCells.count``). Pass the shortest row first, then the others from
        shorter to longer: the first is read whole, the next ones only where still common.
        ``sizes``: each row's expected number of live cells, when known (a hint: see
        ``Store.read_common``). ``server_only``: None when the server cannot intersect them
        (rather than reading the rows whole). 1 to ``MAX_COMMON_ROWS`` rows, ``limit`` at
        most ``MAX_PREFIX`` (ValueError otherwise)."""
        got = self.store.read_common(self.name, [as_bytes(r) for r in rows], self.families[0], limit,
                                     None if sizes is None else list(sizes), server_only=server_only)
        if got is None:
            return None
        return replace(got, cells={key: {q.decode("utf-8", "surrogateescape"): v for q, v in cells.items()}
                                   for key, cells in got.cells.items()})

    def changes_since(self, rows: Iterable[bytes | str], min_ts: int,
                      columns: Iterable[str] | None = None) -> dict[bytes, dict[str, bytes]]:
        """Each row's cells written at a timestamp ``>= min_ts`` (the newest such version of
        each), tombstones included (as ``b""``), in one round trip: what changed in the rows
        since sequence number ``min_ts``, for a reader that keeps a copy up to date."""
        keys = [as_bytes(r) for r in rows]
        spec = replace(self._spec(columns), min_ts=min_ts)
        out: dict[bytes, dict[str, bytes]] = {key: {} for key in keys}
        for key, row in self.store.read_rows(self.name, keys, spec).items():
            out[key] = _cells(row, tombstones=True)
        return out

    def scan(self, start: bytes | str = b"", stop: bytes | str | None = None,
             columns: Iterable[str] | None = None, *, batch_size: int = 512) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        spec = self._spec(columns)
        stop = None if stop is None else as_bytes(stop)
        for row in self.store.scan(self.name, as_bytes(start), stop, spec, batch_size=batch_size):
            cells = {_join(c.family, c.qualifier): c.value for c in row if c.value != TOMBSTONE}
            if cells:
                yield row.key, cells

    def count_rows(self, start: bytes | str = b"", stop: bytes | str | None = None, *,
                   batch_size: int = 1024) -> int:
        """How many rows of ``[start, stop)`` have at least one live cell (what ``scan``
        would yield), without reading them whole: the scan returns each row's first cell
        only, and only rows whose first cell is a tombstone are read in full (batched). For
        wide tables (a term's postings) this is one cell per row instead of every cell."""
        stop = None if stop is None else as_bytes(stop)
        live = 0
        doubtful: list[bytes] = []

        def settle() -> int:
            rows = self.get_many(doubtful)
            doubtful.clear()
            return sum(1 for cells in rows.values() if cells)

        for row in self.store.scan(self.name, as_bytes(start), stop, self._spec(None), batch_size=batch_size,
                                   first_cell_only=True):
            if next(iter(row)).value != TOMBSTONE:
                live += 1
            else:
                doubtful.append(row.key)
                if len(doubtful) >= 64:
                    live += settle()
        return live + (settle() if doubtful else 0)

    def scan_changes(self, min_ts: int, start: bytes | str = b"", stop: bytes | str | None = None,
                     columns: Iterable[str] | None = None, *,
                     batch_size: int = 512) -> Iterator[tuple[bytes, dict[str, bytes]]]:
        """The rows of ``[start, stop)`` with a cell written at a timestamp ``>= min_ts``, and
        those cells (newest such version each, tombstones included as ``b""``): which rows
        changed since sequence number ``min_ts`` (one time-range scan)."""
        spec = replace(self._spec(columns), min_ts=min_ts)
        stop = None if stop is None else as_bytes(stop)
        for row in self.store.scan(self.name, as_bytes(start), stop, spec, batch_size=batch_size):
            cells = _cells(row, tombstones=True)
            if cells:
                yield row.key, cells

    def _spec(self, columns: Iterable[str] | None) -> ReadSpec:
        if columns is None:
            return ReadSpec(families=self.families)
        cols = []
        fams = []
        for column in columns:
            family, qualifier = _split(column)
            if qualifier:
                cols.append((family, qualifier))
            else:
                fams.append(family)
        return ReadSpec(families=tuple(fams), columns=tuple(cols))
