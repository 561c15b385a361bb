"""FastAPI dependencies: the cluster, the index reader and the settings a request uses.

Layer: api (imports ``caffeine.percolator.connect`` and ``caffeine.config``). Endpoints take
``IndexReader`` through ``Depends(get_index)``; nothing else reaches for globals.

- ``get_cluster`` returns the process's ``Cluster``, connected on first use (``connect()``
  with ``CAFFEINE_*`` settings). Tests replace it with
  ``app.dependency_overrides[get_cluster] = lambda: their_cluster``.
- ``get_index`` returns the ``IndexReader`` of whichever cluster ``get_cluster`` gave: one
  per cluster, created (first statistics scan, background refresh started) on first use and
  closed by the app's lifespan.
"""

from __future__ import annotations

import threading
from typing import Annotated

from fastapi import Depends, Request

from api.index import IndexReader
from api.settings import ApiSettings


class Connections:
    """The app's lazily opened cluster and its readers (lives in ``app.state.connections``)."""

    def __init__(self, settings: ApiSettings, connect=None) -> None:
        self.settings = settings
        self._connect = connect
        self._cluster = None
        self._readers: dict[int, tuple[object, IndexReader]] = {}
        self._lock = threading.Lock()

    def cluster(self):
        with self._lock:
            if self._cluster is None:
                if self._connect is None:
                    from caffeine.percolator import connect

                    self._connect = connect
                self._cluster = self._connect()
            return self._cluster

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
        for reader in readers:
            reader.close()
        if cluster is not None:
            cluster.close()


def get_settings(request: Request) -> ApiSettings:
    return request.app.state.settings


def get_cluster(request: Request):
    return request.app.state.connections.cluster()


def get_index(request: Request, cluster=Depends(get_cluster)) -> IndexReader:
    return request.app.state.connections.reader(cluster)


Index = Annotated[IndexReader, Depends(get_index)]
Settings = Annotated[ApiSettings, Depends(get_settings)]
