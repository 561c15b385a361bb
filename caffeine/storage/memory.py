"""An in-memory store with HBase's semantics, for fast protocol unit and property tests.

Layer: storage. Never a default for anything user-facing: it exists so the protocol's steps can
be exercised thousands of times a second, and it must pass the very same contract tests as
the HBase store (``tests/storage/test_storage_contract.py``), quirks included:

- a put at an existing (cell, timestamp) replaces that version;
- delete markers hide matching versions *including ones written later* (HBase keeps markers
  until a major compaction): a ``Delete`` at ts hides any later put at exactly ts, a
  ``DeleteUpTo`` at ts hides any later put at or below ts;
- a family returns at most its ``max_versions`` newest visible versions;
- a counted family (``FamilySpec.counted``) refuses deletes; its count is computed by walking
  the row, which gives the answers the HBase store keeps at write time.

One lock serialises every operation, which makes each one trivially atomic.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field, replace
from typing import Iterator, Sequence

from caffeine.storage.base import Store
from caffeine.storage.errors import StorageError, TableExists, TableNotFound
from caffeine.storage.common_cells import CommonCells
from caffeine.storage.model import (
    GUARD_FAMILY,
    GUARD_QUALIFIER,
    GUARD_TS,
    Cell,
    Column,
    Delete,
    DeleteUpTo,
    FamilySpec,
    Mutation,
    Put,
    ReadSpec,
    Refusal,
    Row,
    RowStepCheck,
    check_row,
    count_refusal,
    reject_reserved,
)
from caffeine.storage.regions import Region, check_split_keys, regions_of
from caffeine.storage.row_prefix import RowPrefix
from caffeine.storage.shards import check_shard, in_shard

_ALL_VERSIONS = ReadSpec(versions=2**31 - 1)
# The one server that holds every region of the in-memory store (``Region.server``).
MEMORY_SERVER = "memory"


@dataclass
class _CellHistory:
    versions: dict[int, bytes] = field(default_factory=dict)
    deleted_exact: set[int] = field(default_factory=set)
    deleted_up_to: int = -1

    def visible(self) -> list[tuple[int, bytes]]:
        return sorted(
            ((ts, v) for ts, v in self.versions.items()
             if ts > self.deleted_up_to and ts not in self.deleted_exact),
            reverse=True,
        )


@dataclass
class _Table:
    families: dict[bytes, FamilySpec]
    rows: dict[bytes, dict[Column, _CellHistory]] = field(default_factory=dict)
    split_keys: tuple[bytes, ...] = ()  # what it was created with: its regions (``regions``)


class MemoryStore(Store):
    """The in-memory twin of the HBase store.

    ``row_step``: the server-side row step, if this store should run one (the Python model of
    the HBase coprocessor, given by the layer that defines the steps: it refuses a write or
    names the deletes to apply with it, ``RowStepCheck``); without it,
    ``apply_checked`` raises ``ServerStepsUnavailable`` as an HBase without the coprocessor
    would make the client choose the compare-and-set path.
    """

    def __init__(self, row_step: RowStepCheck | None = None) -> None:
        super().__init__()
        self.row_step = row_step
        self._lock = threading.RLock()
        self._tables: dict[str, _Table] = {}

    # -- admin -----------------------------------------------------------------------------
    def create_table(self, table: str, families: dict[bytes, FamilySpec], split_keys: Sequence[bytes] = ()) -> None:
        with self._lock:
            for family in families:
                reject_reserved(family)
            keys = check_split_keys(split_keys)
            if table in self._tables:
                raise TableExists(table)
            self._tables[table] = _Table({**families, GUARD_FAMILY: FamilySpec(max_versions=1)}, split_keys=keys)

    def regions(self, table: str) -> list[Region]:
        """The regions the table was created with, all on one server ("memory")."""
        with self._lock:
            return regions_of(self._table(table).split_keys, MEMORY_SERVER)

    def drop_table(self, table: str) -> None:
        with self._lock:
            if self._tables.pop(table, None) is None:
                raise TableNotFound(table)

    def list_tables(self) -> list[str]:
        with self._lock:
            return sorted(self._tables)

    def families(self, table: str) -> tuple[bytes, ...]:
        with self._lock:
            return tuple(sorted(f for f in self._table(table).families if f != GUARD_FAMILY))

    def _table(self, table: str) -> _Table:
        try:
            return self._tables[table]
        except KeyError:
            raise TableNotFound(table) from None

    # -- reads -----------------------------------------------------------------------------
    def _snapshot(self, t: _Table, key: bytes, spec: ReadSpec, with_guard: bool) -> Row:
        check_row(key)
        cells: list[Cell] = []
        guard = None
        for (family, qualifier), history in t.rows.get(key, {}).items():
            if family == GUARD_FAMILY:
                if with_guard:
                    visible = history.visible()
                    guard = visible[0][1] if visible else None
                continue
            if not spec.selects(family, qualifier):
                continue
            kept = history.visible()[: t.families[family].max_versions]
            picked = [(ts, v) for ts, v in kept if spec.covers(ts)][: spec.versions]
            cells.extend(Cell(family, qualifier, ts, v) for ts, v in picked)
        return Row(key, cells, guard)

    def read_row(self, table: str, row: bytes, spec: ReadSpec = ReadSpec()) -> Row:
        with self._lock:
            return self._snapshot(self._table(table), row, spec, with_guard=False)

    def read_prefix(self, table: str, rows: Sequence[bytes], family: bytes, limit: int,
                    since: int | None = None) -> dict[bytes, RowPrefix]:
        # Summarized where the rows are, as the coprocessor does: server_side, so readers that
        # choose a path by it take the same one here as on HBase.
        return {key: replace(prefix, server_side=True)
                for key, prefix in super().read_prefix(table, rows, family, limit, since).items()}

    def read_common(self, table: str, rows: Sequence[bytes], family: bytes, limit: int,
                    sizes: Sequence[int] | None = None, *, server_only: bool = False) -> CommonCells:
        # Intersected where the rows are, as the coprocessor does (see read_prefix).
        return replace(super().read_common(table, rows, family, limit, sizes), server_side=True)

    def _read_guarded(self, table: str, row: bytes, spec: ReadSpec) -> Row:
        with self._lock:
            return self._snapshot(self._table(table), row, spec, with_guard=True)

    def scan(self, table, start_row=b"", stop_row=None, spec=ReadSpec(), *, limit=None,
             batch_size=256, key_only=False, first_cell_only=False, shard=None) -> Iterator[Row]:
        if shard is not None:
            check_shard(shard)
        with self._lock:
            t = self._table(table)
            keys = sorted(k for k in t.rows if k >= start_row and (stop_row is None or k < stop_row)
                          and (shard is None or in_shard(k, shard)))
            rows = [self._snapshot(t, k, spec, with_guard=False) for k in keys]
        returned = 0
        for row in rows:
            if not row:
                continue
            if first_cell_only:
                first = min(row, key=lambda c: (c.family, c.qualifier, -c.ts))
                row = Row(row.key, [first])
            if key_only:
                row = Row(row.key, [Cell(c.family, c.qualifier, c.ts, b"") for c in row])
            yield row
            returned += 1
            if limit is not None and returned >= limit:
                return

    # -- writes ----------------------------------------------------------------------------
    def _apply(self, t: _Table, key: bytes, mutations: Sequence[Mutation], new_guard: bytes) -> None:
        check_row(key)
        for m in mutations:
            reject_reserved(m.family)
            if m.family not in t.families:
                raise ValueError(f"unknown column family {m.family!r}")
            if not isinstance(m, Put) and t.families[m.family].counted:
                raise StorageError(count_refusal(m.family))
        cells = t.rows.setdefault(key, {})
        for m in mutations:
            history = cells.setdefault((m.family, m.qualifier), _CellHistory())
            if isinstance(m, Put):
                history.versions[m.ts] = m.value
            elif isinstance(m, Delete):
                history.versions.pop(m.ts, None)
                history.deleted_exact.add(m.ts)
            elif isinstance(m, DeleteUpTo):
                for ts in [ts for ts in history.versions if ts <= m.ts]:
                    del history.versions[ts]
                history.deleted_up_to = max(history.deleted_up_to, m.ts)
            else:
                raise TypeError(f"not a mutation: {m!r}")
        cells[(GUARD_FAMILY, GUARD_QUALIFIER)] = _CellHistory({GUARD_TS: new_guard})

    def mutate_row(self, table: str, row: bytes, mutations: Sequence[Mutation]) -> None:
        with self._lock:
            self._apply(self._table(table), row, mutations, os.urandom(16))

    def _send_checked(self, table, writes, tokens):
        if self.row_step is None:
            return super()._send_checked(table, writes, tokens)
        out = {}
        with self._lock:
            t = self._table(table)
            families = {name: spec for name, spec in t.families.items() if name != GUARD_FAMILY}
            for row, write in writes.items():
                verdict = self.row_step(dict(write.attributes), self._snapshot(t, row, _ALL_VERSIONS, with_guard=True),
                                        families)
                if isinstance(verdict, Refusal):
                    out[row] = verdict
                    continue
                # The deletes the step carries apply with the write, atomically (one lock).
                self._apply(t, row, (*write.mutations, *verdict), tokens[row])
                out[row] = None
        return out

    def _compare_and_apply(self, table, row, expected_guard, mutations, new_guard) -> bool:
        with self._lock:
            t = self._table(table)
            history = t.rows.get(row, {}).get((GUARD_FAMILY, GUARD_QUALIFIER))
            visible = history.visible() if history else []
            current = visible[0][1] if visible else None
            if current != expected_guard:
                return False
            self._apply(t, row, mutations, new_guard)
            return True
