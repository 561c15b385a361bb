"""HBase-only behaviour of counted families (``FamilySpec.counted``): the coprocessor's count
(coprocessor/.../RowCounts.java) stays a walk of the row under concurrent writers, a family
counted after its data was written catches up, and uncounted tables are laid out as before.
What every store does alike is in tests/storage/test_storage_contract.py."""

from __future__ import annotations

import random
import threading
import time
import uuid

import pytest

from caffeine.storage import Delete, FamilySpec, Put, ReadSpec
from caffeine.runtime.home import Layout
from caffeine.storage.model import COUNT_FAMILY
from support.counted_columns import SPEC, CountedRows

pytestmark = pytest.mark.hbase


def _walked_count(store, table, key, family=b"c") -> int:
    row = store.read_row(table, key, ReadSpec(families=(family,)))
    return sum(1 for c in row.newest_cells() if c.value)


def _descriptor_families(store, table) -> set[bytes]:
    name = store._name(table)
    return {k.rstrip(b":") for k in store.thrift1.call(lambda c: c.client.getColumnDescriptors(name))}


@pytest.fixture
def make_table(hbase_store):
    made = []

    def make(families):
        name = "cf_" + uuid.uuid4().hex[:6]
        hbase_store.create_table(name, families)
        made.append(name)
        return name

    yield make
    for name in made:
        hbase_store.drop_table(name)


def test_concurrent_writers_of_the_same_rows_keep_every_count_a_walk(hbase_store, make_table):
    table = make_table({b"c": FamilySpec(counted=True)})
    keys = [b"row-%d" % i for i in range(4)]
    errors = []

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for step in range(40):
                batch = {}
                for key in rng.sample(keys, rng.randint(1, 3)):
                    qualifiers = rng.sample(range(12), rng.randint(1, 5))
                    batch[key] = [Put(b"c", b"q%02d" % q, rng.randint(1, 30), b"" if rng.random() < 0.4 else b"v%d" % seed)
                                  for q in qualifiers]
                if len(batch) == 1 and step % 2:
                    (key, puts), = batch.items()
                    hbase_store.mutate_row(table, key, puts)   # atomic batch: exclusive row lock
                else:
                    hbase_store.put_rows(table, batch)          # non-atomic batch: shared row locks
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    got = hbase_store.read_prefix(table, keys, b"c", 0)
    assert {key: got[key].count for key in keys} == {key: _walked_count(hbase_store, table, key) for key in keys}
    assert all(got[key].server_side for key in keys)


def _set_table_attribute(store, table, key: bytes, value: bytes) -> None:
    """Set one attribute of ``table``'s descriptor; HBase reopens its regions."""
    t2, name = store.t2, store._name(table)
    descriptor = store.thrift2.call(lambda c: c.getTableDescriptor(t2.TTableName(qualifier=name)))
    descriptor.attributes = {**(descriptor.attributes or {}), key: value}
    store.thrift2.call(lambda c: c.modifyTable(descriptor))


def _store_files(store, settings, table) -> dict[bytes, int]:
    """How many store files each family of the local runtime's ``table`` has on disk."""
    region_dirs = Layout.from_settings(settings).hbase_root_dir / "data" / "default" / store._name(table).decode()
    files: dict[bytes, int] = {}
    for path in region_dirs.glob("*/*/*"):
        if path.is_file() and not path.parent.name.startswith("."):
            files[path.parent.name.encode()] = files.get(path.parent.name.encode(), 0) + 1
    return files


