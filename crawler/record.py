"""Writing one fetch outcome into ``repository``: the write path a crawl and an ingest share.

Layer: crawler. Imports ``caffeine.index`` and ``caffeine.index.schema``; works inside the
transaction it is handed. ``crawler.crawl`` calls ``record_fetch`` in the transaction that
also advances its frontier, ``crawler.ingest`` in a transaction of its own per WARC record,
so a page fetched live and the same page read from an archive become the same cells.
"""

from __future__ import annotations

from caffeine.index import fetch_outcome
from caffeine.index.schema import (
    PAGE_CONTENT, PAGE_ERROR, PAGE_META, PERCOLATOR_TABLES, REPOSITORY, encode_page_meta, split_points,
)

__all__ = ["record_fetch", "install_repository"]


def record_fetch(txn, repository: str, result) -> None:
    """Write ``result`` (a ``crawler.fetch.FetchResult``) as the URL's latest outcome.

    docs/INDEXING.md: ``page:meta`` is the ``FetchResult.meta()`` JSON and ``page:content``
    the stored body (deleted when there is none); a transient failure (5xx, timeout,
    robots, redirect loop: ``fetch_outcome`` "keep") goes to ``page:error`` instead, which no
    observer watches, so the last good version stays in ``page:meta``/``page:content`` for
    the index and for the batch job alike.
    """
    record = result.meta()
    meta = encode_page_meta(record)
    if fetch_outcome(record) == "keep":
        txn.set(repository, result.url, PAGE_ERROR, meta)
        return
    # page:meta first: the first cell written is the transaction's primary.
    txn.set(repository, result.url, PAGE_META, meta)
    txn.delete(repository, result.url, PAGE_ERROR)
    if result.content is not None:
        txn.set(repository, result.url, PAGE_CONTENT, result.content)
    else:
        txn.delete(repository, result.url, PAGE_CONTENT)


def install_repository(cluster, repository: str = REPOSITORY) -> None:
    """Make ``repository`` exist (the default one: with the data contract's other Percolator
    tables, as installing the indexing application would, so readers find them before the
    first worker starts), and this process's writes of ``page:meta`` set its notify cell.

    docs/INDEXING.md: ``page:meta`` is the observed column of the data contract, so pages
    recorded before the indexing application's first install (a crawl or an ingest before
    the first ``caffeine worker``) are still indexed once a worker runs. Every other observed
    column comes from the deployment's observer registry (``Application.install``)."""
    for table in PERCOLATOR_TABLES if repository == REPOSITORY else (repository,):
        # Split as the indexing application's install would (schema.SPLIT_POLICIES).
        cluster.create_table(table, split_policy=split_points)
    cluster.observe_column(repository, PAGE_META)
