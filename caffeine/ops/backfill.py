"""``caffeine notify``: run a column's observers again over rows that already have it.

Layer: tools. Imports ``caffeine.percolator``'s public names only.

After a change to an observer (a new parser, a fixed bug) the rows it ran over keep what the
old code wrote; a backfill makes the workers run the observer chain over them again. It walks
every row of ``table`` that has ``column`` in the backfill's snapshot (or the rows of a range
or prefix), in batches, one transaction per batch.

Why a notification alone is not enough: a strong observer runs only for a change newer than
its ack (the commit_ts of the change it last ran for), so a bare notification on a change it
acknowledged is dropped as stale. Each batch therefore deletes the ack of every strong
observer of the column and sets the column's notification in the same transaction: a worker
then finds no ack and runs the observer once for the column's current value, which also
writes the ack again. The ack is a transactional column, so a batch and an observer run that
commits meanwhile conflict, and the loser runs again (the batch on a fresh snapshot). The
ack is deleted even where there is none: a run still in flight from before the batch (after
an earlier backfill deleted the ack, with the observer's previous code) must conflict with it
too, or it commits its output and acks the change after the batch, and the re-run never
happens. Weak observers have no ack; the notification is all they need.

Resume: after each committed batch the last row done is saved in a checkpoint file; a run
with the same table, column, range and table prefix continues after it. Notifying a row twice
is harmless (it makes one more run of its observers), so a batch that committed just before a
crash and is done again costs work, not correctness.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from caffeine.ops.rows import RowRange, show_key
from caffeine.percolator import Cluster, Observer, Transaction

DEFAULT_BATCH = 100


@dataclass
class Progress:
    """How far a backfill got: rows notified, acks deleted, the last row done."""

    rows: int = 0
    batches: int = 0
    acks_cleared: int = 0
    last_row: bytes | None = None
    elapsed_s: float = 0.0

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.elapsed_s if self.elapsed_s > 0 else 0.0


class Checkpoint:
    """A JSON file holding the last row a backfill finished; written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def for_backfill(cls, directory: Path, table_prefix: str, table: str, column: str, rows: RowRange) -> "Checkpoint":
        """The checkpoint of one backfill, named after everything that identifies it."""
        identity = json.dumps([table_prefix, table, column, rows.start.hex(), None if rows.stop is None else rows.stop.hex()])
        digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
        safe = "".join(ch if ch.isalnum() else "_" for ch in f"{table}-{column}")[:60]
        return cls(Path(directory) / f"notify-{safe}-{digest}.json")

    def load(self) -> tuple[bytes, int] | None:
        """(last row done, rows done so far), or None when there is no checkpoint."""
        try:
            record = json.loads(self.path.read_text())
        except FileNotFoundError:
            return None
        return bytes.fromhex(record["last_row"]), int(record["rows"])

    def save(self, last_row: bytes, rows: int) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"last_row": last_row.hex(), "last_row_text": show_key(last_row), "rows": rows}))
        os.replace(tmp, self.path)

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)


def backfill(
    cluster: Cluster,
    observers: Iterable[Observer],
    table: str,
    column: str,
    rows: RowRange = RowRange(),
    *,
    batch_size: int = DEFAULT_BATCH,
    checkpoint: Checkpoint | None = None,
    on_batch: Callable[[Progress], None] | None = None,
) -> Progress:
    """Notify ``column`` on every row of ``rows`` that has it, clearing the acks of the
    strong ones among ``observers`` (the column's observers) so that they run again.

    Resumes after the checkpoint's row when there is one, saves it after every committed
    batch and removes it when the whole range is done. Returns the progress of this run
    (``rows`` counts the rows done before a resume too)."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    ack_columns = sorted({o.ack_column for o in observers if o.notification == "strong"})
    progress = Progress()
    remaining = rows
    if checkpoint is not None and (saved := checkpoint.load()) is not None:
        progress.last_row, progress.rows = saved
        remaining = rows.after(saved[0])
    started = time.monotonic()
    while True:
        keys, cleared = cluster.run(lambda txn: _notify_batch(txn, table, column, remaining, ack_columns, batch_size))
        if not keys:
            break
        progress.rows += len(keys)
        progress.batches += 1
        progress.acks_cleared += cleared
        progress.last_row = keys[-1]
        progress.elapsed_s = time.monotonic() - started
        if checkpoint is not None:
            checkpoint.save(keys[-1], progress.rows)
        if on_batch is not None:
            on_batch(progress)
        if len(keys) < batch_size:
            break
        remaining = remaining.after(keys[-1])
    progress.elapsed_s = time.monotonic() - started
    if checkpoint is not None:
        checkpoint.clear()
    return progress


def _notify_batch(txn: Transaction, table: str, column: str, rows: RowRange,
                  ack_columns: list[str], batch_size: int) -> tuple[list[bytes], int]:
    """One batch in one transaction: the next ``batch_size`` rows having the column."""
    scan = txn.scan(table, rows.start, rows.stop, [column], batch_size=batch_size)
    try:
        keys = [key for key, _ in itertools.islice(scan, batch_size)]
    finally:
        scan.close()
    cleared = 0
    if keys and ack_columns:
        acks = txn.get_rows(table, keys, ack_columns)
        for key in keys:
            for ack in ack_columns:
                cleared += acks[key][ack] is not None
                # Deleted even when absent: the write makes a run still in flight (started
                # before this batch, perhaps with the observer's previous code, after an
                # earlier backfill deleted the ack) conflict with this batch, so it cannot
                # commit its output and ack the change after the batch.
                txn.delete(table, key, ack)
    for key in keys:
        txn.notify(table, key, column)
    return keys, cleared
