"""Protocol steps, one at a time, on the real HBase and on the in-memory store.

Given / when / then, in the style of TiKV's action tests. Timestamps are small integers here;
only the TTL tests need realistic ones (the physical part is what a TTL is judged by).
"""

from __future__ import annotations

import uuid

import pytest

from caffeine.oracle.timestamps import compose
from caffeine.percolator import layout
from caffeine.percolator.records import CellRef, Committed, Kind, Locked, RolledBack, decode_notify
from caffeine.storage import ReadSpec
from support.percolator_helpers import (
    TTL,
    check_status,
    commit,
    must_commit,
    must_commit_fail,
    must_get,
    must_get_blocked,
    must_have_data,
    must_have_no_data,
    must_locked,
    must_notified,
    must_prewrite,
    must_prewrite_conflict,
    must_prewrite_locked,
    must_prewrite_rolled_back,
    must_rollback,
    must_rollback_fail,
    must_rolled_back,
    must_unlocked,
    must_written,
)

_tables: dict[int, str] = {}


@pytest.fixture
def t(store):
    name = _tables.get(id(store))
    if name is None or name not in store.list_tables():
        name = "steps_" + uuid.uuid4().hex[:6]
        layout.create_table(store, name)
        _tables[id(store)] = name
    return store, name


@pytest.fixture
def row():
    return b"k-" + uuid.uuid4().hex.encode()


