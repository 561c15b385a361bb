"""The search engine's settings (the search service's knobs), from ``CAFFEINE_API_*`` variables.

Layer: search. Imports pydantic-settings, and ``caffeine.percolator.serving`` for the one limit
a setting shares with the store. Where HBase and the oracle are comes from
``caffeine.config.Settings`` (``CAFFEINE_*``), shared with every other process; these are
the knobs of the service itself. Request limits that the OpenAPI schema states (page and
size ranges, query length) are constants in ``caffeine.search.query`` and ``api.routers.search``, not
settings: a client must be able to rely on them.
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from caffeine.percolator.serving import MAX_PREFIX


class SearchSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CAFFEINE_API_", frozen=True, extra="ignore")

    # Corpus statistics (N, average length, each document's length/inlinks/fingerprint) are
    # brought up to date this often, in a background thread: the docstats rows changed since
    # the previous refresh are read (a whole scan the first time and every full_reload_s).
    stats_refresh_s: float = 10.0
    # The expensive figures of /stats (distinct terms: a scan of ``postings`` returning one
    # cell per term; clusters: a transactional scan of ``dups``; together ~3 s and ~0.8 s of
    # CPU at 20,000 pages) are recomputed in the background at most this often, and only
    # while someone asks for /stats.
    slow_stats_refresh_s: float = 300.0
    # A request waits this long for the connection to HBase and the oracle (made in the
    # background: a down HBase takes a minute to fail) before it gets a 503.
    connect_wait_s: float = 5.0
    # A result's title, text (for its snippet) and cluster size, once read, are reused for this
    # long (0 turns it off): popular results then cost no reads. /documents and /dups always
    # read afresh.
    details_cache_s: float = 10.0
    details_cache_entries: int = 4096
    # Posting lists of queried terms are kept in memory (caffeine.search.postings_cache): a term's list is
    # brought up to date (its changed cells read) when it is older than postings_refresh_s, so
    # an exported page is searchable within that long. Both it and the statistics refresh
    # read only what changed since their previous read less change_margin_s; a write landing
    # later than that after its export started is seen at the next whole read, every
    # full_reload_s. At most postings_cache_max postings are held (0: no cache, every query
    # reads its rows whole). Each held posting costs about 250 bytes, its scores included.
    postings_refresh_s: float = 1.0
    # A background thread brings the terms queried in the last postings_refresh_s up to date
    # every postings_refresh_s / 2, so their queries wait for no read (caffeine.search.postings_cache).
    postings_refresh_ahead: bool = True
    change_margin_s: float = 30.0
    full_reload_s: float = 300.0
    postings_cache_max: int = 2_000_000
    # A query whose terms' lists are not in memory (their first query, caffeine.search.cold) reads the
    # first cold_width postings of each term's impact-ordered row and their count instead of
    # the whole lists, when that proves the page's results; the whole lists are then read in
    # the background for the queries that follow. 0 turns it off (the first query reads whole).
    cold_width: int = Field(2048, ge=0, le=MAX_PREFIX)
    # The ranked results of this many recent queries (per page depth) are kept and reused
    # while the query's posting lists and the statistics are the ones they were ranked from
    # (caffeine.search.ranking_cache): a repeated query then costs no ranking. 0 turns it off.
    ranking_cache_entries: int = Field(4096, ge=0)
    # ... holding at most this many ranked documents in all (about 200 bytes each).
    ranking_cache_hits: int = Field(100_000, ge=0)
    # Snippets (a document's text around a query's words) of this many (document, export,
    # words) are kept: the same result shown for the same words again costs no snippet.
    snippet_cache_entries: int = Field(16384, ge=0)
    # Snippet size.
    snippet_tokens: int = 32
    snippet_chars: int = 280
    # /healthz waits this long for each probe before calling it unreachable.
    health_timeout_s: float = 3.0
    # At most this many inlinks, outlinks and cluster members are listed per response (the
    # totals are always given).
    max_listed_links: int = 200


def load_search_settings(**overrides) -> SearchSettings:
    return SearchSettings(**{k: v for k, v in overrides.items() if v is not None})