def test_a_write_of_many_rows_counts_each_from_memstore_and_store_files_alike(hbase_store, hbase_settings, make_table):
    """Writes of many rows at once, where the rows a write skips lie between the ones it writes,
    the columns it does not write lie between the ones it does, versions sit in store files and
    in the memstore (the region flushes between phases), and two counted families are written
    at once: every count must stay the model's (and a walk's)."""
    table = make_table({b"c": FamilySpec(counted=True), b"d": FamilySpec(counted=True)})
    # The smallest flush size HBase allows, so the big values below flush the region often.
    _set_table_attribute(hbase_store, table, b"MEMSTORE_FLUSHSIZE", str(1 << 20).encode())
    rng = random.Random(3232)
    keys = sorted(b"row-%03d" % i for i in range(40))
    model = {(k, f): {} for k in keys for f in (b"c", b"d")}   # newest (ts, value) per qualifier
    big = b"x" * 16_000
    for phase in range(4):
        for step in range(6):
            batch = {}
            for key in rng.sample(keys, 10):
                puts = []
                for family in rng.sample((b"c", b"d"), rng.randint(1, 2)):
                    for q in rng.sample(range(30), rng.randint(1, 4)):
                        ts = rng.randint(1, 40) + 10 * phase
                        value = b"" if rng.random() < 0.35 else b"%d-%d:" % (phase, step) + big
                        puts.append(Put(family, b"q%02d" % q, ts, value))
                        current = model[key, family].get(b"q%02d" % q)
                        if current is None or ts >= current[0]:
                            model[key, family][b"q%02d" % q] = (ts, value)
                batch[key] = puts
            hbase_store.put_rows(table, batch)
        deadline = time.monotonic() + 30
        while _store_files(hbase_store, hbase_settings, table).get(b"c", 0) <= phase and time.monotonic() < deadline:
            time.sleep(0.2)
    files = _store_files(hbase_store, hbase_settings, table)
    assert files.get(b"c", 0) >= 1 and files.get(b"d", 0) >= 1 and files.get(COUNT_FAMILY, 0) >= 1, files
    for family in (b"c", b"d"):
        got = hbase_store.read_prefix(table, keys, family, 0)
        want = {k: sum(1 for _, v in model[k, family].values() if v) for k in keys}
        assert {k: got[k].count for k in keys} == want
        assert want == {k: _walked_count(hbase_store, table, k, family) for k in keys}


def test_a_family_counted_after_its_data_was_written_catches_up(hbase_store, make_table):
    table = make_table({b"c": FamilySpec()})
    key = b"late"
    hbase_store.put_rows(table, {key: [Put(b"c", b"q%02d" % i, 5, b"v" if i % 3 else b"") for i in range(30)]})
    t2, name = hbase_store.t2, hbase_store._name(table)
    table_name = t2.TTableName(qualifier=name)
    hbase_store.thrift2.call(lambda c: c.addColumnFamily(
        table_name, t2.TColumnFamilyDescriptor(name=COUNT_FAMILY, maxVersions=1, inMemory=True)))
    hbase_store.thrift2.call(lambda c: c.modifyColumnFamily(
        table_name, t2.TColumnFamilyDescriptor(name=b"c", maxVersions=1, configuration={"caffeine.count": "live"})))
    hbase_store._families.pop(table, None)
    assert hbase_store.families(table) == (b"c",)
    assert hbase_store.read_prefix(table, [key], b"c", 0)[key].count == 20   # no count cell yet: walked
    hbase_store.put_rows(table, {key: [Put(b"c", b"q00", 6, b"v"), Put(b"c", b"q01", 6, b"")]})
    counts = hbase_store.read_row(table, key, ReadSpec(families=(COUNT_FAMILY,)))
    assert [(c.qualifier, c.value) for c in counts] == [(b"c", b"20")]
    assert hbase_store.read_prefix(table, [key], b"c", 3, since=6)[key].count == 20 == _walked_count(hbase_store, table, key)


def test_a_table_without_counted_families_is_laid_out_and_behaves_as_before(hbase_store, make_table):
    table = make_table({b"c": FamilySpec(max_versions=3)})
    assert _descriptor_families(hbase_store, table) == {b"c", b"_g"}
    key = b"plain"
    hbase_store.put_rows(table, {key: [Put(b"c", b"a", 5, b"x"), Put(b"c", b"b", 5, b"")]})
    got = hbase_store.read_prefix(table, [key], b"c", 5)[key]
    assert (got.cells, got.count, got.server_side) == (((b"a", b"x"),), 1, True)
    hbase_store.delete_rows(table, {key: [Delete(b"c", b"a", 5)]})
    assert hbase_store.read_prefix(table, [key], b"c", 5)[key].count == 0


def test_a_counted_table_has_the_count_family_beside_the_guard(hbase_store, make_table):
    table = make_table({b"c": FamilySpec(counted=True), b"p": FamilySpec()})
    assert _descriptor_families(hbase_store, table) == {b"c", b"p", b"_g", COUNT_FAMILY}
    assert hbase_store.families(table) == (b"c", b"p")


