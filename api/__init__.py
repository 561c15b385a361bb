"""The search service: a read-only FastAPI app over the index (``caffeine serve``).

Layer: api. Imports only the public ``caffeine.percolator`` names, ``caffeine.index``,
``caffeine.index.schema`` and ``caffeine.config`` (plus the read-only status helpers
named in ``caffeine.search.report``); never writes a table. Layout (FastAPI's "bigger applications"):

    api/main.py          create_app(): routers, error handlers, lifespan (connections)
    api/dependencies.py  get_cluster / get_index / get_settings (tests override get_cluster)
    caffeine/search/settings.py      CAFFEINE_API_* settings (pydantic-settings)
    api/routers/         search, documents, dups, status (JSON, in /docs), pages (HTML)
    caffeine/search/reader.py         IndexReader: every read, composed of
    caffeine/search/statistics.py      the cached corpus statistics (docstats)
    caffeine/search/searcher.py          ranked results (caffeine/search/postings_cache.py, caffeine/search/cold_reads.py, caffeine/search/details.py)
    caffeine/search/views.py           documents and duplicate clusters
    caffeine/search/report.py          /stats                  caffeine/search/health.py   /healthz
    caffeine/search/query.py         query parsing (pure)      caffeine/search/ranking.py   BM25 ranking (pure)
    caffeine/search/snippets.py      snippets (pure)           api/html.py      the pages' HTML (pure)
    api/models.py        response models           api/errors.py    exception handlers
    api/commands.py      `caffeine serve`

See api/README.md.
"""
