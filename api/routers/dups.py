"""``GET /dups/{hash}`` and ``GET /dups?url=``: a duplicate cluster.

Layer: api. Router.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from api.dependencies import Index
from api.models import ClusterResponse, Problem
from api.routers.documents import MAX_URL_CHARS

router = APIRouter(tags=["duplicates"])

FINGERPRINT = r"^[0-9a-f]{32}$"

CLUSTER_DOC = """Pages with the same content (same fingerprint of their normalized text), the
canonical elected among them (most inlinks, then shortest URL, then smallest), and each
member's inlink count. Only the canonical is in the search index."""


@router.get(
    "/dups/{fingerprint}",
    response_model=ClusterResponse,
    responses={404: {"model": Problem, "description": "No cluster has this fingerprint"}},
    summary="A duplicate cluster by content hash",
    description=CLUSTER_DOC,
)
def cluster(index: Index, fingerprint: Annotated[str, Path(pattern=FINGERPRINT, description="32 lowercase hex digits")]):
    found = index.dup_cluster(fingerprint)
    if found is None:
        raise HTTPException(404, f"no duplicate cluster has the fingerprint {fingerprint}")
    return found


@router.get(
    "/dups",
    response_model=ClusterResponse,
    responses={404: {"model": Problem, "description": "Unknown URL, or the page is no document"}},
    summary="The duplicate cluster of a page",
    description=CLUSTER_DOC,
)
def cluster_of(index: Index, url: Annotated[str, Query(min_length=1, max_length=MAX_URL_CHARS)]):
    found = index.dup_cluster_of(url)
    if found is None:
        raise HTTPException(404, f"no document with the URL {url!r} (not crawled, or not an HTML page)")
    return found