def _set_counted(store, table, family: bytes, counted: bool) -> None:
    """Turn the coprocessor's counting of ``family`` on or off (its descriptor's configuration)."""
    t2 = store.t2
    store.thrift2.call(lambda c: c.modifyColumnFamily(
        t2.TTableName(qualifier=store._name(table)),
        t2.TColumnFamilyDescriptor(name=family, maxVersions=1,
                                   configuration={"caffeine.count": "live" if counted else "off"})))
    store._families.pop(table, None)


def test_verify_reports_a_count_that_is_not_a_walk_of_its_row(hbase_store, make_table):
    """A count cell is kept only by the coprocessor's writes, never recomputed; a write it did
    not count (here: made while the family's counting was switched off; as well a region
    server without the coprocessor) would make a partial head look whole. ``caffeine verify``
    compares every stored count with the live cells it scanned."""
    from spark.verify import count_mismatches

    table = make_table({b"c": FamilySpec(counted=True)})
    hbase_store.put_rows(table, {b"ok": [Put(b"c", b"q%d" % i, 5, b"v") for i in range(4)],
                                 b"bad": [Put(b"c", b"q%d" % i, 5, b"v" if i else b"") for i in range(3)]})
    live = {"ok": {f"c:q{i}": b"v" for i in range(4)}, "bad": {"c:q1": b"v", "c:q2": b"v"}}
    assert count_mismatches(hbase_store, table, "c", live) == []

    _set_counted(hbase_store, table, b"c", False)
    hbase_store.put_rows(table, {b"bad": [Put(b"c", b"q9", 6, b"v")]})
    _set_counted(hbase_store, table, b"c", True)
    live["bad"]["c:q9"] = b"v"
    assert [(m.row, m.stored, m.walked) for m in count_mismatches(hbase_store, table, "c", live)] == [("bad", 2, 3)]


def _refusal_text(error) -> str:
    message = error.message
    return message.decode() if isinstance(message, bytes) else message


def test_clients_cannot_write_the_counts(hbase_store, make_table):
    """The stores refuse ``_n`` before sending; the coprocessor refuses any other client's
    write of it (here a raw Thrift2 put), and the row's other cells of that call with it."""
    table = make_table({b"c": FamilySpec(counted=True)})
    hbase_store.put_rows(table, {b"r": [Put(b"c", b"a", 5, b"v")]})
    with pytest.raises(ValueError, match="reserved"):
        hbase_store.put_rows(table, {b"r": [Put(COUNT_FAMILY, b"c", 6, b"9")]})
    t2 = hbase_store.t2
    put = t2.TPut(row=b"r", columnValues=[t2.TColumnValue(family=COUNT_FAMILY, qualifier=b"c", value=b"9", timestamp=1 << 60),
                                          t2.TColumnValue(family=b"c", qualifier=b"b", value=b"v", timestamp=6)])
    with pytest.raises(t2.TIOError) as refused:
        hbase_store.thrift2.call(lambda c: c.put(hbase_store._name(table), put))
    assert "CAFFEINE-COUNT" in _refusal_text(refused.value)
    got = hbase_store.read_prefix(table, [b"r"], b"c", 10)[b"r"]
    assert (got.cells, got.count) == (((b"a", b"v"),), 1)


@pytest.mark.parametrize("kind", ["increment", "append", "put with a time to live"])
def test_a_counted_family_refuses_what_its_count_could_not_follow(hbase_store, make_table, kind):
    """HBase computes an Increment's or Append's cells after the coprocessor's hook, and gives
    the count cells it adds to a mutation that mutation's time to live (they would expire and
    leave the count they moved): all three are refused on a counted family, the row's count
    and cells untouched. The same write to an uncounted family of the table applies."""
    import struct

    table = make_table({b"c": FamilySpec(counted=True), b"u": FamilySpec()})
    hbase_store.put_rows(table, {b"r": [Put(b"c", b"a", 5, b"v")]})
    t2, name = hbase_store.t2, hbase_store._name(table)

    def send(family):
        if kind == "increment":
            call = t2.TIncrement(row=b"r", columns=[t2.TColumnIncrement(family=family, qualifier=b"n", amount=1)])
            return hbase_store.thrift2.call(lambda c: c.increment(name, call))
        if kind == "append":
            call = t2.TAppend(row=b"r", columns=[t2.TColumnValue(family=family, qualifier=b"n", value=b"x")])
            return hbase_store.thrift2.call(lambda c: c.append(name, call))
        # At the server's now: a time to live runs from the cell's timestamp.
        call = t2.TPut(row=b"r", columnValues=[t2.TColumnValue(family=family, qualifier=b"n", value=b"x")],
                       attributes={b"_ttl": struct.pack(">q", 3_600_000)})
        return hbase_store.thrift2.call(lambda c: c.put(name, call))

    with pytest.raises(t2.TIOError) as refused:
        send(b"c")
    assert "CAFFEINE-COUNT" in _refusal_text(refused.value) and "is counted and takes no" in _refusal_text(refused.value)
    got = hbase_store.read_prefix(table, [b"r"], b"c", 10)[b"r"]
    assert (got.cells, got.count) == (((b"a", b"v"),), 1) == (got.cells, _walked_count(hbase_store, table, b"r"))
    send(b"u")
    assert [c.value for c in hbase_store.read_row(table, b"r", ReadSpec(families=(b"u",))).newest_cells()] != []


