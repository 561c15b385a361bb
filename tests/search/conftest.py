"""Fixtures of the search tests: the small web of ``support.search_web``, indexed on the real
HBase once per module that asks for it (``indexed``), under tables of its own."""

from __future__ import annotations

import uuid

import pytest

from caffeine.percolator import connect
from support.search_web import build_web, index_web
from support.session import SESSION_PREFIX


@pytest.fixture(scope="module")
def web():
    return build_web()


@pytest.fixture(scope="module")
def indexed(hbase_store, web):
    """A cluster over tables of its own, holding the indexed web; dropped afterwards."""
    sub_prefix = f"api{uuid.uuid4().hex[:6]}_"
    cluster = connect(table_prefix=SESSION_PREFIX + sub_prefix)
    try:
        index_web(cluster, web)
        yield cluster
    finally:
        cluster.close()
        for table in hbase_store.list_tables():  # the session's store sees ours under its prefix
            if table.startswith(sub_prefix):
                hbase_store.drop_table(table)
