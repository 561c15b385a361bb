"""HBase-only: a churn family (``FamilySpec.churn``, Percolator's notifications) does not make
its scans walk what was deleted from it long ago.

HBase keeps a deleted cell and its delete marker until a major compaction, and a small family
stays in memory while its region's big families flush, so without help every notification ever
cleared is walked by each scan of the notify family (320 ms for a scan that lists nothing after
20,000 pages). The coprocessor flushes and major-compacts a churn family on its own once its
memory holds ``CHURN_CELLS`` cells (coprocessor/.../ChurnCompactor.java).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
import uuid

import pytest

from caffeine.percolator.layout import FAMILIES, NOTIFY, create_table
from caffeine.storage import DeleteUpTo, Put, ReadSpec
from caffeine.storage.hbase import CHURN_CELLS, CHURN_CONFIG_KEY, EARLIER_CHURN_CELLS
from support.session import require_coprocessor

pytestmark = pytest.mark.hbase

ROWS = 3 * CHURN_CELLS  # each written once and cleared once: 6 x the threshold's cells
LIVE = 10  # rows whose notification is still pending


def _scan_ms(store, table: str) -> tuple[float, int]:
    """Median wall time of three notify-family scans (as a worker lists its work), and the
    number of notifications listed."""
    times, listed = [], 0
    for _ in range(3):
        began = time.perf_counter()
        listed = sum(len(row.family(NOTIFY)) for row in store.scan(table, b"", None, ReadSpec(families=(NOTIFY,)),
                                                                    batch_size=512))
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times), listed


def _descriptor(store, table: str):
    """(Thrift2 table name, table descriptor) of ``table``, as HBase has it now."""
    tname = store.t2.TTableName(qualifier=store._name(table))
    return tname, store.thrift2.call(lambda c: c.getTableDescriptor(tname))


def _churn_config(store, table: str) -> dict[bytes, dict]:
    _, descriptor = _descriptor(store, table)
    return {c.name: (dict(c.configuration or {}), c.maxVersions, c.inMemory, c.bloomnFilterType)
            for c in descriptor.columns}


def _set_churn_threshold(store, table: str, value: str) -> None:
    tname, descriptor = _descriptor(store, table)
    column = next(c for c in descriptor.columns if c.name == NOTIFY)
    column.configuration = {**(column.configuration or {}), CHURN_CONFIG_KEY: value}
    store.thrift2.call(lambda c: c.modifyColumnFamily(tname, column))


@pytest.mark.parametrize("threshold", [*sorted(EARLIER_CHURN_CELLS), "777"])
def test_an_earlier_default_churn_threshold_is_moved_to_todays_and_a_tuned_one_stays(hbase_store, threshold):
    """A table created by an earlier release has its default churn threshold; its next
    install moves it to today's, while a value someone set stays as it is."""
    table = "churn_threshold_" + uuid.uuid4().hex[:6]
    create_table(hbase_store, table)
    _set_churn_threshold(hbase_store, table, threshold)
    assert create_table(hbase_store, table, exist_ok=True) is False
    expected = str(CHURN_CELLS) if threshold in EARLIER_CHURN_CELLS else threshold
    assert _churn_config(hbase_store, table)[NOTIFY][0] == {CHURN_CONFIG_KEY: expected}
    assert hbase_store.upgrade_families(table, FAMILIES) == []  # once


@pytest.mark.parametrize("created", ["now", "before churn families"])
def test_cleared_notifications_stop_costing_the_notify_scan(hbase_store, created):
    """Also for a table created before notify was a churn family: its next install (which
    ``create_table(exist_ok=True)`` is) upgrades the family, keeping its other settings."""
    require_coprocessor(hbase_store)
    table = "churn_" + uuid.uuid4().hex[:6]
    empty = "churn_empty_" + uuid.uuid4().hex[:6]
    if created == "now":
        create_table(hbase_store, table)
    else:
        hbase_store.create_table(table, {**FAMILIES, NOTIFY: dataclasses.replace(FAMILIES[NOTIFY], churn=False)})
        before = _churn_config(hbase_store, table)
        assert CHURN_CONFIG_KEY not in before[NOTIFY][0]
        assert create_table(hbase_store, table, exist_ok=True) is False
        after = _churn_config(hbase_store, table)
        assert after[NOTIFY][0] == {CHURN_CONFIG_KEY: str(CHURN_CELLS)}
        assert after[NOTIFY][1:] == before[NOTIFY][1:]  # versions, in-memory, bloom: as they were
        assert {k: v for k, v in after.items() if k != NOTIFY} == {k: v for k, v in before.items() if k != NOTIFY}
        assert hbase_store.upgrade_families(table, FAMILIES) == []  # once
        assert hbase_store.families(table) == tuple(sorted(FAMILIES))
    create_table(hbase_store, empty)
    keys = [b"row-%06d" % i for i in range(ROWS)]
    for start in range(0, ROWS, 1000):
        chunk = keys[start:start + 1000]
        hbase_store.put_rows(table, {k: [Put(NOTIFY, b"page", 1000 + i, b"x")] for i, k in enumerate(chunk)})
        hbase_store.delete_rows(table, {k: [DeleteUpTo(NOTIFY, b"page", 1000 + i)]
                                        for i, k in enumerate(chunk) if k not in keys[:LIVE]})

    baseline, _ = _scan_ms(hbase_store, empty)
    deadline = time.monotonic() + 60
    while True:
        cost, listed = _scan_ms(hbase_store, table)
        assert listed == LIVE  # a flush or compaction keeps every pending notification
        if cost <= 3 * baseline + 5:
            break
        assert time.monotonic() < deadline, (
            f"a notify scan listing {LIVE} notifications still takes {cost:.1f} ms after {ROWS - LIVE} were "
            f"cleared, against {baseline:.1f} ms for an empty table: the cleared ones are still walked")
        time.sleep(1)
