"""``GET /search``: ranked results for a query.

Layer: api router. Parameters are validated here (422 for out-of-range values), the query
text by ``api.query.parse_query`` (400 for a query with nothing to search).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from api.dependencies import Index
from api.models import Problem, SearchResponse
from api.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, parse_query

router = APIRouter(tags=["search"])

MAX_PAGE = 100
MAX_SIZE = 50
DEFAULT_SIZE = 10

RANKING_DOC = """\
**Ranking.** The query is tokenized like the documents (`caffeine.index.tokenize`: lowercased
`\\w+` words, no stemming, no stopwords); its distinct words are OR-ed: a document matches if
it contains at least one. Each match is scored with BM25 over the inverted index, summed over
the query words it contains, times a small boost for pages many others link to:

    score(d) = ( Σ_t∈q∩d  idf(t) · tf·(k1+1) / (tf + k1·(1 − b + b·len(d)/avg_len)) ) × (1 + 0.1·ln(1 + inlinks(d)))
    idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))          k1 = 1.2, b = 0.75

`N` and `avg_len` come from the `docstats` table (cached, refreshed every ~10 s), `df(t)` is the
number of live postings in the term's row, `inlinks` the number of distinct other pages linking
to `d`. Ties go to the smaller URL. Only the canonical page of each duplicate cluster is in the
index, so duplicates collapse to it; `cluster_size` tells how many pages share its content.
"""


@router.get(
    "/search",
    response_model=SearchResponse,
    responses={400: {"model": Problem, "description": "Nothing to search (no words, too many words)"},
               422: {"model": Problem, "description": "Missing, empty or over-long q; page or size out of range"}},
    description=RANKING_DOC,
    summary="Search the index",
)
def search(
    index: Index,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS,
                            description=f"Query text; at most {MAX_QUERY_TERMS} distinct words")],
    page: Annotated[int, Query(ge=1, le=MAX_PAGE, description="1-based results page")] = 1,
    size: Annotated[int, Query(ge=1, le=MAX_SIZE, description="Results per page")] = DEFAULT_SIZE,
):
    return index.search(parse_query(q), page, size)
