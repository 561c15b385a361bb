"""Reading the cells several rows have in common (``Store.read_common``; the coprocessor's
``RowsCommon``): on HBase the first row's region server intersects the rows, including rows
of other regions, and answers what reading the rows whole and intersecting them here
answers; the in-memory store answers the same; a coprocessor older than the request, or a
busy one, is answered by the whole-row read."""

from __future__ import annotations

import uuid

import pytest

from caffeine.storage import MAX_COMMON_ROWS, CommonCells, FamilySpec, Put, Store
from caffeine.storage.memory import MemoryStore
from caffeine.storage.model import GUARD_FAMILY
from caffeine.storage.summaries import SUMMARY_ATTRIBUTE, common_request

FAMILIES = {b"p": FamilySpec(), b"o": FamilySpec()}
SPLIT = b"m"   # the split table's two regions: rows below it, and from it on


def _rows(store, table, prefix: bytes) -> list[bytes]:
    """Three rows of ``p`` cells: a00..a39 in the first, every second of them in the next,
    every third in the last; tombstones (empty newest values) over some common ones, one
    tombstone rewritten, and a cell of the other family everywhere."""
    keys = [prefix + b"-%d-" % i + uuid.uuid4().hex[:6].encode() for i in range(3)]
    _write(store, table, keys)
    return keys


def _write(store, table, keys: list[bytes]) -> None:
    for i, key in enumerate(keys):
        step = i + 1
        store.put_rows(table, {key: [Put(b"p", b"a%02d" % j, 5, b"%d:%d" % (i, j)) for j in range(0, 40, step)]
                               + [Put(b"o", b"a00", 5, b"other")]})
    store.put_rows(table, {keys[1]: [Put(b"p", b"a06", 7, b""), Put(b"p", b"a12", 7, b"")]})
    store.put_rows(table, {keys[1]: [Put(b"p", b"a12", 9, b"back")]})


# Common to the three rows: multiples of 6 below 40, less a06 (a tombstone in the second row).
COMMON = [b"a%02d" % j for j in range(0, 40, 6) if j != 6]


@pytest.fixture(scope="module")
def split_table(hbase_store, hbase_settings):
    """A table of two regions (split at ``SPLIT``), on HBase with the coprocessor."""
    if hbase_settings.coprocessor == "off":
        pytest.skip("CAFFEINE_COPROCESSOR=off: the runtime runs without the coprocessor")
    name = "cc" + uuid.uuid4().hex[:8]
    descriptor = hbase_store.codec.ttable_descriptor(
        hbase_store._name(name), {**FAMILIES, GUARD_FAMILY: FamilySpec(max_versions=1)}, {})
    hbase_store.thrift2.call(lambda c: c.createTable(descriptor, [SPLIT]))
    yield name
    hbase_store.drop_table(name)


def _expected(keys, limit=100):
    values = {0: lambda j: b"0:%d" % j, 1: lambda j: b"back" if j == 12 else b"1:%d" % j, 2: lambda j: b"2:%d" % j}
    kept = COMMON[:limit]
    return CommonCells({key: {q: values[i](int(q[1:])) for q in kept} for i, key in enumerate(keys)}, len(COMMON))


@pytest.mark.hbase
@pytest.mark.parametrize("prefixes", [(b"a", b"a", b"a"), (b"a", b"z", b"a"), (b"z", b"a", b"z")],
                         ids=["one-region", "first-row-below", "first-row-above"])
def test_hbase_intersects_rows_of_any_region_as_the_client_does(hbase_store, split_table, prefixes):
    keys = [_rows(hbase_store, split_table, p)[i] for i, p in enumerate(prefixes)]
    # Sizes say whether the server walks each next row (small) or seeks in it (large): the
    # answer is the same.
    for order, sizes in ((keys, None), (keys[::-1], [1, 1, 1]), ([keys[1], keys[0], keys[2]], [10**9] * 3),
                         (keys, [0, 20, 0])):
        for limit in (0, 2, 100):
            got = hbase_store.read_common(split_table, order, b"p", limit, sizes)
            here = Store.read_common(hbase_store, split_table, order, b"p", limit)
            assert got.server_side and not here.server_side
            assert got.cells == here.cells and got.count == here.count
            want = _expected(keys, limit)
            assert got.count == want.count == 6
            assert got.cells == {key: want.cells[key] for key in order}
            assert list(got.cells[order[0]]) == COMMON[:limit]   # qualifier order
            assert got.complete == (limit >= 6)


