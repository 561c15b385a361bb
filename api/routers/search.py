"""``GET /search``: ranked results for a query.

Layer: api. Router. Parameters are validated here (422 for out-of-range values), the query
text by ``caffeine.search.query.parse_query`` (400 for a query with nothing to search). The answer is
``SearchResponse`` (declared as the response model, which the OpenAPI schema shows), sent
without validating it again.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from caffeine.index.scoring import SIMILARITY
from caffeine.search import MAX_QUERY_CHARS, MAX_QUERY_TERMS, parse_query

from api.dependencies import Index
from api.formats import JSONBytes
from api.models import Problem, SearchResponse

router = APIRouter(tags=["search"])

MAX_PAGE = 100
MAX_SIZE = 50
DEFAULT_SIZE = 10

RANKING_DOC = """\
**Query language.** Words are tokenized like the documents (`caffeine.index.tokenize`:
lowercased `\\w+` words, no stemming, no stopwords). Every word must be in a result (in its
title, text, the anchor text of links to it, or its URL); `"two words"` must be consecutive
in the text; `-word` leaves out pages containing the word; `site:host` keeps one host (and its
subdomains); in a qualified name (`TypeId::fmt`, `ArrayList.add`) the innermost qualifier's
words weigh γ times (`m(t)` below). When fewer pages contain every word than the page asks for, pages with some of
the words follow (`all_terms: false`). A malformed query (unbalanced quote, empty phrase,
`site:` without a host, only exclusions, more than 16 words) is a 400 saying what to fix.

**Ranking** (docs/RANKING.md): BM25F over four fields, times a capped link prior, plus a
proximity bonus for pages where the query's words are near each other:

{formula}; `v` = the
distinct (linking site, anchor text) pairs of links to `d`, so navigation links every page of
a site carries count once; `δ` = the smallest distance between two different query words in
the text. Ties go to the smaller URL. Only the canonical page of each duplicate cluster (exact
and near duplicates: the same title and at least 80% of the main text's word triples) is in the
index, so copies collapse to it; `cluster_size` tells how many pages the cluster holds, listed
at `/dups/{{fingerprint}}` ("N similar pages").
""".format(formula=SIMILARITY.describe())


@router.get(
    "/search",
    response_model=SearchResponse,
    responses={400: {"model": Problem, "description": "Malformed query (unbalanced quote, empty phrase, bad site:, "
                                                      "only exclusions, too many words); the detail says what to fix"},
               422: {"model": Problem, "description": "Missing, empty or over-long q; page or size out of range"}},
    description=RANKING_DOC,
    summary="Search the index",
)
async def search(
    index: Index,
    q: Annotated[str, Query(min_length=1, max_length=MAX_QUERY_CHARS,
                            description=f'Query: words (all required), "phrases", -exclusions, site:host; '
                                        f"at most {MAX_QUERY_TERMS} distinct words")],
    page: Annotated[int, Query(ge=1, le=MAX_PAGE, description="1-based results page")] = 1,
    size: Annotated[int, Query(ge=1, le=MAX_SIZE, description="Results per page")] = DEFAULT_SIZE,
):
    query = parse_query(q)
    # A query whose answer is in memory is answered here, on the event loop: a hop through the
    # thread pool costs more than the answer. Any other may read HBase or rank for a while,
    # and goes to the pool, where it holds up no other request while it waits.
    answer = index.search(query, page, size, at_hand_only=True)
    if answer is None:
        answer = await run_in_threadpool(index.search, query, page, size)
    # Serialized as is: the answer has SearchResponse's shape by construction (the schema
    # tests check generated requests' answers against it), and validating it again cost
    # more than ranking.
    return JSONBytes(answer)
