"""The API's routers, one module per resource (search, documents, dups, status, pages).

Layer: api. HTTP only: validate parameters, call ``caffeine.search.reader.IndexReader`` through
``api.dependencies``, shape the answer. Endpoints are plain ``def``: HBase calls block, and
FastAPI runs plain functions in its thread pool.
"""
