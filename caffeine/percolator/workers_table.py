"""The ``workers`` table: observer workers' registrations and their failing cells.

Layer: percolator. Internal (storage I/O only). Two kinds of rows, one cell each:

- ``m/<worker id>``: a worker's heartbeat record (JSON: who it is, its metrics, ``beat_ms``;
  ``beat_ms`` 0 when it deregistered). ``Membership`` writes its own and reads the live ones
  to split the observed rows among the workers (``shard``).
- ``f/<table>\\0<row>\\0<column>``: the failure record of an observer cell still waiting for
  a successful retry (``caffeine status`` lists them); deleted once it succeeds.
"""

from __future__ import annotations

import json
import time

from caffeine.percolator.layout import ensure_system_table
from caffeine.storage import DeleteUpTo, Put, ReadSpec, Shard, Store

WORKERS_TABLE = "workers"
FAMILY = b"w"
_CELL_TS = 1
MEMBER_PREFIX = b"m/"
FAILURE_PREFIX = b"f/"


def ensure_workers_table(store: Store) -> None:
    ensure_system_table(store, WORKERS_TABLE, FAMILY)


class Membership:
    """This worker's registration and its view of the live workers (for splitting rows)."""

    def __init__(self, store: Store, worker_id: str, *, grace_ms: int, describe) -> None:
        self.store = store
        self.worker_id = worker_id
        self.grace_ms = grace_ms
        self._describe = describe
        self._live: list[str] = [worker_id]

    def beat(self, alive: bool = True) -> None:
        record = dict(self._describe(), beat_ms=int(time.time() * 1000) if alive else 0)
        self.store.mutate_row(WORKERS_TABLE, MEMBER_PREFIX + self.worker_id.encode(),
                              [Put(FAMILY, b"beat", _CELL_TS, json.dumps(record).encode())])
        self.refresh()

    def refresh(self) -> None:
        now = time.time() * 1000
        live = [r["worker"] for r in live_workers(self.store, now, self.grace_ms)]
        if self.worker_id not in live:
            live.append(self.worker_id)
        self._live = sorted(live)

    def shard(self) -> Shard | None:
        """This worker's shard of every table's rows (``storage.in_shard``) among the live
        workers; None while it is the only one (it owns every row)."""
        live = self._live
        return None if len(live) == 1 else (live.index(self.worker_id), len(live))


def live_workers(store: Store, now_ms: float, grace_ms: int) -> list[dict]:
    out = []
    for row in store.scan(WORKERS_TABLE, MEMBER_PREFIX, MEMBER_PREFIX[:-1] + b"0", ReadSpec(families=(FAMILY,))):
        cell = row.latest(FAMILY, b"beat")
        if cell is None:
            continue
        record = json.loads(cell.value)
        if now_ms - record.get("beat_ms", 0) < grace_ms:
            out.append(record)
    return out


def failure_key(table: str, row: bytes, column: str) -> bytes:
    return FAILURE_PREFIX + table.encode() + b"\x00" + row + b"\x00" + column.encode()


def record_failure(store: Store, table: str, row: bytes, column: str, record: dict) -> None:
    """Write (or replace) the failure record of one observer cell."""
    store.mutate_row(WORKERS_TABLE, failure_key(table, row, column),
                     [Put(FAMILY, b"failure", _CELL_TS, json.dumps(record).encode())])


def clear_failure(store: Store, table: str, row: bytes, column: str) -> None:
    """Delete the failure record of one observer cell (its retry succeeded)."""
    store.mutate_row(WORKERS_TABLE, failure_key(table, row, column), [DeleteUpTo(FAMILY, b"failure", _CELL_TS)])


def list_failures(store: Store) -> list[dict]:
    """Observer failures still waiting for a successful retry."""
    out = []
    for row in store.scan(WORKERS_TABLE, FAILURE_PREFIX, FAILURE_PREFIX[:-1] + b"0", ReadSpec(families=(FAMILY,))):
        cell = row.latest(FAMILY, b"failure")
        if cell is not None:
            out.append(json.loads(cell.value))
    return out


__all__ = [
    "WORKERS_TABLE", "Membership", "clear_failure", "ensure_workers_table", "failure_key", "list_failures",
    "live_workers", "record_failure",
]
