"""Garbage collection keeps every version a reader at or above the horizon can see."""

from __future__ import annotations

import uuid

import pytest

from caffeine.percolator import testing as txn_steps
from caffeine.percolator.gc import collect_garbage
from caffeine.percolator.layout import DATA, WRITE
from caffeine.storage import ReadSpec

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
