"""The test session's HBase: its table prefix, settings and timestamp oracle, and clusters over
tables of their own.

Layer: test support. ``tests/conftest.py`` builds its fixtures from these; tests that need a
cluster of their own outside a fixture (a sub-prefix, a second cluster over one store) use them
directly. Every session uses its own table prefix (``SESSION_PREFIX``), so runs never see each
other's tables.
"""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

from caffeine.config import load_settings

SESSION_PREFIX = f"test_{uuid.uuid4().hex[:8]}_"


def session_settings():
    """The configured settings (``CAFFEINE_*``) under the session's table prefix."""
    return load_settings(table_prefix=SESSION_PREFIX)


def oracle_for(settings):
    """The real timestamp oracle, or an in-process one when ``CAFFEINE_TEST_ORACLE=inprocess``."""
    from caffeine.percolator.testing import InProcessOracle

    if os.environ.get("CAFFEINE_TEST_ORACLE", "real") == "inprocess":
        return InProcessOracle()
    from caffeine.oracle.client import OracleClient

    return OracleClient(settings)


def close_keeping_store(cluster):
    """A ``close`` for ``cluster`` that leaves its store open (the session's store outlives it)."""
    def close():
        cluster.executor.shutdown(wait=True)
        cluster.owners.close()
        closer = getattr(cluster.oracle, "close", None)
        if closer:
            closer()
    return close


def drop_all(store) -> None:
    """Drop every table of ``store``'s prefix, several at once: the master runs the disable and
    delete procedures of different tables in parallel, and a session leaves hundreds."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(6) as pool:
        list(pool.map(store.drop_table, store.list_tables()))


@contextlib.contextmanager
def fresh_hbase_cluster():
    """A cluster over HBase with a table prefix of its own; its tables are dropped at the end."""
    from caffeine.percolator.cluster import Cluster
    from caffeine.storage.hbase import HBaseStore

    settings = session_settings().model_copy(update={"table_prefix": f"{SESSION_PREFIX}{uuid.uuid4().hex[:6]}_"})
    store = HBaseStore(settings)
    c = Cluster(store, oracle_for(settings), settings)
    try:
        yield c
    finally:
        close_keeping_store(c)()
        drop_all(store)
        store.close()


def require_coprocessor(store):
    """Skip (fail under CI) when the HBase runs no Caffeine coprocessor."""
    from caffeine.percolator.owners import TABLE as OWNERS, ensure_table
    from caffeine.storage.probe import probe_row_steps

    ensure_table(store)
    if probe_row_steps(store, OWNERS) is None:
        message = "the HBase runtime does not run Caffeine's coprocessor (caffeine up loads it)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