@pytest.mark.hbase
def test_absent_rows_duplicates_and_a_single_row(hbase_store, split_table):
    keys = _rows(hbase_store, split_table, b"b")
    missing = b"zz-missing-" + uuid.uuid4().hex.encode()
    assert hbase_store.read_common(split_table, [keys[0], missing], b"p", 10) == \
        CommonCells({keys[0]: {}, missing: {}}, 0, True)
    twice = hbase_store.read_common(split_table, [keys[2], keys[0], keys[2], keys[1]], b"p", 100)
    assert list(twice.cells) == [keys[2], keys[0], keys[1]] and twice.count == 6
    alone = hbase_store.read_common(split_table, [keys[1]], b"p", 100)
    assert alone.count == 19 and b"a06" not in alone.cells[keys[1]] and alone.cells[keys[1]][b"a12"] == b"back"
    assert hbase_store.read_common(split_table, [keys[0]], b"o", 5).cells == {keys[0]: {b"a00": b"other"}}


@pytest.mark.hbase
def test_the_in_memory_store_answers_as_hbase(hbase_store, split_table):
    keys = _rows(hbase_store, split_table, b"c")
    memory = MemoryStore()
    memory.create_table("t", FAMILIES)
    _write(memory, "t", keys)
    missing = b"c-missing"
    for rows in (keys, keys[::-1], [*keys, missing], keys[1:]):
        for limit in (0, 3, 100):
            assert memory.read_common("t", rows, b"p", limit) == hbase_store.read_common(split_table, rows, b"p", limit)


@pytest.mark.parametrize("rows, limit", [([], 1), ([b"r%d" % i for i in range(MAX_COMMON_ROWS + 1)], 1),
                                         ([b"r"], -1), ([b"r"], 1_000_001)])
def test_requests_no_store_answers_are_refused_before_anything_is_sent(rows, limit):
    memory = MemoryStore()
    memory.create_table("t", FAMILIES)
    with pytest.raises(ValueError):
        memory.read_common("t", rows, b"p", limit)


@pytest.mark.hbase
def test_a_malformed_common_request_is_refused(hbase_store, split_table):
    key = _rows(hbase_store, split_table, b"d")[0]
    t2 = hbase_store.t2
    for request in (b"common", b"common x", b"common -1", b"common 1 zz", b"common 1 abc", b"common 1 61.",
                    b"common 1 61.-3", b"common 1 61.x",
                    b"common 1 " + b" ".join([b"61"] * MAX_COMMON_ROWS)):
        tget = t2.TGet(row=key, columns=[t2.TColumn(family=b"p")], maxVersions=1,
                       attributes={SUMMARY_ATTRIBUTE: request})
        with pytest.raises(Exception) as info:
            hbase_store.thrift2.call(lambda c: c.getMultiple(hbase_store._name(split_table), [tget]))
        assert "CAFFEINE-READ bad request" in str(getattr(info.value, "message", info.value)), request


@pytest.mark.hbase
@pytest.mark.parametrize("answer, for_good", [(b"CAFFEINE-READ bad request common 100 aa", True),
                                              (b"CAFFEINE-READ busy: too many reads gathering rows", False)],
                         ids=["older-coprocessor", "busy"])
def test_a_refused_common_read_is_answered_from_the_whole_rows(hbase_store, split_table, monkeypatch, answer,
                                                               for_good):
    """An older coprocessor refuses ``common`` as a bad request: the store intersects whole
    rows here (or, asked for the server's answer only, answers None), and from then on. A
    busy region server: this read only."""
    keys = _rows(hbase_store, split_table, b"e")
    want = hbase_store.read_common(split_table, keys, b"p", 100)
    real = hbase_store._guarded_call
    sent = []

    def refusing(pool, fn, table_name, **kw):
        def call(client):
            class Refusing:
                def __getattr__(self, name):
                    return getattr(client, name)

                def getMultiple(self, name, tgets):
                    requests = [(g.attributes or {}).get(SUMMARY_ATTRIBUTE) for g in tgets]
                    sent.append(requests)
                    if any(r and r.startswith(b"common") for r in requests):
                        raise hbase_store.t2.TIOError(message=answer, canRetry=False)
                    return client.getMultiple(name, tgets)
            return fn(Refusing())
        return real(pool, call, table_name, **kw)

    monkeypatch.setattr(hbase_store, "_guarded_call", refusing)
    try:
        assert hbase_store.read_common(split_table, keys, b"p", 100, server_only=True) is None
        assert sent == [[common_request(100, keys)]]
        hbase_store._intersecting = True
        got = hbase_store.read_common(split_table, keys, b"p", 100)
        assert got.cells == want.cells and got.count == want.count and not got.server_side
        assert sent[1] == [common_request(100, keys)]
        assert hbase_store._intersecting is not for_good
        if for_good:
            sent.clear()
            assert hbase_store.read_common(split_table, keys, b"p", 100, server_only=True) is None
            assert sent == []   # not asked again
    finally:
        hbase_store._intersecting = True
