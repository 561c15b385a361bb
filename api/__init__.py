"""The search service: a read-only FastAPI app over the index (``caffeine serve``).

Layer: api. Imports only the public ``caffeine.percolator`` names, ``caffeine.index``,
``caffeine.index.schema`` and ``caffeine.config`` (plus the read-only status helpers
named in ``api.status``); never writes a table. Layout (FastAPI's "bigger applications"):

    api/main.py          create_app(): routers, error handlers, lifespan (connections)
    api/dependencies.py  get_cluster / get_index / get_settings (tests override get_cluster)
    api/settings.py      CAFFEINE_API_* settings (pydantic-settings)
    api/routers/         search, documents, dups, status (JSON, in /docs), pages (HTML)
    api/index.py         IndexReader: every read, composed of
    api/statistics.py      the cached corpus statistics (docstats)
    api/search.py          ranked results (api/postings_cache.py, api/cold_reads.py, api/details.py)
    api/views.py           documents and duplicate clusters
    api/status.py          /stats                  api/health.py   /healthz
    api/query.py         query parsing (pure)      api/ranking.py   BM25 ranking (pure)
    api/snippets.py      snippets (pure)           api/html.py      the pages' HTML (pure)
    api/models.py        response models           api/errors.py    exception handlers
    api/commands.py      `caffeine serve`

See api/README.md.
"""
