"""Snapshot isolation, one test per anomaly, named after Hermitage's.

Each test sets up x=10, y=20 (Hermitage's starting state) in fresh rows and interleaves
transactions step by step. SI forbids G0, G1a, G1b, G1c, OTV, PMP, P4 (lost update) and
G-single (read skew); it allows G2-item (write skew), which the last test demonstrates.
Runs on the real HBase and on the in-memory store.
"""

from __future__ import annotations

import uuid

import pytest

from caffeine.percolator import testing as txn_steps
from caffeine.percolator import CommitConflict

TABLE = "iso"


@pytest.fixture
def env(cluster):
    cluster.create_table(TABLE)
    x, y = (b"x-" + uuid.uuid4().hex.encode(), b"y-" + uuid.uuid4().hex.encode())
    with cluster.begin() as txn:
        txn.set(TABLE, x, "v", b"10")
        txn.set(TABLE, y, "v", b"20")
    return cluster, x, y


def value(cluster, row):
    with cluster.begin() as txn:
        return txn.get(TABLE, row, "v")


def test_g0_write_cycles_are_prevented(env):
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    t1.set(TABLE, x, "v", b"11")
    t2.set(TABLE, x, "v", b"12")
    t1.set(TABLE, y, "v", b"21")
    t2.set(TABLE, y, "v", b"22")
    t1.commit()
    with pytest.raises(CommitConflict):
        t2.commit()
    assert (value(cluster, x), value(cluster, y)) == (b"11", b"21")


def test_g1a_aborted_reads_are_prevented(env):
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    t1.set(TABLE, x, "v", b"101")
    txn_steps.prewrite(t1)  # its data is in the table now, behind a lock
    t1.rollback()
    assert t2.get(TABLE, x, "v") == b"10"
    t2.commit()
    assert value(cluster, x) == b"10"


def test_g1b_intermediate_reads_are_prevented(env):
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    t1.set(TABLE, x, "v", b"101")
    assert t2.get(TABLE, x, "v") == b"10"
    t1.set(TABLE, x, "v", b"11")
    t1.commit()
    assert t2.get(TABLE, x, "v") == b"10"
    assert value(cluster, x) == b"11"


def test_g1c_circular_information_flow_is_prevented(env):
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    t1.set(TABLE, x, "v", b"11")
    t2.set(TABLE, y, "v", b"22")
    assert t1.get(TABLE, y, "v") == b"20"
    assert t2.get(TABLE, x, "v") == b"10"
    t1.commit()
    t2.commit()


def test_otv_observed_transaction_vanishes_is_prevented(env):
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    t1.set(TABLE, x, "v", b"11")
    t1.set(TABLE, y, "v", b"19")
    t2.set(TABLE, x, "v", b"12")
    t2.set(TABLE, y, "v", b"18")
    t1.commit()
    t3 = cluster.begin()
    assert t3.get(TABLE, x, "v") == b"11"
    with pytest.raises(CommitConflict):
        t2.commit()
    assert t3.get(TABLE, y, "v") == b"19"


def test_pmp_predicate_many_preceders_is_prevented(env):
    cluster, x, y = env
    prefix = b"pmp-" + uuid.uuid4().hex.encode() + b"-"
    with cluster.begin() as setup:
        setup.set(TABLE, prefix + b"1", "v", b"10")
        setup.set(TABLE, prefix + b"2", "v", b"20")
    t1, t2 = cluster.begin(), cluster.begin()
    matching = lambda txn: [r for r, cols in txn.scan(TABLE, prefix, prefix + b"\xff", ["v"]) if cols["v"] == b"30"]
    assert matching(t1) == []
    t2.set(TABLE, prefix + b"3", "v", b"30")
    t2.commit()
    assert matching(t1) == []
    assert [r for r, _ in cluster.begin().scan(TABLE, prefix, prefix + b"\xff")] == [prefix + b"1", prefix + b"2", prefix + b"3"]


