"""The batch job's I/O: settings for executors, key ranges, the snapshot reader, the writers.

Layer: spark. Imports the public ``caffeine.percolator`` API, ``caffeine.storage``
(key-only sampling, serving-table writes), ``caffeine.index.schema`` and ``spark.transforms``. Everything here runs either
on the driver (``sample_ranges``, ``recreate_batch_tables``, ``read_batch_tables``) or inside one
Spark partition (``read_range``, ``write_partition``), where it opens its own connections.

One snapshot for the whole job: the driver takes a start_ts (its own open transaction, which
also holds back garbage collection while the job runs) and every partition reads its row range
with ``cluster.snapshot(start_ts)``. Commits not visible at start_ts get a later commit_ts from
the oracle, so no partition can see a change another partition missed.

Batch tables (serving tables, written with plain puts at cell timestamp = the snapshot's
start_ts, dropped and recreated by every run so nothing of an earlier run survives):

    batch_documents  d:parsed, d:outlinks, d:fingerprint, c:state
    batch_inlinks    i:<source> = JSON string of the anchor text (an empty value would read as
                     a serving-table tombstone)
    batch_dups       m:<url> = inlinks, d:<url> = declared canonical, n:<fp> = shared/total
                     shingles, c:canonical-url, c:sketch
    batch_postings   p:<url> = encoded posting               (same format as ``postings``)
    batch_impacts    i:<impact qualifier> = encoded posting  (same as ``impacts``)
    batch_docstats   s:length, s:title, s:fingerprint, s:inlinks (same as ``docstats``)
    batch_bands      b:members
"""

from __future__ import annotations

import json
import os
from typing import Iterable, Iterator

from caffeine.config import Settings
from caffeine.index.schema import PAGE_CONTENT, PAGE_META, REPOSITORY, counted_families, decode_page_meta
from caffeine.percolator import ServingTable, connect
from caffeine.storage import Store, TableNotFound, open_store
from spark.transforms import LOGICAL_TABLES, effective_version

__all__ = [
    "BATCH_TABLES",
    "ship_settings",
    "executor_settings",
    "sample_ranges",
    "read_range",
    "recreate_batch_tables",
    "write_partition",
    "read_batch_tables",
    "decode_meta",
]

ENV_PREFIX = "CAFFEINE_"
# Settings an executor's environment never changes: the job's data is the driver's.
DRIVER_ONLY = ("table_prefix",)
# How far back the reader looks for a page's last good fetch behind 5xx/timeouts.
MAX_VERSIONS_BACK = 64


class _BatchTable:
    """How one logical table is stored in its batch table: column prefixes and value codec."""

    def __init__(self, name: str, prefixes: list[tuple[str, str]], json_values: bool = False,
                 counted: tuple[str, ...] = ()) -> None:
        self.name = name
        self.prefixes = prefixes  # (logical column prefix, batch column prefix)
        self.families = tuple(dict.fromkeys(b.split(":", 1)[0] for _, b in prefixes))
        self.json_values = json_values
        # The batch families holding the logical table's counted families (schema.py).
        self.counted = tuple(dict.fromkeys(b.split(":", 1)[0] for a, b in prefixes if a.split(":", 1)[0] in counted))

    def table(self, store: Store) -> ServingTable:
        """The batch table as a serving table (created with its counted families)."""
        return ServingTable(store, self.name, self.families, counted=self.counted)

    def encode(self, cells: dict[str, bytes]) -> dict[str, bytes]:
        out = {}
        for column, value in cells.items():
            for logical, stored in self.prefixes:
                if column.startswith(logical):
                    if self.json_values:
                        value = json.dumps(value.decode("utf-8", "surrogateescape"), ensure_ascii=False).encode("utf-8", "surrogateescape")
                    out[stored + column[len(logical):]] = value
                    break
            else:
                raise ValueError(f"{self.name}: no batch column for {column!r}")
        return out

    def decode(self, cells: dict[str, bytes]) -> dict[str, bytes]:
        out = {}
        for column, value in cells.items():
            for logical, stored in self.prefixes:
                if column.startswith(stored):
                    if self.json_values:
                        value = json.loads(value.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
                    out[logical + column[len(stored):]] = value
                    break
        return out


BATCH_TABLES: dict[str, _BatchTable] = {
    "documents": _BatchTable("batch_documents", [("doc:", "d:"), ("cluster:", "c:")]),
    "inlinks": _BatchTable("batch_inlinks", [("in:", "i:")], json_values=True),
    "dups": _BatchTable("batch_dups", [("member:", "m:"), ("declares:", "d:"), ("near:", "n:"),
                                   ("canonical-url", "c:canonical-url"), ("sketch", "c:sketch")]),
    "postings": _BatchTable("batch_postings", [("p:", "p:")]),
    "impacts": _BatchTable("batch_impacts", [("i:", "i:")], counted=counted_families("impacts")),
    "docstats": _BatchTable("batch_docstats", [("s:", "s:")]),
    "bands": _BatchTable("batch_bands", [("members", "b:members")]),
}
assert tuple(BATCH_TABLES) == LOGICAL_TABLES


# -- settings --------------------------------------------------------------------------------

def ship_settings(settings: Settings) -> dict:
    """The driver's settings for the executors (plain values: pickles anywhere), with the
    driver's CAFFEINE_* environment, against which the executors' own is compared."""
    values = {k: (str(v) if isinstance(v, os.PathLike) else v) for k, v in settings.model_dump().items()}
    driver_env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX)}
    return {"settings": values, "driver_env": driver_env}


