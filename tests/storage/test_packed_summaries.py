"""Packed summary reads (``caffeine.storage.summaries``; the coprocessor's ``RowPacks``): on the
wire, a ``packed`` request answers one cell holding what ``prefix`` answers as many, and
``cells`` packs the named columns; through ``HBaseStore``, the packed and the per-cell forms
give the same answers, and a coprocessor that predates packing is asked per cell instead."""

from __future__ import annotations

import struct
import uuid

import pytest

from caffeine.storage import FamilySpec, Put
from caffeine.storage.errors import StorageError
from caffeine.storage.summaries import (CELLS_REQUEST, PACKED_QUALIFIER, SUMMARY_ATTRIBUTE, SUMMARY_COUNT_QUALIFIER,
                                        unpack)

pytestmark = pytest.mark.hbase

FAMILIES = {b"c": FamilySpec(counted=True), b"u": FamilySpec()}


@pytest.fixture(scope="module")
def table(hbase_store, hbase_settings):
    if hbase_settings.coprocessor == "off":
        pytest.skip("CAFFEINE_COPROCESSOR=off: the runtime runs without the coprocessor")
    name = "pk" + uuid.uuid4().hex[:8]
    hbase_store.create_table(name, FAMILIES)
    yield name
    hbase_store.drop_table(name)


def _row(store, table, family: bytes) -> bytes:
    """A row of 30 cells in ``family`` at ts 5, every fourth emptied at ts 7 (a tombstone),
    q25..q29 rewritten at ts 40, and a cell of the other family."""
    key = b"pk-" + uuid.uuid4().hex.encode()
    other = b"u" if family == b"c" else b"c"
    store.put_rows(table, {key: [Put(family, b"q%02d" % i, 5, b"v%d" % i) for i in range(30)]
                           + [Put(other, b"q00", 5, b"elsewhere")]})
    store.put_rows(table, {key: [Put(family, b"q%02d" % i, 7, b"") for i in range(0, 30, 4)]})
    store.put_rows(table, {key: [Put(family, b"q%02d" % i, 40, b"late%d" % i) for i in range(25, 30)]})
    return key


def _get(store, table, key, family, request, columns=None):
    t2 = store.t2
    tcolumns = ([t2.TColumn(family=f, qualifier=q) for f, q in columns] if columns
                else [t2.TColumn(family=family)])
    tget = t2.TGet(row=key, columns=tcolumns, maxVersions=1, attributes={SUMMARY_ATTRIBUTE: request})
    return store.thrift2.call(lambda c: c.getMultiple(store._name(table), [tget]))[0].columnValues


@pytest.mark.parametrize("family", [b"c", b"u"], ids=["counted", "walked"])
@pytest.mark.parametrize("request_args", [b"0", b"6", b"6 40", b"1000 0"])
def test_a_packed_answer_holds_the_per_cell_answer(hbase_store, table, family, request_args):
    key = _row(hbase_store, table, family)
    per_cell = _get(hbase_store, table, key, family, b"prefix " + request_args)
    packed = _get(hbase_store, table, key, family, b"packed " + request_args)
    assert len(packed) == 1 and packed[0].qualifier == PACKED_QUALIFIER and packed[0].timestamp == 0
    count, cells = unpack(packed[0].value)
    assert per_cell[-1].qualifier == SUMMARY_COUNT_QUALIFIER
    assert count == int(per_cell[-1].value) == 30 - 7  # q28 emptied, then rewritten
    assert cells == [(cv.family, cv.qualifier, cv.value) for cv in per_cell[:-1]]


def test_a_cells_request_packs_the_named_columns_newest_values_tombstones_included(hbase_store, table):
    key = _row(hbase_store, table, b"c")
    named = [(b"c", b"q01"), (b"c", b"q04"), (b"c", b"q26"), (b"c", b"absent"), (b"u", b"q00")]
    (packed,) = _get(hbase_store, table, key, b"c", CELLS_REQUEST, named)
    assert packed.qualifier == PACKED_QUALIFIER
    assert unpack(packed.value) == (4, [(b"c", b"q01", b"v1"), (b"c", b"q04", b""), (b"c", b"q26", b"late26"),
                                        (b"u", b"q00", b"elsewhere")])