def test_prewrite_then_commit(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1", "d": b"w1"}, 10)
    must_locked(store, table, row, "c", 10)
    must_have_data(store, table, row, "c", 10, b"v1")
    must_get(store, table, row, "c", 9, None)
    must_commit(store, table, row, ["c", "d"], 10, 15)
    must_unlocked(store, table, row, "c")
    must_written(store, table, row, "c", 15, 10)
    must_written(store, table, row, "d", 15, 10)
    must_get(store, table, row, "c", 14, None)
    must_get(store, table, row, "c", 15, b"v1")
    must_get(store, table, row, "d", 100, b"w1")


def test_locks_name_the_primary(t, row):
    store, table = t
    primary = CellRef(table, b"elsewhere", "p")
    must_prewrite(store, table, row, {"c": b"v"}, 10, primary=primary)
    lock = must_locked(store, table, row, "c", 10)
    assert lock.primary == primary and lock.kind is Kind.PUT and lock.ttl_ms == TTL


def test_prewrite_conflicts_with_a_write_committed_after_start(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    must_commit(store, table, row, ["c"], 10, 20)
    conflict = must_prewrite_conflict(store, table, row, {"c": b"v2"}, 15)
    assert conflict.commit_ts == 20
    must_prewrite(store, table, row, {"c": b"v3"}, 25)


def test_prewrite_meets_a_lock_at_any_timestamp(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    assert must_prewrite_locked(store, table, row, {"c": b"v2"}, 5).start_ts == 10
    assert must_prewrite_locked(store, table, row, {"c": b"v2"}, 30).start_ts == 10


def test_prewrite_is_idempotent(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    must_commit(store, table, row, ["c"], 10, 11)


def test_prewrite_writes_no_notification(t, row):
    store, table = t
    # Notify cells are written at commit_ts by the transaction, before its commit point.
    must_prewrite(store, table, row, {"c": b"v"}, 10)
    assert _notify_cell(store, table, row, "c") is None


def _notify_cell(store, table, row, column):
    return store.read_row(table, row, ReadSpec(columns=((layout.NOTIFY, column.encode()),))).latest(
        layout.NOTIFY, column.encode())


def test_commit_is_idempotent(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    must_commit(store, table, row, ["c"], 10, 11)
    result = commit(store, table, row, ["c"], 10, 99)
    assert result == Committed(11), "a repeated commit reports the original commit_ts"
    must_written(store, table, row, "c", 11, 10)


def test_commit_after_rollback_fails(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    must_rollback(store, table, row, ["c"], 10)
    must_commit_fail(store, table, row, ["c"], 10, 12)
    must_get(store, table, row, "c", 100, None)


def test_prewrite_after_rollback_fails(t, row):
    store, table = t
    # The cleaner got there first (no lock yet): the rollback record fences the late prewrite.
    must_rollback(store, table, row, ["c"], 10)
    must_rolled_back(store, table, row, "c", 10)
    must_prewrite_rolled_back(store, table, row, {"c": b"late"}, 10)
    must_unlocked(store, table, row, "c")


def test_rollback_of_a_committed_transaction_fails(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    must_commit(store, table, row, ["c"], 10, 11)
    assert must_rollback_fail(store, table, row, ["c"], 10) == 11
    must_get(store, table, row, "c", 11, b"v1")


def test_rollback_is_idempotent_and_cleans_lock_and_data(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    must_rollback(store, table, row, ["c"], 10)
    must_rollback(store, table, row, ["c"], 10)
    must_unlocked(store, table, row, "c")
    must_have_no_data(store, table, row, "c", 10)
    must_rolled_back(store, table, row, "c", 10)


def test_read_waits_for_locks_at_or_below_start_only(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v0"}, 5)
    must_commit(store, table, row, ["c"], 5, 6)
    must_prewrite(store, table, row, {"c": b"v1"}, 10)
    assert must_get_blocked(store, table, row, "c", 10).start_ts == 10
    assert must_get_blocked(store, table, row, "c", 50).start_ts == 10
    must_get(store, table, row, "c", 9, b"v0")


def test_read_follows_the_write_record_to_older_data(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"old"}, 10)
    must_commit(store, table, row, ["c"], 10, 11)
    must_prewrite(store, table, row, {"c": b"new"}, 20)
    must_commit(store, table, row, ["c"], 20, 30)
    # At 25 the newest data at or below 25 is "new" (@20), but its write is @30: invisible.
    must_get(store, table, row, "c", 25, b"old")
    must_get(store, table, row, "c", 30, b"new")


def test_delete_hides_the_value(t, row):
    store, table = t
    must_prewrite(store, table, row, {"c": b"v"}, 10)
    must_commit(store, table, row, ["c"], 10, 11)
    must_prewrite(store, table, row, {"c": None}, 20)
    lock = must_locked(store, table, row, "c", 20)
    assert lock.kind is Kind.DELETE
    must_commit(store, table, row, ["c"], 20, 21)
    must_written(store, table, row, "c", 21, 20, Kind.DELETE)
    must_get(store, table, row, "c", 20, b"v")
    must_get(store, table, row, "c", 21, None)


def test_check_txn_status(t, row):
    store, table = t
    now = 1_800_000_000_000
    start = compose(now)
    cell = CellRef(table, row, "p")
    must_prewrite(store, table, row, {"p": b"v"}, start)
    lock = must_locked(store, table, row, "p", start)
    # Live owner, TTL not run out: wait.
    assert check_status(store, cell, start, now + TTL - 1, True) == Locked(lock)
    # TTL not run out, owner unknown: still wait.
    assert check_status(store, cell, start, now + 1, None) == Locked(lock)
    # Owner gone: roll back at once, with a rollback record.
    assert check_status(store, cell, start, now + 1, False) == RolledBack()
    must_unlocked(store, table, row, "p")
    must_rolled_back(store, table, row, "p", start)


def test_check_txn_status_expired_committed_and_missing(t, row):
    store, table = t
    now = 1_800_000_000_000
    s1, s2, s3 = compose(now), compose(now, 5), compose(now, 9)
    expired = CellRef(table, row, "x")
    must_prewrite(store, table, row, {"x": b"v"}, s1)
    assert check_status(store, expired, s1, now + TTL + 1, True) == RolledBack()
    committed = CellRef(table, row, "y")
    must_prewrite(store, table, row, {"y": b"v"}, s2)
    must_commit(store, table, row, ["y"], s2, s2 + 1)
    assert check_status(store, committed, s2, now, True) == Committed(s2 + 1)
    missing = CellRef(table, row, "z")
    assert check_status(store, missing, s3, now, True) == RolledBack()
    must_rolled_back(store, table, row, "z", s3)
    must_prewrite_rolled_back(store, table, row, {"z": b"late"}, s3)