def executor_settings(shipped: dict) -> Settings:
    """Settings inside a partition: the driver's, except what the executor's environment sets
    *differently* from the driver's (``--conf spark.executorEnv.CAFFEINE_THRIFT1_HOST=...``):
    executors may reach HBase by other names, or keep the Thrift2 IDL at another path. In
    local mode the environments are the same, so the driver's settings (explicit overrides
    included) hold everywhere. The table prefix is always the driver's: it names the data."""
    values = dict(shipped["settings"])
    driver_env = shipped["driver_env"]
    for key, value in os.environ.items():
        if not key.startswith(ENV_PREFIX) or driver_env.get(key) == value:
            continue
        name = key[len(ENV_PREFIX):].lower()
        if name in Settings.model_fields and name not in DRIVER_ONLY:
            values[name] = value
    return Settings(**{k: v for k, v in values.items() if v is not None})


# -- reading the repository --------------------------------------------------------------------

def sample_ranges(cluster, snapshot_ts: int, n: int) -> list[tuple[bytes, bytes | None]]:
    """``n`` row ranges of ``repository`` holding about as many pages each (key-only scan).

    Reads only the keys of rows that have a ``page:meta`` write at the snapshot
    (``Cluster.row_keys``): one small cell per page, no values. (At scale one would cut at
    HBase's region boundaries instead of scanning keys.)
    """
    from spark.transforms import key_ranges, split_points

    try:
        keys = list(cluster.row_keys(REPOSITORY, PAGE_META, snapshot_ts))
    except TableNotFound:
        keys = []
    return key_ranges(split_points(keys, n))


def decode_meta(value: bytes | None) -> dict | None:
    """``page:meta`` as a dict; None when absent or not a JSON object (the outcome is "keep")."""
    try:
        meta = decode_page_meta(value)
    except ValueError:  # a malformed record is no fetch the batch can use: the outcome is "keep"
        return None
    return meta if isinstance(meta, dict) else None


def read_range(shipped: dict, snapshot_ts: int, start: bytes, stop: bytes | None) -> Iterator[tuple[str, dict, bytes | None]]:
    """``(url, meta, content)`` of every page in ``[start, stop)`` at the snapshot: its
    effective version (the newest fetch whose outcome is not "keep"), pages without one left out.
    Runs inside a partition, with its own connection."""
    cluster = connect(executor_settings(shipped))
    try:
        txn = cluster.snapshot(snapshot_ts)
        try:
            for row, cols in txn.scan(REPOSITORY, start, stop, [PAGE_META, PAGE_CONTENT], batch_size=128):
                newest = (decode_meta(cols.get(PAGE_META)), cols.get(PAGE_CONTENT))
                found = effective_version(_versions(cluster, txn, row, newest))
                if found is not None:
                    yield row.decode("utf-8"), found[0], found[1]
        except TableNotFound:
            pass  # nothing crawled yet: an empty index
        txn.close()
    finally:
        cluster.close()


def _versions(cluster, txn, row: bytes, newest) -> Iterator[tuple[dict | None, bytes | None]]:
    """The page's versions, newest first, each read at the snapshot just below the commit of
    the one before (lazy: older snapshots are only opened while the outcomes say "keep")."""
    yield newest
    snap = txn
    try:
        for _ in range(MAX_VERSIONS_BACK):
            written = snap.committed_write(REPOSITORY, row, PAGE_META)
            if snap is not txn:
                snap.close()
            snap = txn
            if written is None:
                return
            commit_ts, _ = written
            snap = cluster.snapshot(commit_ts - 1)
            cols = snap.get_row(REPOSITORY, row, [PAGE_META, PAGE_CONTENT])
            yield decode_meta(cols[PAGE_META]), cols[PAGE_CONTENT]
    finally:
        if snap is not txn:
            snap.close()


# -- writing the batch tables ------------------------------------------------------------------

def recreate_batch_tables(store: Store) -> None:
    """Drop every batch table and create it empty (driver, before the job writes)."""
    existing = set(store.list_tables())
    for batch in BATCH_TABLES.values():
        if batch.name in existing:
            store.drop_table(batch.name)
        batch.table(store).create()


def write_partition(shipped: dict, ts: int, *, max_cells: int = 4000):
    """A ``mapPartitions`` function writing ``(table, (row, cells))`` of the logical tables to
    their batch tables at cell timestamp ``ts``; yields ``(table, rows, cells)`` counts."""

    def write(tagged: Iterable[tuple[str, tuple[str, dict]]]) -> Iterator[tuple[str, int, int]]:
        store = open_store(executor_settings(shipped))
        tables: dict[str, list] = {}  # table -> [serving table, batch, cells in batch, rows, cells]
        try:
            for table, (row, cells) in tagged:
                state = tables.get(table)
                if state is None:
                    state = tables[table] = [BATCH_TABLES[table].table(store), {}, 0, 0, 0]
                state[1][row.encode("utf-8")] = BATCH_TABLES[table].encode(cells)
                state[2] += len(cells)
                state[3] += 1
                state[4] += len(cells)
                if state[2] >= max_cells:
                    state[0].put(state[1], ts=ts)
                    state[1], state[2] = {}, 0
            for state in tables.values():
                if state[1]:
                    state[0].put(state[1], ts=ts)
        finally:
            store.close()
        for table, state in tables.items():
            yield table, state[3], state[4]

    return write


def read_batch_tables(store: Store) -> dict[str, dict[str, dict[str, bytes]]]:
    """The batch tables as logical tables: {table: {row: {column: value}}} (driver)."""
    out = {}
    for table, batch in BATCH_TABLES.items():
        rows = {}
        try:
            for key, cells in batch.table(store).scan(batch_size=1024):
                decoded = batch.decode(cells)
                if decoded:
                    rows[key.decode("utf-8")] = decoded
        except TableNotFound:
            pass
        out[table] = rows
    return out