def test_a_malformed_packed_request_is_refused(hbase_store, table):
    key = _row(hbase_store, table, b"c")
    for request in (b"packed", b"packed x", b"packed -1", b"packed 1 2 3", b"cells 4"):
        with pytest.raises(Exception) as info:
            _get(hbase_store, table, key, b"c", request)
        assert "CAFFEINE-READ bad request" in str(getattr(info.value, "message", info.value)), request


def test_the_store_answers_alike_in_both_forms(hbase_store, table):
    keys = [_row(hbase_store, table, b"c"), _row(hbase_store, table, b"u"), b"pk-missing"]
    named = {keys[0]: [(b"c", b"q%02d" % i) for i in range(0, 40, 3)], keys[1]: [(b"u", b"q05"), (b"c", b"q00")],
             keys[2]: [(b"c", b"q01")]}

    def answers():
        prefixes = [hbase_store.read_prefix(table, keys, family, limit, since)
                    for family in (b"c", b"u") for limit in (0, 3, 100) for since in (None, 0, 40)]
        latest = [hbase_store.read_latest(table, keys, families, columns)
                  for families, columns in (((b"c",), ()), ((), ()), ((b"u",), ((b"c", b"q03"), (b"c", b"q12"))))]
        return prefixes, hbase_store.read_cells(table, named), latest

    assert hbase_store._packing
    packed = answers()
    hbase_store._packing = False
    try:
        per_cell = answers()
    finally:
        hbase_store._packing = True
    assert packed == per_cell
    assert packed[0][0][keys[0]].count == 23 and packed[0][0][keys[0]].server_side
    assert packed[1][keys[0]][b"c:q03"] == b"v3" and packed[1][keys[0]][b"c:q12"] == b""
    assert len(packed[2][0][keys[0]]) == 30 and packed[2][0][keys[0]][b"c:q12"] == b""   # tombstones are values
    assert packed[2][2][keys[0]] == {b"u:q00": b"elsewhere", b"c:q03": b"v3", b"c:q12": b""}
    assert len(packed[2][2][keys[1]]) == 30 and keys[2] not in packed[2][2]


def test_a_coprocessor_older_than_packing_is_asked_per_cell(hbase_store, table, monkeypatch):
    """An older coprocessor refuses ``packed``/``cells`` as a bad request (its RowSummaries
    knew only ``count`` and ``prefix``): the store asks again per cell, and from then on."""
    key = _row(hbase_store, table, b"c")
    want_prefix = hbase_store.read_prefix(table, [key], b"c", 4, 40)
    want_cells = hbase_store.read_cells(table, {key: [(b"c", b"q01")]})
    want_latest = hbase_store.read_latest(table, [key], [b"c"])
    real = hbase_store._guarded_call
    sent = []

    def older_server(pool, fn, table_name, **kw):
        if pool is not hbase_store.thrift2:
            return real(pool, fn, table_name, **kw)

        def call(client):
            class Recording:
                def getMultiple(self, name, tgets):
                    requests = {(g.attributes or {}).get(SUMMARY_ATTRIBUTE) for g in tgets}
                    sent.append(requests)
                    if any(r and (r.startswith(b"packed") or r == CELLS_REQUEST) for r in requests):
                        # As the Thrift2 server reports a DoNotRetryIOException.
                        raise hbase_store.t2.TIOError(message=b"CAFFEINE-READ bad request packed 4 40", canRetry=False)
                    return client.getMultiple(name, tgets)
            return fn(Recording())
        return real(pool, call, table_name, **kw)

    monkeypatch.setattr(hbase_store, "_guarded_call", older_server)
    try:
        assert hbase_store.read_prefix(table, [key], b"c", 4, 40) == want_prefix
        assert hbase_store.read_cells(table, {key: [(b"c", b"q01")]}) == want_cells
        assert not hbase_store._packing
        assert sent == [{b"packed 4 40"}, {b"prefix 4 40"}, {None}]
        assert hbase_store.read_latest(table, [key], [b"c"]) == want_latest   # Thrift1's map, not Thrift2
        assert len(sent) == 3
        hbase_store._packing = True
        sent.clear()
        assert hbase_store.read_latest(table, [key], [b"c"]) == want_latest   # refused once: then Thrift1
        assert sent == [{CELLS_REQUEST}] and not hbase_store._packing
    finally:
        hbase_store._packing = True