def _block_sizes(store, table) -> dict[bytes, int]:
    t2 = store.t2
    descriptor = store.thrift2.call(lambda c: c.getTableDescriptor(t2.TTableName(qualifier=store._name(table))))
    return {cf.name: cf.blockSize for cf in descriptor.columns}


def test_a_familys_block_size_is_the_tables_and_serving_tables_use_small_blocks(hbase_store, make_table):
    """``FamilySpec.block_size`` reaches HBase, counted or not (HBase's 64 KB otherwise), and
    serving tables, read by named columns, are created with ``serving.BLOCK_SIZE`` blocks."""
    from caffeine.percolator.serving import BLOCK_SIZE, ServingTable

    plain = make_table({b"p": FamilySpec(block_size=4096), b"q": FamilySpec()})
    assert _block_sizes(hbase_store, plain)[b"p"] == 4096
    assert _block_sizes(hbase_store, plain)[b"q"] == 65536
    counted = make_table({b"c": FamilySpec(counted=True, block_size=16384)})
    assert _block_sizes(hbase_store, counted)[b"c"] == 16384
    name = "cf_" + uuid.uuid4().hex[:6]
    try:
        ServingTable(hbase_store, name, ["p", "i"], counted=["i"]).create()
        sizes = _block_sizes(hbase_store, name)
        assert (sizes[b"p"], sizes[b"i"]) == (BLOCK_SIZE, BLOCK_SIZE) and BLOCK_SIZE < 65536
    finally:
        hbase_store.drop_table(name)


def _layouts(store, table) -> dict[bytes, tuple]:
    """Each family's (Bloom filter, data block encoding), as HBase names them."""
    t2 = store.t2
    descriptor = store.thrift2.call(lambda c: c.getTableDescriptor(t2.TTableName(qualifier=store._name(table))))
    return {cf.name: (t2.TBloomFilterType._VALUES_TO_NAMES[cf.bloomnFilterType],
                      t2.TDataBlockEncoding._VALUES_TO_NAMES.get(cf.dataBlockEncoding, "NONE"))
            for cf in descriptor.columns}


def test_the_counts_of_a_counted_family_are_kept_in_row_indexed_blocks(hbase_store, make_table):
    """The coprocessor seeks a row's count cell on every write to a counted family
    (bench/bench_counted_writes.py): the count family's blocks index their rows; the
    families declared keep what their specs say."""
    table = make_table({b"c": FamilySpec(counted=True), b"p": FamilySpec(bloom="ROWCOL")})
    layouts = _layouts(hbase_store, table)
    assert layouts[COUNT_FAMILY] == ("ROW", "ROW_INDEX_V1")
    assert layouts[b"c"] == ("ROW", "NONE")
    assert layouts[b"p"] == ("ROWCOL", "NONE")


