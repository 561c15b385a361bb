"""Scans of one shard of a table's rows (``Store.scan(shard=(index, count))``).

Workers deal a table's rows to themselves by the key's CRC-32 (``storage.in_shard``) and list
only their own notifications. On HBase the coprocessor selects the shard's rows where they
are (``RowShards.java``), so a worker neither walks nor ships the others' rows; the contract
only promises a superset (a store without the coprocessor returns every row), and the
in-memory store answers exactly, as HBase with the coprocessor does.
"""

from __future__ import annotations

import uuid

import pytest

from caffeine.storage import FamilySpec, Put, ReadSpec, in_shard
from caffeine.storage.memory import MemoryStore
from caffeine.storage.shards import SHARD_ATTRIBUTE

FAMILIES = {b"n": FamilySpec(), b"d": FamilySpec()}
KEYS = [b"%s-%03d" % (prefix, i) for prefix in (b"a", b"q", b"z") for i in range(60)]


@pytest.fixture
def table(store, request):
    """(store, table, exact): rows in KEYS over two regions (split at b"m"); ``exact`` when
    the store selects the shard itself (the in-memory one; HBase with the coprocessor)."""
    name = "sh" + uuid.uuid4().hex[:8]
    store.create_table(name, FAMILIES, [b"m"])
    store.put_rows(name, {key: [Put(b"n", b"c", 5, b"note " + key), Put(b"d", b"x", 5, b"data")] for key in KEYS})
    exact = isinstance(store, MemoryStore) or request.getfixturevalue("hbase_settings").coprocessor != "off"
    yield store, name, exact
    store.drop_table(name)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_a_shard_scan_returns_the_shards_rows(table, count):
    store, name, exact = table
    seen = set()
    for index in range(count):
        got = [row.key for row in store.scan(name, b"", None, ReadSpec(families=(b"n",)), batch_size=7,
                                             shard=(index, count))]
        want = [key for key in KEYS if in_shard(key, (index, count))]
        assert got == sorted(got)
        assert set(want) <= set(got)
        if exact:
            assert got == want
        seen |= set(got)
    assert seen == set(KEYS)


def test_a_shard_combines_with_the_other_scan_options(table):
    store, name, exact = table
    shard = (1, 3)
    want = [key for key in KEYS if in_shard(key, shard)]
    rows = list(store.scan(name, b"b", b"zz", ReadSpec(), batch_size=5, key_only=True, shard=shard))
    assert {r.key for r in rows} >= {k for k in want if b"b" <= k < b"zz"}
    assert all(cell.value == b"" for row in rows for cell in row)
    limited = [r.key for r in store.scan(name, b"", None, ReadSpec(), limit=4, shard=shard)]
    assert len(limited) == 4
    if exact:
        assert [r.key for r in rows] == [k for k in want if b"b" <= k < b"zz"]
        assert limited == want[:4]


@pytest.mark.parametrize("shard", [(2, 2), (-1, 2), (0, 0), (1.0, 2)])
def test_a_malformed_shard_is_refused_before_any_call(store, shard):
    name = "sh" + uuid.uuid4().hex[:8]
    store.create_table(name, FAMILIES)
    try:
        with pytest.raises(ValueError, match="shard"):
            list(store.scan(name, shard=shard))
    finally:
        store.drop_table(name)


@pytest.mark.hbase
def test_the_coprocessor_refuses_a_malformed_shard_attribute(hbase_store, hbase_settings):
    """A client bug worth seeing: the region server answers CAFFEINE-SHARD, not every row."""
    from caffeine.storage import thrift1
    from support.session import require_coprocessor

    require_coprocessor(hbase_store)
    name = "sh" + uuid.uuid4().hex[:8]
    hbase_store.create_table(name, FAMILIES)
    try:
        hbase_store.mutate_row(name, b"r", [Put(b"n", b"c", 5, b"v")])
        tscan = thrift1.tscan(b"", None, [b"n"], ReadSpec(), 10, None)
        with pytest.raises(Exception, match="CAFFEINE-SHARD bad value"):
            hbase_store.thrift1.call(lambda c: thrift1.scan_page(
                c.client, hbase_store._name(name), tscan, 10, {SHARD_ATTRIBUTE: b"3/2"}))
    finally:
        hbase_store.drop_table(name)
