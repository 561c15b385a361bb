"""The search page (``/``) and its detail pages (``/page/document``, ``/page/dups/{hash}``).

Layer: api. Router (HTML; not part of the OpenAPI schema). It calls the same ``IndexReader``
methods as the JSON endpoints and renders with ``api.html``. Bad input is shown on the page
(with the JSON API's status code), never as a JSON error or a stack trace.
"""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from caffeine.search import QueryError, parse_query

from api import html
from api.dependencies import Index
from api.routers.dups import FINGERPRINT
from api.routers.search import DEFAULT_SIZE, MAX_PAGE, MAX_SIZE

router = APIRouter(include_in_schema=False)


def _int(value: str | None, default: int, low: int, high: int) -> int | None:
    if value is None or value == "":
        return default
    try:
        n = int(value)
    except ValueError:
        return None
    return n if low <= n <= high else None


@router.get("/", response_class=HTMLResponse)
def search_page(request: Request, index: Index):
    params = request.query_params
    q = params.get("q")
    documents = index.corpus.num_docs
    if q is None:
        return HTMLResponse(html.search_page("", None, None, documents))
    page = _int(params.get("page"), 1, 1, MAX_PAGE)
    size = _int(params.get("size"), DEFAULT_SIZE, 1, MAX_SIZE)
    if page is None or size is None:
        message = f"page must be a whole number from 1 to {MAX_PAGE}, size from 1 to {MAX_SIZE}"
        return HTMLResponse(html.search_page(q, None, message, documents), status_code=422)
    try:
        query = parse_query(q)
    except QueryError as exc:
        return HTMLResponse(html.search_page(q, None, str(exc), documents), status_code=400)
    return HTMLResponse(html.search_page(query.text, index.search(query, page, size), None, documents))


@router.get("/page/document", response_class=HTMLResponse)
def document_page(request: Request, index: Index):
    url = request.query_params.get("url") or ""
    if not url or len(url) > 4096:
        return HTMLResponse(html.error_page(422, "give the page's URL: /page/document?url=..."), status_code=422)
    doc = index.document(url)
    if doc is None:
        return HTMLResponse(html.error_page(404, f"No crawled page has the URL {url}."), status_code=404)
    return HTMLResponse(html.document_page(doc))


@router.get("/page/dups/{fingerprint}", response_class=HTMLResponse)
def cluster_page(fingerprint: str, index: Index):
    if not re.fullmatch(FINGERPRINT.strip("^$"), fingerprint):
        return HTMLResponse(html.error_page(422, "a fingerprint is 32 lowercase hex digits"), status_code=422)
    cluster = index.dup_cluster(fingerprint)
    if cluster is None:
        return HTMLResponse(html.error_page(404, f"No duplicate cluster has the fingerprint {fingerprint}."), status_code=404)
    return HTMLResponse(html.cluster_page(cluster))