def test_p4_lost_update_is_prevented(env):
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    assert t1.get(TABLE, x, "v") == b"10"
    assert t2.get(TABLE, x, "v") == b"10"
    t1.set(TABLE, x, "v", b"11")
    t2.set(TABLE, x, "v", b"11")
    t1.commit()
    with pytest.raises(CommitConflict):
        t2.commit()


def test_g_single_read_skew_is_prevented(env):
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    assert t1.get(TABLE, x, "v") == b"10"
    assert t2.get(TABLE, x, "v") == b"10"
    assert t2.get(TABLE, y, "v") == b"20"
    t2.set(TABLE, x, "v", b"12")
    t2.set(TABLE, y, "v", b"18")
    t2.commit()
    assert t1.get(TABLE, y, "v") == b"20"
    t1.commit()


def test_g2_item_write_skew_is_allowed_by_snapshot_isolation(env):
    """SI is not serializable: both commit, and x + y no longer obeys a rule each checked."""
    cluster, x, y = env
    t1, t2 = cluster.begin(), cluster.begin()
    assert (t1.get(TABLE, x, "v"), t1.get(TABLE, y, "v")) == (b"10", b"20")
    assert (t2.get(TABLE, x, "v"), t2.get(TABLE, y, "v")) == (b"10", b"20")
    t1.set(TABLE, y, "v", b"0")
    t2.set(TABLE, x, "v", b"0")
    t1.commit()
    t2.commit()
    assert (value(cluster, x), value(cluster, y)) == (b"0", b"0")


def test_a_transaction_reads_its_own_writes_and_deletes(env):
    cluster, x, y = env
    with cluster.begin() as txn:
        txn.set(TABLE, x, "v", "mine")
        txn.delete(TABLE, y, "v")
        assert txn.get(TABLE, x, "v") == b"mine"
        assert txn.get(TABLE, y, "v") is None
        assert dict(txn.scan(TABLE, x, x + b"\x00")) == {x: {"v": b"mine"}}
    assert value(cluster, y) is None
    assert list(cluster.begin().scan(TABLE, y, y + b"\x00")) == []


def test_get_all_rows_reads_whole_rows_in_one_snapshot_with_own_writes(env):
    cluster, x, y = env
    z = b"z-" + uuid.uuid4().hex.encode()  # a row nobody wrote
    with cluster.begin() as txn:
        txn.set(TABLE, y, "w", b"21")
    with cluster.begin() as txn:
        txn.set(TABLE, x, "extra", b"mine")
        txn.delete(TABLE, y, "v")
        later = cluster.begin()
        # Rows in any order, repeats folded; own writes and deletes show; a missing row is {}.
        assert txn.get_all_rows(TABLE, [y, z, x, y]) == {
            y: {"w": b"21"}, z: {}, x: {"extra": b"mine", "v": b"10"}}
        assert txn.get_all(TABLE, x) == {"extra": b"mine", "v": b"10"}
    # A snapshot taken before that commit does not see it.
    assert later.get_all_rows(TABLE, [x, y]) == {x: {"v": b"10"}, y: {"v": b"20", "w": b"21"}}



def test_a_row_read_whole_again_costs_no_read_and_shows_later_own_writes(env, monkeypatch):
    cluster, x, y = env
    reads = []
    real = cluster.store.read_rows
    monkeypatch.setattr(cluster.store, "read_rows", lambda table, rows, spec: reads.append(list(rows)) or real(table, rows, spec))
    with cluster.begin() as txn:
        assert txn.get_all_rows(TABLE, [x]) == {x: {"v": b"10"}}
        with cluster.begin() as other:  # committed after this snapshot: never seen by it
            other.set(TABLE, x, "v", b"11")
        txn.set(TABLE, x, "mine", b"1")
        txn.delete(TABLE, x, "v")
        assert txn.get_all_rows(TABLE, [x, y]) == {x: {"mine": b"1"}, y: {"v": b"20"}}
        txn.set(TABLE, x, "v", b"12")
        assert txn.get_all(TABLE, x) == {"mine": b"1", "v": b"12"}
        assert txn.get_all(TABLE, y) == {"v": b"20"}
        assert [len(rows) for rows in reads] == [1, 1], "x, then y alone: each row read once"
        txn.rollback()

