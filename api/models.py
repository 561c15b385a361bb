"""Response models: the JSON shapes of the API, as the OpenAPI schema at ``/docs`` shows them.

Layer: api. Imports pydantic only. ``caffeine.search.reader`` returns plain dicts of these shapes; the
routers declare these models as their ``response_model`` so the schema is exact and any
drift between the two fails a test instead of reaching a client.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class Problem(BaseModel):
    """Every error response: a status-specific message, never a stack trace."""

    detail: str | list = Field(description="What was wrong; for 422, the list of invalid fields")
    error_id: str | None = Field(None, description="For 5xx: the id under which the server logged the cause")


class SearchHit(BaseModel):
    rank: int = Field(description="1-based position in the whole result list")
    url: str
    title: str
    snippet: str = Field(description="HTML: the document's text, escaped, query terms in <mark>")
    score: float = Field(description="BM25F sum over the matched terms x link prior, + proximity bonus (see /docs intro)")
    all_terms: bool = Field(description="Contains every query term; false for the ranked fallback after them")
    matched_terms: list[str]
    inlinks: int = Field(description="Distinct pages linking here (docstats s:inlinks)")
    fingerprint: str | None = Field(description="Content hash; names the duplicate cluster")
    cluster_size: int = Field(description=(
        "Pages with this content or nearly this content (its duplicate cluster, the canonical included); "
        "1 = unique. The others are not shown: 'N similar pages', listed at /dups/{fingerprint}"))
    document_url: str = Field(description="API path of this document's details")
    cluster_url: str | None = Field(description="API path of this document's duplicate cluster")


class SearchResponse(BaseModel):
    query: str
    terms: list[str] = Field(description="Index terms the query was parsed into (all required; phrases' words included)")
    phrases: list[list[str]] = Field(description='Quoted phrases ("..."), as their terms')
    excluded: list[str] = Field(description="Terms results must not contain (-term)")
    sites: list[str] = Field(description="Hosts results must be on (site:host)")
    qualifiers: list[str] = Field(description="Terms of a qualified name's innermost qualifier (Type of Type::member), "
                                              "which weigh more in the ranking (docs/RANKING.md, \"Qualified names\")")
    doc_freq: dict[str, int] = Field(description="Documents containing each term (excluded terms included)")
    total: int = Field(description="Documents matching: those with every term, then (ranked fallback) those with some")
    all_terms_total: int = Field(description="Documents containing every term (and phrase; no excluded term; on site)")
    total_exact: bool = Field(description="False when the totals are estimated: a phrase query whose words are on "
                                          "more than 500 pages (from a sample of them), or a query answered from the "
                                          "first postings of a term's impact-ordered row (its first query, "
                                          "docs/RANKING.md); the results themselves are exact either way")
    page: int
    size: int
    results: list[SearchHit]
    took_ms: float = Field(description="Time spent answering, server side")
    documents: int = Field(description="N: indexed documents in the cached statistics")
    stats_age_s: float | None = Field(description="Age of the cached corpus statistics")


class Inlink(BaseModel):
    source: str
    anchor: str


class Outlink(BaseModel):
    target: str
    anchor: str


class Member(BaseModel):
    url: str
    inlinks: int
    exact: bool = Field(True, description="The same content (an exact duplicate); false: a near-duplicate")


class DocumentResponse(BaseModel):
    url: str
    title: str | None
    fetched_at: float | None = Field(description="Unix seconds of the last fetch (page:meta)")
    fetched_at_iso: str | None
    status: int | None = Field(description="HTTP status of the last fetch")
    content_type: str | None
    fetch_error: str | None
    final_url: str | None
    bytes: int | None
    truncated: bool | None
    content_hash: str | None = Field(description="doc:fingerprint; null if the page is no document (404, not HTML)")
    length: int | None = Field(description="Tokens in the document")
    excerpt: str | None = Field(description="HTML-escaped beginning of the text")
    declared_canonical: str | None = Field(description='The page\'s own <link rel="canonical">, if any')
    robots: list[str] = Field(default_factory=list, description=(
        "What the page asks of this crawler, from its robots meta tags and X-Robots-Tag headers: noindex (not a "
        "document of the index), nofollow (its links are not followed and do not count), nosnippet, noarchive"))
    refresh_to: str | None = Field(None, description="The target of the page's meta refresh, if any")
    redirect_stub: bool = Field(False, description="An instant meta refresh: a redirect, not a document of its own")
    indexed: bool = Field(description="In the inverted index (the canonical of its cluster)")
    canonical_url: str | None = Field(description="The elected canonical of its duplicate cluster")
    is_canonical: bool
    inlink_count: int
    cluster_size: int
    duplicates: list[Member] = Field(description="Other members of its cluster: exact duplicates first, then near-duplicates")
    inlinks_total: int
    inlinks: list[Inlink] = Field(description="Pages linking here, with their anchor text (bounded)")
    outlinks_total: int
    outlinks: list[Outlink] = Field(description="Links on the page (bounded)")
    cluster_url: str | None


class ClusterMember(BaseModel):
    url: str
    inlinks: int
    canonical: bool
    declares: str | None = Field(None, description='The canonical the page declares (<link rel="canonical">), if any')
    fingerprint: str = Field(description="Its content fingerprint (its exact cluster)")
    document_url: str


class NearEdge(BaseModel):
    fingerprint: str
    similarity: float = Field(description="Jaccard similarity of the two contents' main-text word triples")


class ClusterContent(BaseModel):
    fingerprint: str
    size: int = Field(description="Pages with exactly this content")
    cluster_url: str
    near: list[NearEdge] = Field(description="The contents it is a near-duplicate of")


class ClusterResponse(BaseModel):
    fingerprint: str
    canonical_url: str | None
    size: int = Field(description="Pages in the cluster: exact and near duplicates")
    members: list[ClusterMember] = Field(description="The canonical first, then most inlinks first, bounded")
    contents: list[ClusterContent] = Field(description=(
        "The exact clusters (contents) joined into this one by near-duplicate links, the one asked for first"))


class Freshness(BaseModel):
    newest_export_at: str | None = Field(description="When the newest indexed document was exported")
    age_s: float | None


class PendingNotifications(BaseModel):
    count: int
    oldest_age_s: float | None


class StatisticsInfo(BaseModel):
    refreshed_at: str | None
    age_s: float | None
    scan_s: float
    error: str | None
    slow_computed_at: str | None
    slow_scan_s: float | None
    slow_running: bool
    slow_error: str | None


class SearchCacheInfo(BaseModel):
    terms: int = Field(description="Terms whose posting lists this process holds in memory")
    postings: int = Field(description="Postings held (each about 250 bytes with its scores)")
    hits: int = Field(description="Term lookups answered from memory (less than postings_refresh_s old)")
    change_reads: int = Field(description="Term lookups that read only the cells changed since the last read")
    whole_reads: int = Field(description="Term lookups that read the whole postings row")
    ahead_reads: int = Field(description="Terms in use brought up to date by the background refresh, ahead of "
                                         "their queries (changed cells, or the whole row when due)")
    evictions: int = Field(description="Terms dropped to stay within postings_cache_max")
    ranked_held: int = Field(description="Queries whose ranked answers are kept (caffeine/search/ranking_cache.py)")
    ranked_hits: int = Field(description="Queries answered with a kept ranked answer: their posting lists and the "
                                         "statistics were those it was ranked from")
    ranked_misses: int = Field(description="Queries ranked afresh over posting lists held in memory")
    cold_answered: int = Field(description="Queries with a term not in memory answered from the first postings of "
                                           "its impact-ordered row (docs/RANKING.md, Cold queries)")
    cold_given_up: int = Field(description="Such queries whose answer could not be proved that way: their posting "
                                           "lists were read whole")
    cold_deeper: int = Field(description="Deeper head reads: each time a cold query's heads could not prove the "
                                         "answer and heads four times as deep were read (a query may count "
                                         "several times)")
    cold_intersected: int = Field(description="Cold queries of several words answered from every document holding "
                                              "them all, read as the intersection of their posting rows inside HBase "
                                              "(counted among cold_answered)")


class StatsResponse(BaseModel):
    documents: int = Field(description="Indexed documents (canonicals)")
    average_length: float
    clusters: int | None = Field(description="Duplicate clusters (dups rows with members); null until computed")
    clustered_pages: int | None = Field(description="Pages in some cluster (documents + their duplicates)")
    terms: int | None = Field(description="Distinct terms with live postings; null until computed")
    freshness: Freshness
    pending_notifications: PendingNotifications
    statistics: StatisticsInfo
    search_cache: SearchCacheInfo = Field(description="This process's in-memory posting lists (caffeine/search/postings_cache.py)")


class Check(BaseModel):
    ok: bool
    detail: str
    ms: float


class HealthResponse(BaseModel):
    ok: bool
    checks: dict[str, Check]
