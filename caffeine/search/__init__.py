"""The search engine: queries, matching, ranking, cold reads and their proofs, and the caches,
behind one reader facade. It knows nothing of HTTP; the web app (``api``) serves it.

Layer: search. ``caffeine.percolator``'s public names, ``caffeine.index``; no application.

    parse_query(text) -> ParsedQuery            query.py       the query language (QueryError)
    IndexReader(cluster, settings).start()      reader.py      the facade: search, rank, documents,
                                                               clusters, stats, health
    SearchSettings, load_search_settings        settings.py    the engine's knobs (CAFFEINE_API_*)
    apply_service_policy()                      gc_policy.py   the service's garbage-collector policy

Inside, by job: ``searcher`` (ranked results from posting lists in memory, ``postings_cache``,
``term_lists``, ``ranking_cache``), ``matching`` (which documents a query accepts, in what
order), ``ranking`` (scores from ``caffeine.index.scoring.SIMILARITY``), ``cold``,
``cold_proof`` and ``cold_reads`` (a term's first query, from its impact-ordered head),
``statistics`` (the corpus statistics ranking needs), ``details`` and ``snippets`` (what a
result shows), ``views`` (documents and duplicate clusters), ``report`` and ``health`` (the
service's status and probes), ``links`` (how answers spell times and links), ``ttl_cache``.
"""

from caffeine.search.gc_policy import apply_service_policy, fewer_full_collections, freeze_what_startup_made
from caffeine.search.query import MAX_QUERY_CHARS, MAX_QUERY_TERMS, ParsedQuery, QueryError, parse_query
from caffeine.search.reader import IndexReader
from caffeine.search.settings import SearchSettings, load_search_settings

__all__ = [
    "IndexReader", "SearchSettings", "load_search_settings",
    "ParsedQuery", "QueryError", "parse_query", "MAX_QUERY_CHARS", "MAX_QUERY_TERMS",
    "apply_service_policy", "fewer_full_collections", "freeze_what_startup_made",
]
