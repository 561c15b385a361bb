"""Garbage collection keeps every version a reader at or above the horizon can see."""

from __future__ import annotations

import uuid

import pytest

from caffeine.percolator import testing as txn_steps
from caffeine.percolator.gc import collect_garbage
from caffeine.percolator.errors import SnapshotTooOld
from caffeine.percolator.layout import DATA, LOCK, WRITE
from caffeine.storage import Delete, ReadSpec
from support.cli_helpers import assert_no_stack_trace, cli_env, run_cli

TABLE = "gc"


def versions(store, row, family):
    return [c.ts for c in store.read_row(TABLE, row, ReadSpec(families=(family,), versions=100)).versions(family, b"v")]


def test_gc_keeps_the_newest_committed_version_below_the_horizon_and_everything_above(cluster):
    cluster.create_table(TABLE)
    row = b"gc-" + uuid.uuid4().hex.encode()
    commits = []
    for i in range(4):
        with cluster.begin() as txn:
            txn.set(TABLE, row, "v", b"v%d" % i)
        commits.append(txn.commit_ts)
    reader = cluster.begin()  # pins the snapshot after the 4th write
    rolled = cluster.begin()
    rolled.set(TABLE, row, "v", b"never")
    txn_steps.prewrite(rolled)
    rolled.rollback()
    with cluster.begin() as txn:
        txn.set(TABLE, row, "v", b"v4")
    horizon = reader.start_ts
    report = collect_garbage(cluster, horizon, [TABLE], publish_wait_s=0)
    assert report.write_versions_deleted == 3 and report.locked_cells_skipped == 0
    assert reader.get(TABLE, row, "v") == b"v3"
    assert cluster.begin().get(TABLE, row, "v") == b"v4"
    # Kept: v3's record (newest at or below the horizon), the rollback record and v4 above it.
    assert len(versions(cluster.store, row, WRITE)) == 3
    assert len(versions(cluster.store, row, DATA)) == 2
    again = collect_garbage(cluster, horizon, [TABLE], publish_wait_s=0)
    assert again.write_versions_deleted == 0


def test_gc_skips_locked_cells(cluster):
    cluster.create_table(TABLE)
    row = b"gcl-" + uuid.uuid4().hex.encode()
    for i in range(3):
        with cluster.begin() as txn:
            txn.set(TABLE, row, "v", b"v%d" % i)
    pending = cluster.begin()
    pending.set(TABLE, row, "v", b"pending")
    txn_steps.prewrite(pending)
    # The horizon is below every open transaction (as gc_horizon makes it).
    report = collect_garbage(cluster, pending.start_ts - 1, [TABLE], publish_wait_s=0)
    assert report.locked_cells_skipped >= 1
    assert len(versions(cluster.store, row, WRITE)) == 3
    pending.rollback()


def test_a_snapshot_below_the_safe_point_fails_loudly_instead_of_reading_collected_versions(cluster):
    from caffeine.percolator import SnapshotTooOld

    cluster.create_table(TABLE)
    row = b"gcs-" + uuid.uuid4().hex.encode()
    with cluster.begin() as txn:
        txn.set(TABLE, row, "v", b"v0")
    stalled = cluster.begin()  # e.g. a process paused past its owner grace: not in the horizon
    with cluster.begin() as txn:
        txn.set(TABLE, row, "v", b"v1")
    collect_garbage(cluster, cluster.oracle.get_timestamp(), [TABLE], publish_wait_s=0)
    with pytest.raises(SnapshotTooOld):
        stalled.get(TABLE, row, "v")
    stalled.rollback()
    assert cluster.begin().get(TABLE, row, "v") == b"v1"


def test_another_process_sees_the_safe_point_within_its_max_age(cluster):
    """A second client over the same store: its copy of the safe point is refreshed before
    use once older than ``safe_point_max_age_ms``, which GC's wait outlasts."""
    from caffeine.percolator import SnapshotTooOld
    from caffeine.percolator.cluster import Cluster

    cluster.create_table(TABLE)
    other = Cluster(cluster.store, cluster.oracle, cluster.settings)
    try:
        old = other.begin()
        old.get(TABLE, b"x", "v")  # its copy of the safe point is fresh now
        collect_garbage(cluster, cluster.oracle.get_timestamp(), [TABLE])  # waits max age + 1 s
        with pytest.raises(SnapshotTooOld):
            old.get(TABLE, b"x", "v")
        old.rollback()
    finally:
        other.executor.shutdown(wait=True)
        other.owners.close()


def test_gc_touches_only_percolator_tables_and_reports_the_rest_as_skipped(fresh_cluster):
    """Serving tables (the index, the batch job's tables) have no lock or write family; GC
    must leave them alone instead of failing on them."""
    from spark.hbase_io import BATCH_TABLES, recreate_batch_tables

    cluster = fresh_cluster
    cluster.create_table(TABLE)
    row = b"gct-" + uuid.uuid4().hex.encode()
    for i in range(3):
        with cluster.begin() as txn:
            txn.set(TABLE, row, "v", b"v%d" % i)
    recreate_batch_tables(cluster.store)  # exactly the tables `caffeine batch` creates
    cluster.serving("postings", ["p"]).put({b"term": {"p:url": b"1"}}, ts=cluster.oracle.get_timestamp())
    report = collect_garbage(cluster, cluster.oracle.get_timestamp(), publish_wait_s=0)
    assert report.tables == [TABLE]
    assert report.write_versions_deleted == 2
    batch_names = {batch.name for batch in BATCH_TABLES.values()}
    assert set(report.skipped) == batch_names | {"postings"}
    # Named explicitly, a non-Percolator table is skipped the same way.
    named = collect_garbage(cluster, cluster.oracle.get_timestamp(), ["batch_docstats", TABLE], publish_wait_s=0)
    assert named.tables == [TABLE] and named.skipped == ["batch_docstats"]
    assert "skipped 1 table" in named.summary() and "batch_docstats" in named.summary()