def test_present_columns_names_what_get_all_would_without_the_values(env):
    cluster, x, y = env
    with cluster.begin() as txn:
        for c in ("a", "b", "gone"):
            txn.set(TABLE, x, c, b"1")
    with cluster.begin() as txn:
        txn.delete(TABLE, x, "gone")
    rolled = cluster.begin()  # a rollback record on top of "a": the read must look below it
    rolled.set(TABLE, x, "a", b"2")
    txn_steps.prewrite(rolled)
    rolled.rollback()
    locked = cluster.begin()  # a committed primary whose secondary lock is still in x
    locked.set(TABLE, y, "v", b"21")
    locked.set(TABLE, x, "c", b"3")
    txn_steps.prewrite(locked)
    txn_steps.commit_primary(locked)
    with cluster.begin() as txn:
        assert txn.present_columns(TABLE, x) == {"v", "a", "b", "c"} == set(txn.get_all(TABLE, x))
        txn.delete(TABLE, x, "b")
        txn.set(TABLE, x, "new", b"4")
        later = cluster.begin()
        assert txn.present_columns(TABLE, x) == {"v", "a", "c", "new"} == set(txn.get_all(TABLE, x))
        assert txn.present_columns(TABLE, b"nobody-" + x) == set()
    assert later.present_columns(TABLE, x) == {"v", "a", "b", "c"}  # its snapshot: before that commit


def test_context_manager_rolls_back_on_error(env):
    cluster, x, y = env
    with pytest.raises(RuntimeError):
        with cluster.begin() as txn:
            txn.set(TABLE, x, "v", b"never")
            raise RuntimeError("boom")
    assert value(cluster, x) == b"10"


def test_run_retries_on_conflict(env):
    cluster, x, y = env
    attempts = []

    def increment(txn):
        n = int(txn.get(TABLE, x, "v"))
        if not attempts:
            # A competing transaction commits between our read and our commit.
            with cluster.begin() as other:
                other.set(TABLE, x, "v", b"%d" % (n + 100))
        attempts.append(n)
        txn.set(TABLE, x, "v", b"%d" % (n + 1))

    cluster.run(increment)
    assert attempts == [10, 110]
    assert value(cluster, x) == b"111"


def test_a_snapshot_at_an_earlier_timestamp_reads_that_snapshot_and_refuses_writes(env):
    from caffeine.percolator import TransactionClosed

    cluster, x, y = env
    earlier = cluster.begin().start_ts
    with cluster.begin() as txn:
        txn.set(TABLE, x, "v", b"later")
    snap = cluster.snapshot(earlier)
    assert snap.get(TABLE, x, "v") == b"10"
    assert not hasattr(snap, "set") and not hasattr(snap, "commit")  # a Snapshot only reads
    snap.close()
    with pytest.raises(TransactionClosed):
        snap.get(TABLE, x, "v")


def test_row_keys_names_the_rows_a_column_was_written_in_at_the_snapshot(cluster):
    table = "keys_" + uuid.uuid4().hex[:8]
    cluster.create_table(table)
    with cluster.begin() as txn:
        txn.set(table, b"b", "v", b"1")
        txn.set(table, b"a", "v", b"1")
        txn.set(table, b"c", "other", b"1")
    with cluster.begin() as txn:
        txn.delete(table, b"b", "v")  # a deleted value still names its row
    before = cluster.begin().start_ts
    with cluster.begin() as txn:
        txn.set(table, b"d", "v", b"after the snapshot")
    assert list(cluster.row_keys(table, "v", before)) == [b"a", b"b"]
    assert list(cluster.row_keys(table, "v", cluster.begin().start_ts)) == [b"a", b"b", b"d"]