def test_a_serving_table_created_before_gets_row_indexed_counts_in_place(hbase_store):
    """A serving table whose counts were created in plain blocks is upgraded by its next
    ``create``, once, its cells, counts and configuration kept; the store files written before
    keep their layout and are read alongside the new ones."""
    from caffeine.percolator.serving import ServingTable

    name = "cf_" + uuid.uuid4().hex[:6]
    serving = ServingTable(hbase_store, name, ["p", "i"], counted=["i"])
    try:
        serving.create()
        t2, tname = hbase_store.t2, hbase_store.t2.TTableName(qualifier=hbase_store._name(name))
        descriptor = hbase_store.thrift2.call(lambda c: c.getTableDescriptor(tname))
        for column in descriptor.columns:  # the count family as it was created before
            if column.name == COUNT_FAMILY:
                column.dataBlockEncoding = t2.TDataBlockEncoding.NONE
                hbase_store.thrift2.call(lambda c, column=column: c.modifyColumnFamily(tname, column))
        assert _layouts(hbase_store, name)[COUNT_FAMILY] == ("ROW", "NONE")
        serving.put({f"w{i}": {"i:doc-a": b"x", "p:doc-a": b"y"} for i in range(5)}, ts=10)
        before = _configurations(hbase_store, name)

        serving.create()
        assert _layouts(hbase_store, name)[COUNT_FAMILY] == ("ROW", "ROW_INDEX_V1")
        assert _configurations(hbase_store, name) == before  # the count's configuration kept
        assert hbase_store.upgrade_families(name, {b"p": FamilySpec(block_size=8192),
                                                   b"i": FamilySpec(counted=True, block_size=8192)}) == []
        serving.put({"w0": {"i:doc-b": b"x"}, "w1": {"i:doc-a": b""}}, ts=11)
        got = hbase_store.read_prefix(name, [b"w0", b"w1", b"w2"], b"i", 5)
        assert [got[k].count for k in (b"w0", b"w1", b"w2")] == [2, 0, 1]
        assert all(got[k].count == _walked_count(hbase_store, name, k, b"i") for k in got)
    finally:
        hbase_store.drop_table(name)


def _configurations(store, table) -> dict[bytes, dict]:
    t2 = store.t2
    descriptor = store.thrift2.call(lambda c: c.getTableDescriptor(t2.TTableName(qualifier=store._name(table))))
    return {cf.name: dict(cf.configuration or {}) for cf in descriptor.columns}


def test_a_table_dropped_and_made_again_under_its_name_counts_from_nothing(hbase_store):
    """The region server remembers count cells between writes (coprocessor/.../CountCache.java),
    per region: a table made again under the same name has new regions and starts from its own
    (empty) rows, whatever the old table's rows held."""
    name = "cf_again_" + uuid.uuid4().hex[:6]
    key = b"row"
    try:
        for round_, cells in enumerate((7, 2)):
            hbase_store.create_table(name, {b"c": FamilySpec(counted=True)})
            for q in range(cells):   # one write per cell: each reads the count the last one wrote
                hbase_store.put_rows(name, {key: [Put(b"c", b"q%02d" % q, 5 + round_, b"v")]})
            assert hbase_store.read_prefix(name, [key], b"c", 0)[key].count == cells == _walked_count(hbase_store, name, key)
            hbase_store.drop_table(name)
    finally:
        if name in hbase_store.list_tables():
            hbase_store.drop_table(name)


def _reopen(store, table) -> None:
    """Close and open the table's regions again (HBase reopens them on a descriptor change,
    flushing their memstores first), as a move to another server or a restart would."""
    _set_table_attribute(store, table, b"caffeine.test.reopened", uuid.uuid4().hex.encode())


@pytest.mark.parametrize("reopened", [False, True], ids=["same-region", "reopened"])
def test_writes_over_columns_the_region_holds_count_what_they_change(hbase_store, make_table, reopened):
    """A counted write reads only the columns its region may hold (coprocessor/.../CountedColumns.java:
    a filter of every column written since the region opened, plus those it held then). Over
    columns written before, in this region or before it was reopened (from its store files): a
    put below a column's newest timestamp changes nothing, an empty value over a live cell
    counts one less, a new column one more."""
    table = make_table(SPEC)
    rows = CountedRows(hbase_store, table)
    rows.write_first()
    if reopened:
        _reopen(hbase_store, table)
    rows.write_after_reopen()
    assert rows.counted() == rows.expected() == rows.walked()


def test_writes_over_columns_written_moments_before_count_what_they_change(hbase_store, make_table):
    """Round after round over the same columns in one region, as a page's re-exports write
    over its earlier export's columns (each column rewritten above, at or below its newest
    timestamp, live or empty, or left alone; new columns now and then): the counts, kept from
    the region's remembered count cells (CountCache) and its filter of held columns
    (CountedColumns), must equal the model's and a walk's after every round."""
    table = make_table(SPEC)
    rows = CountedRows(hbase_store, table)
    rows.write_first()
    rng = random.Random(7)
    for round_no in range(12):
        rows.write_round(rng)
        assert rows.counted() == rows.expected() == rows.walked(), f"after round {round_no}"