@pytest.mark.hbase
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_caffeine_gc_after_caffeine_batch(hbase_settings):
    """The user's path: `caffeine batch` (Spark, local mode) creates its batch_* tables next
    to the Percolator tables, then `caffeine gc` succeeds and names the tables it skipped."""
    pytest.importorskip("pyspark")
    from caffeine.storage.hbase import HBaseStore

    prefix = f"{hbase_settings.table_prefix}gcb{uuid.uuid4().hex[:4]}_"
    env = cli_env(table_prefix=prefix)
    try:
        created = run_cli("tables", "create", "repository", env=env)
        assert created.returncode == 0, created.stderr
        batch = run_cli("batch", "--master", "local[1]", env=env)
        assert batch.returncode == 0, batch.stderr
        # Progress on stderr, the report on stdout.
        assert "starting Spark (local[1])" in batch.stderr and " row ranges" in batch.stderr, batch.stderr
        assert batch.stdout.startswith("batch at snapshot "), batch.stdout
        gc = run_cli("gc", env=env)
        assert gc.returncode == 0, gc.stderr
        assert "skipped" in gc.stdout and "batch_docstats" in gc.stdout, gc.stdout
        assert "in 1 tables" in gc.stdout, gc.stdout  # repository only
        assert_no_stack_trace(gc.stdout + gc.stderr)
    finally:
        store = HBaseStore(hbase_settings.model_copy(update={"table_prefix": prefix}))
        for table in store.list_tables():
            store.drop_table(table)
        store.close()


def test_gc_of_one_table_never_leaves_a_committed_transaction_half_visible(cluster):
    """``caffeine gc --table a``: T commits its primary in ``a`` and its committer dies before
    the secondary in ``b``; a later write lands on T's primary cell. GC of ``a`` alone must
    still settle T's lock in ``b`` before it publishes the safe point (the safe point promises
    that every lock below it was resolved), or it deletes T's commit record in ``a`` and leaves
    ``b`` locked for good: readers time out, writers conflict, and no later GC can repair it."""
    a, b = "gca" + uuid.uuid4().hex[:6], "gcb" + uuid.uuid4().hex[:6]
    cluster.create_table(a)
    cluster.create_table(b)
    row = b"half-" + uuid.uuid4().hex.encode()
    t = cluster.begin()
    t.set(a, row, "v", b"t")   # the primary
    t.set(b, row, "v", b"t")   # a secondary, in another table
    txn_steps.prewrite(t)
    txn_steps.commit_primary(t)  # the commit point; the committer dies before the secondaries
    with cluster.begin() as later:
        later.set(a, row, "v", b"later")
    report = collect_garbage(cluster, cluster.oracle.get_timestamp(), [a], publish_wait_s=0)
    reader = cluster.begin()
    assert reader.get(b, row, "v") == b"t"
    assert reader.get(a, row, "v") == b"later"
    assert report.tables == [a]
    assert report.locks_resolved >= 1  # T's secondary in b, although b is not collected
    with cluster.begin() as writer:  # and b's cell takes writes again
        writer.set(b, row, "v", b"next")
    assert cluster.begin().get(b, row, "v") == b"next"


def test_a_lock_below_the_safe_point_whose_primary_is_gone_is_rolled_back_not_left_stuck(cluster):
    """A lock older than the safe point whose primary holds neither its lock nor a record for
    it: GC settles every lock below its horizon (in every table) before publishing it, so such
    a lock belongs to a transaction that never committed (a prewrite from a client paused past
    its grace, landing after GC's settling) and that can no longer commit (its commit needs a
    start_ts at or above the safe point). docs/FAULTS.md: it is rolled back when met."""
    a, b = "gco" + uuid.uuid4().hex[:6], "gcp" + uuid.uuid4().hex[:6]
    cluster.create_table(a)
    cluster.create_table(b)
    row = b"orphan-" + uuid.uuid4().hex.encode()
    with cluster.begin() as before:
        before.set(b, row, "v", b"before")
    t = cluster.begin()
    t.set(a, row, "v", b"t")
    t.set(b, row, "v", b"t")
    txn_steps.prewrite(t)
    # The primary's lock settled and its record collected: what is left is the lock in b.
    cluster.store.delete_rows(a, {row: [Delete(LOCK, b"v", t.start_ts), Delete(DATA, b"v", t.start_ts)]})
    cluster.owners.advance_safe_point(cluster.oracle.get_timestamp())
    assert cluster.begin().get(b, row, "v") == b"before"
    with cluster.begin() as writer:
        writer.set(b, row, "v", b"after")
    assert cluster.begin().get(b, row, "v") == b"after"
    with pytest.raises(SnapshotTooOld):  # nor can its owner commit it now
        t.commit()
    t.rollback()
