"""Where an ingest's record writes run: a bounded thread pool.

Layer: crawler. Imports the standard library only. ``crawler.ingest.Ingester`` takes the pool as a
factory, so the fault simulation can run an ingest's writes as threads of its own
(``caffeine.sim.workloads.ingest.SimWrites``, the same two methods).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

__all__ = ["ThreadWrites"]


class ThreadWrites:
    """Where an ingest's record writes run: a thread pool, with at most ``bound`` writes
    submitted and not yet finished (``submit`` waits for a slot). The fault simulation runs
    an ingest over a pool of its own with the same two methods (``submit``, ``close``)."""

    def __init__(self, workers: int, bound: int) -> None:
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="ingest")
        self._slots = threading.BoundedSemaphore(bound)

    def submit(self, fn, *args) -> Future:
        """Run ``fn(*args)`` on the pool once a slot is free; its future."""
        self._slots.acquire()
        future = self._pool.submit(fn, *args)
        future.add_done_callback(lambda _f: self._slots.release())
        return future

    def close(self) -> None:
        """Wait for every submitted write, then stop the threads."""
        self._pool.shutdown(wait=True)
