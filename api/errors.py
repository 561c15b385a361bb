"""Exception handlers: every failure becomes a short JSON answer, never a stack trace.

Layer: api. Imports FastAPI, ``caffeine.percolator``'s public errors and the shared
``caffeine.errors.CaffeineError`` leaf. ``install(app)`` registers them.

    caffeine.search.query.QueryError                     -> 400 {"detail": "<why the query cannot run>"}
    RequestValidationError (FastAPI)         -> 422 {"detail": [{"loc", "msg", "type"}, ...]}
    ClusterUnavailable (no connection yet)   -> 503 {"detail": ...}; /healthz: its report shape
    OracleUnavailable, LockWaitTimeout       -> 503 {"detail": ..., "error_id"}
    CaffeineError (storage: HBase down, ...) -> 503 {"detail": ..., "error_id"}
    anything else                            -> 500 {"detail": "internal error", "error_id"}

The cause of a 5xx is logged with its traceback under ``error_id``, which the client sees,
so an operator can find it; the client sees only the class of problem.
"""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from caffeine.errors import CaffeineError
from caffeine.percolator import LockWaitTimeout, OracleUnavailable
from caffeine.search import QueryError

from api.dependencies import ClusterUnavailable

log = logging.getLogger("api.errors")


def _logged(status: int, message: str, request: Request, exc: BaseException) -> JSONResponse:
    error_id = uuid.uuid4().hex[:12]
    log.error("%s %s failed (error_id %s)", request.method, request.url.path, error_id, exc_info=exc)
    return JSONResponse({"detail": message, "error_id": error_id}, status_code=status)


async def query_error(request: Request, exc: QueryError) -> JSONResponse:
    return JSONResponse({"detail": str(exc)}, status_code=400)


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    # FastAPI's default echoes the input and a documentation URL; keep what a client needs.
    errors = [
        {"loc": list(e.get("loc", ())), "msg": e.get("msg", "invalid"), "type": e.get("type", "value_error")}
        for e in exc.errors()
    ]
    return JSONResponse({"detail": errors}, status_code=422)


async def unavailable(request: Request, exc: Exception) -> JSONResponse:
    kind = "the timestamp oracle" if isinstance(exc, OracleUnavailable) else "the index store"
    return _logged(503, f"{kind} is unavailable or failing ({type(exc).__name__}); see /healthz", request, exc)


async def no_cluster(request: Request, exc: ClusterUnavailable) -> JSONResponse:
    log.warning("%s %s: %s", request.method, request.url.path, exc)
    if request.url.path == "/healthz":  # the health report's own shape: which part is down
        return JSONResponse({"ok": False, "checks": {
            "hbase": {"ok": False, "detail": str(exc), "ms": 0.0},
            "oracle": {"ok": False, "detail": "not checked: no connection to HBase yet", "ms": 0.0},
        }}, status_code=503)
    return JSONResponse({"detail": f"the index is unavailable: {exc}; see /healthz"}, status_code=503)


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    return _logged(500, "internal error", request, exc)


def install(app: FastAPI) -> None:
    app.add_exception_handler(QueryError, query_error)
    app.add_exception_handler(ClusterUnavailable, no_cluster)
    app.add_exception_handler(RequestValidationError, validation_error)
    for exc_class in (OracleUnavailable, LockWaitTimeout, CaffeineError):
        app.add_exception_handler(exc_class, unavailable)
    app.add_exception_handler(Exception, internal_error)
