"""Handled notifications, deleted in batches: one round trip per table for many cells.

Layer: percolator. Internal (used by ``Worker``).

Once a cell's observers have run, the worker deletes its notify versions up to the one it saw
(a newer one survives). When the run's commit could not do it (a weak observer, work left for
after the commit, a stale notification) that was one ``mutate_row`` per cell. No row
transaction decides anything on notify cells, so these deletes can go in a batch delete that
leaves row guards alone (``Store.delete_rows``): the clearer collects them for up to
``max_delay_s`` and sends each table's in one call.

Contract: ``clear(table, row, delete, done)`` returns at once; ``done(ok)`` is called once
the delete was sent (``ok``) or failed (not ok: the notification stays, and a later pass
finds it and runs the observers again, which is always safe). The worker keeps the cell in
flight until ``done``, so no pass submits it again meanwhile. ``close()`` sends what is
left.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from caffeine.storage import DeleteUpTo, Store

log = logging.getLogger(__name__)


class NotificationClearer:
    def __init__(self, store: Store, *, max_delay_s: float = 0.05, max_batch: int = 512) -> None:
        self.store = store
        self.max_delay_s = max_delay_s
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._pending: dict[str, dict[bytes, list[DeleteUpTo]]] = {}
        self._done: dict[str, list[Callable[[bool], None]]] = {}
        self._wake = threading.Event()
        self._full = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._loop, name="caffeine-notify-clearer", daemon=True)
        self._thread.start()

    def clear(self, table: str, row: bytes, delete: DeleteUpTo, done: Callable[[bool], None]) -> None:
        with self._lock:
            if self._closing:
                raise RuntimeError("notification clearer is closed")
            self._pending.setdefault(table, {}).setdefault(row, []).append(delete)
            self._done.setdefault(table, []).append(done)
            if sum(map(len, self._done.values())) >= self.max_batch:  # a table or two
                self._full.set()
        self._wake.set()

    def close(self) -> None:
        with self._lock:
            self._closing = True
        self._wake.set()
        self._full.set()
        self._thread.join(timeout=30)
        self.flush()  # anything queued while the thread was stopping

    def flush(self) -> None:
        """Send everything queued now, one ``delete_rows`` per table."""
        with self._lock:
            pending, self._pending = self._pending, {}
            done, self._done = self._done, {}
            self._full.clear()
        for table, rows in pending.items():
            try:
                self.store.delete_rows(table, rows)
                ok = True
            except Exception as exc:  # the notifications stay; later passes handle them again
                ok = False
                log.warning("could not delete %d handled notification(s) in %s: %s", len(rows), table, exc)
            for callback in done[table]:
                callback(ok)

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            with self._lock:
                self._wake.clear()
                closing = self._closing
            if closing:
                return
            # Gather for a while: the batch is the point. A full batch goes at once.
            self._full.wait(self.max_delay_s)
            self.flush()
