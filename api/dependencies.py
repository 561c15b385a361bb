"""FastAPI dependencies: the cluster, the index reader and the settings a request uses.

Layer: api. Imports ``caffeine.percolator.connect`` and ``caffeine.config``. Endpoints take
``IndexReader`` through ``Depends(get_index)``; nothing else reaches for globals.

- ``get_cluster`` returns the process's ``Cluster``, connected on first use (``connect()``
  with ``CAFFEINE_*`` settings), or raises ``ClusterUnavailable`` when it cannot within
  ``connect_wait_s`` (see ``Connections``). Tests replace it with
  ``app.dependency_overrides[get_cluster] = lambda: their_cluster``.
- ``get_index`` returns the ``IndexReader`` of whichever cluster ``get_cluster`` gave: one
  per cluster, created (first statistics scan, background refresh started) on first use and
  closed by the app's lifespan.
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor, TimeoutError as FutureTimeout
from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool

from caffeine.search import IndexReader, SearchSettings


class ClusterUnavailable(Exception):
    """No connection to HBase and the oracle yet (still trying, or the last attempt failed)."""


class Connections:
    """The app's lazily opened cluster and its readers (lives in ``app.state.connections``).

    Connecting can take a minute to fail (the storage layer retries for ``retry_deadline_s``),
    so it runs in a background thread, one attempt at a time; a request waits at most
    ``connect_wait_s`` for it and otherwise gets ``ClusterUnavailable`` (503, and /healthz
    says why). After a failed attempt the next request starts a new one.
    """

    def __init__(self, settings: SearchSettings, connect=None) -> None:
        self.settings = settings
        self._connect = connect
        self._cluster = None
        self._attempt: Future | None = None
        self._connector = ThreadPoolExecutor(1, thread_name_prefix="api-connect")
        self._readers: dict[int, tuple[object, IndexReader]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def cluster(self, wait_s: float | None = None):
        wait_s = self.settings.connect_wait_s if wait_s is None else wait_s
        with self._lock:
            if self._cluster is not None:
                return self._cluster
            if self._attempt is None:
                self._attempt = self._connector.submit(self._connect_once)
            attempt = self._attempt
        try:
            return attempt.result(timeout=wait_s)
        except FutureTimeout:
            raise ClusterUnavailable(f"still connecting to HBase and the oracle after {wait_s:g}s") from None
        except Exception as exc:  # noqa: BLE001 - the reason goes to /healthz and the log
            text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            raise ClusterUnavailable(f"cannot connect: {type(exc).__name__}: {text}".rstrip(": ")) from exc

    def connected(self):
        """The cluster if it is connected already, else None; never blocks."""
        return self._cluster

    def _connect_once(self):
        connect = self._connect
        if connect is None:
            from caffeine.percolator import connect
        try:
            cluster = connect()
        except BaseException:
            with self._lock:
                self._attempt = None  # the next request tries again
            raise
        with self._lock:
            if not self._closed:
                self._cluster = cluster
                return cluster
        cluster.close()  # the app shut down while this attempt was under way
        raise ClusterUnavailable("the service is shutting down")

    def ready_reader(self, cluster) -> IndexReader | None:
        """The cluster's reader if it has been started already, else None; never blocks
        (a dict read, atomic under the GIL; ``reader`` writes it only once started)."""
        entry = self._readers.get(id(cluster))
        return entry[1] if entry is not None and entry[0] is cluster else None

    def reader(self, cluster) -> IndexReader:
        with self._lock:
            entry = self._readers.get(id(cluster))
            if entry is not None and entry[0] is cluster:
                return entry[1]
            # Started under the lock: a concurrent first request must not see a reader whose
            # first statistics scan has not finished (it would rank with N = 0).
            reader = IndexReader(cluster, self.settings).start()
            self._readers[id(cluster)] = (cluster, reader)
            return reader

    def close(self) -> None:
        with self._lock:
            readers = [r for _, r in self._readers.values()]
            self._readers.clear()
            cluster, self._cluster = self._cluster, None
            self._attempt = None
            self._closed = True
        self._connector.shutdown(wait=False, cancel_futures=True)
        for reader in readers:
            reader.close()
        if cluster is not None:
            cluster.close()


def get_settings(request: Request) -> SearchSettings:
    return request.app.state.settings


# Both are async so that, once connected, a request resolves them on the event loop: a sync
# dependency costs a hop through the thread pool each, as much CPU as a cached search. Only
# the first requests, which may wait to connect or for the first statistics scan, are sent to
# the pool.
async def get_cluster(request: Request):
    connections = request.app.state.connections
    cluster = connections.connected()
    return cluster if cluster is not None else await run_in_threadpool(connections.cluster)


async def get_index(request: Request, cluster=Depends(get_cluster)) -> IndexReader:
    connections = request.app.state.connections
    reader = connections.ready_reader(cluster)
    return reader if reader is not None else await run_in_threadpool(connections.reader, cluster)


Index = Annotated[IndexReader, Depends(get_index)]
Settings = Annotated[SearchSettings, Depends(get_settings)]
