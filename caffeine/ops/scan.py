"""``caffeine scan``: the committed values of a table at one snapshot, or its protocol cells.

Layer: tools. Committed values come through ``caffeine.percolator``'s public transaction API
(``Transaction.scan``: locks met are resolved as any read resolves them, so what is shown is
exactly what a transaction at that snapshot reads). ``raw_rows`` reads the protocol's cells as
they are, locks and rolled-back data included, and shows them with
``caffeine.percolator.inspect`` (what ``caffeine inspect`` shows for one row): the one
place this layer reads protocol internals, since showing them is the point.

Formats: text for people (values cut to a width), JSON Lines for machines (one object per
row, complete values; text when a key or value is UTF-8, else ``{"hex": ...}``).
"""

from __future__ import annotations

import json
from typing import Iterator

from caffeine.ops.rows import RowRange, show_key
from caffeine.percolator import Cluster
from caffeine.percolator import inspect as protocol_cells
from caffeine.percolator.records import CellRef
from caffeine.storage import ReadSpec, Row

RAW_VERSIONS = 1000
FAMILY_NAMES = dict(zip(protocol_cells.FAMILIES, protocol_cells.HEADERS))


def committed_rows(cluster: Cluster, table: str, rows: RowRange, columns: list[str] | None,
                   *, snapshot_ts: int | None = None, limit: int | None = None
                   ) -> tuple[int, Iterator[tuple[bytes, dict[str, bytes]]]]:
    """(the snapshot's timestamp, its rows in key order): every present column, or only
    ``columns``; at ``snapshot_ts`` (a timestamp the oracle issued) or at a fresh one."""
    txn = cluster.snapshot(snapshot_ts)  # a fresh timestamp when None

    def generate():
        try:
            scan = txn.scan(table, rows.start, rows.stop, columns)
            for n, item in enumerate(scan):
                if limit is not None and n >= limit:
                    scan.close()
                    break
                yield item
        finally:
            txn.close()

    return txn.start_ts, generate()


def raw_rows(cluster: Cluster, table: str, rows: RowRange, *, limit: int | None = None) -> Iterator[Row]:
    """Every protocol cell (data, lock, write, notify, ack; up to RAW_VERSIONS versions of
    each) of the rows in the range, read as they are: nothing is resolved."""
    spec = ReadSpec(families=protocol_cells.FAMILIES, versions=RAW_VERSIONS)
    return cluster.store.scan(table, rows.start, rows.stop, spec, limit=limit)


def _text(value: bytes, width: int | None) -> str:
    try:
        text = value.decode("utf-8").replace("\n", "\\n").replace("\t", "\\t")
    except UnicodeDecodeError:
        text = None
    if text is None or not text.isprintable():
        text = repr(value)
    if width is not None and len(text) > width:
        text = text[: max(1, width - 1)] + "…"
    return text


def _json_bytes(value: bytes):
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return {"hex": value.hex()}


def format_row(key: bytes, values: dict[str, bytes], width: int | None = 120) -> str:
    """A row for people: its key, then one ``column = value`` line per column."""
    lines = [show_key(key)]
    lines += [f"  {column} = {_text(value, width)}" for column, value in values.items()]
    return "\n".join(lines)


def row_json(key: bytes, values: dict[str, bytes], snapshot_ts: int) -> str:
    return json.dumps({"row": _json_bytes(key), "snapshot_ts": snapshot_ts,
                       "columns": {c: _json_bytes(v) for c, v in values.items()}}, ensure_ascii=False)


def format_raw_row(table: str, row: Row) -> str:
    return protocol_cells.render(table, row.key, row)


def raw_row_json(table: str, row: Row) -> str:
    """A row's protocol cells, each with its family, column, timestamp, the value as read
    and what it means (``describe``: the lock's primary, the write's start_ts, ...)."""
    cells = []
    for cell in row:
        family = FAMILY_NAMES.get(cell.family, cell.family.decode(errors="replace"))
        column = cell.qualifier.decode("utf-8", errors="surrogateescape")
        ref = CellRef(table, row.key, column)
        cells.append({"family": family, "column": _json_bytes(cell.qualifier), "ts": cell.ts,
                      "value": _json_bytes(cell.value),
                      "meaning": protocol_cells.describe(cell.family, cell.ts, cell.value, ref)})
    return json.dumps({"row": _json_bytes(row.key), "cells": cells}, ensure_ascii=False)
