"""``GET /stats`` and ``GET /healthz``.

Layer: api. Router.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from api.dependencies import Index
from api.models import HealthResponse, StatsResponse

router = APIRouter(tags=["status"])


@router.get("/stats", response_model=StatsResponse, summary="Index statistics and freshness")
def stats(index: Index):
    """Indexed documents and their average length (from the cached `docstats` scan), duplicate
    clusters and distinct terms (full scans of `dups` and `postings`, recomputed in the
    background at most every few minutes; `null` until the first one finished), freshness
    (when the newest indexed document was exported, i.e. the physical part of the highest
    `docstats s:done` sequence), and the observer notifications still pending."""
    return index.stats()


@router.get(
    "/healthz",
    response_model=HealthResponse,
    responses={503: {"model": HealthResponse, "description": "HBase or the oracle does not answer"}},
    summary="Are HBase and the timestamp oracle reachable?",
)
def healthz(index: Index):
    """200 when a read of the index tables and the oracle's status call both answered within
    the probe timeout; 503 with the failing check's reason otherwise."""
    report = index.health()
    return JSONResponse(report, status_code=200 if report["ok"] else 503)
