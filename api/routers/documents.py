"""``GET /documents?url=``: everything stored about one page.

Layer: api. Router.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from api.dependencies import Index
from api.models import DocumentResponse, Problem

router = APIRouter(tags=["documents"])

MAX_URL_CHARS = 4096


@router.get(
    "/documents",
    response_model=DocumentResponse,
    responses={404: {"model": Problem, "description": "No page with this URL was crawled"}},
    summary="A stored document",
)
def document(index: Index, url: Annotated[str, Query(min_length=1, max_length=MAX_URL_CHARS, description="The page's URL (normalized before the lookup)")]):
    """The page as crawled and indexed: title, fetch time and status (`page:meta`), content
    hash (`doc:fingerprint`), the canonical URL of its duplicate cluster and the other
    members, the pages linking to it with their anchor text (`inlinks`), and its own links
    (`doc:outlinks`). Lists are bounded; the `*_total` fields give the full counts. All of it
    is read in one snapshot, so it is mutually consistent."""
    found = index.document(url)
    if found is None:
        raise HTTPException(404, f"no crawled page has the URL {url!r}")
    return found
