"""The FastAPI application: routers, error handlers, and the connections' lifespan.

Layer: api. Top of the service. ``create_app()`` builds a fresh app, so tests and
``caffeine serve`` (``uvicorn api.main:create_app --factory``) each get their own.

Lifespan: on startup, unless a test replaced ``get_cluster``, the cluster is connected and
the index reader's first statistics scan runs, so the first query is not the one paying for
it. If HBase does not answer within ``connect_wait_s`` the service starts anyway: the
connection keeps being attempted in the background, requests get 503 until it is made, and
``/healthz`` says what is missing. On shutdown the readers' background threads
stop and the cluster is closed.
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from caffeine.search import SearchSettings, fewer_full_collections, freeze_what_startup_made, load_search_settings

from api import errors, metrics
from api.dependencies import Connections, get_cluster
from api.routers import documents, dups, pages, search, status
from api.routers.search import RANKING_DOC

log = logging.getLogger(__name__)

DESCRIPTION = """\
Read-only search over Caffeine's incrementally maintained index (docs/INDEXING.md).
The search page is at [/](/).

""" + RANKING_DOC + """
Errors: 400 for a query with nothing to search, 422 for invalid parameters (empty or
over-long `q`, `page` outside 1..100, `size` outside 1..50, a malformed fingerprint),
404 for an unknown URL or cluster, 503 when HBase or the oracle is unavailable. Error
bodies are `{"detail": ...}`; no endpoint writes to the index.
"""


def create_app(settings: SearchSettings | None = None, connect=None) -> FastAPI:
    """A new app. ``connect``: how to build the cluster (default ``caffeine.percolator.connect``)."""
    settings = settings or load_search_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        fewer_full_collections()
        connections = app.state.connections
        if get_cluster not in app.dependency_overrides:
            try:
                await run_in_threadpool(lambda: connections.reader(connections.cluster()))
            except Exception as exc:  # noqa: BLE001 - serve anyway; /healthz reports it
                log.warning("not connected at startup (requests retry; /healthz tells): %s", exc)
            # Only a service that connects itself: tests build many apps in one process.
            freeze_what_startup_made()
        try:
            yield
        finally:
            await run_in_threadpool(connections.close)

    app = FastAPI(
        title="Caffeine search",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.connections = Connections(settings, connect)
    errors.install(app)
    metrics.install(app)
    for router in (search.router, documents.router, dups.router, status.router, pages.router):
        app.include_router(router)
    return app