def test_unpack_refuses_a_value_that_is_not_a_pack():
    good = struct.pack(">qI", 7, 1) + struct.pack(">3I", 1, 2, 3) + b"f" + b"qq" + b"vvv"
    assert unpack(good) == (7, [(b"f", b"qq", b"vvv")])
    for bad in (b"", good[:-1], good + b"x", struct.pack(">qI", 1, 5)):
        with pytest.raises(ValueError):
            unpack(bad)


def test_wide_reads_of_a_few_rows_run_a_request_per_row_with_the_same_answer(hbase_store, table, monkeypatch):
    """A read of 2 to ``PARALLEL_ROWS`` rows asking ``PARALLEL_CELLS`` or more cells by number
    runs one request per row at once (``HBaseStore._get_multiple``), with the answers of one
    request for every row; whole-family reads and reads of more rows stay one request."""
    from caffeine.storage import hbase_summaries as hbase

    keys = [b"pkw-%d-" % i + uuid.uuid4().hex.encode() for i in range(hbase.PARALLEL_ROWS + 1)]
    hbase_store.put_rows(table, {key: [Put(b"c", b"q%04d" % j, 5, b"v%d-%d" % (i, j)) for j in range(300 + 50 * i)]
                                 for i, key in enumerate(keys)})
    few = keys[:3]
    named = {key: [(b"c", b"q%04d" % j) for j in range(0, 600, 2)] for key in few}
    calls = []
    real = hbase_store._guarded_call

    def counting(pool, fn, table_name, **kw):
        calls.append(1)
        return real(pool, fn, table_name, **kw)

    def answers():
        calls.clear()
        got = (hbase_store.read_prefix(table, few, b"c", 280, 0), hbase_store.read_cells(table, named),
               hbase_store.read_latest(table, few, [b"c"]), hbase_store.read_prefix(table, keys, b"c", 280, 0))
        return got, len(calls)

    monkeypatch.setattr(hbase_store, "_guarded_call", counting)
    apart, requests_apart = answers()
    monkeypatch.setattr(hbase, "PARALLEL_CELLS", 10_000)
    together, requests_together = answers()
    assert (requests_apart, requests_together) == (3 + 3 + 1 + 1, 4)
    assert apart == together
    assert [len(together[0][key].cells) for key in few] == [280] * 3 and together[0][few[2]].count == 400
    assert [len(together[1][key]) for key in few] == [150, 175, 200]
    assert len(together[3]) == len(keys) and together[3][keys[-1]].count == 500


def test_a_failing_row_of_a_read_apart_fails_the_read(hbase_store, table, monkeypatch):
    """One row's request failing fails the whole read (with that error); the store reads on."""
    keys = [b"pkf-%d-" % i + uuid.uuid4().hex.encode() for i in range(3)]
    hbase_store.put_rows(table, {key: [Put(b"c", b"q%04d" % j, 5, b"v") for j in range(300)] for key in keys})
    real = hbase_store._guarded_call
    asked = []

    def failing_second_row(pool, fn, table_name, **kw):
        def call(client):
            class Rows:
                def getMultiple(self, name, tgets):
                    asked.append(tgets[0].row)
                    if tgets[0].row == keys[1]:
                        raise StorageError("thrift2: the second row's request failed")
                    return client.getMultiple(name, tgets)
            return fn(Rows())
        return real(pool, call, table_name, **kw)

    monkeypatch.setattr(hbase_store, "_guarded_call", failing_second_row)
    with pytest.raises(StorageError, match="second row"):
        hbase_store.read_prefix(table, keys, b"c", 280, 0)
    assert keys[1] in asked
    monkeypatch.undo()
    assert hbase_store.read_prefix(table, keys, b"c", 280, 0)[keys[2]].count == 300
