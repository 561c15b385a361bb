"""Garbage collection keeps every version a reader at or above the horizon can see."""

from __future__ import annotations

import uuid

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
    rolled.prewrite()
    rolled.rollback()
    with cluster.begin() as txn:
        txn.set(TABLE, row, "v", b"v4")
    horizon = reader.start_ts
    report = collect_garbage(cluster.store, horizon, [TABLE])
    assert report.write_versions_deleted == 3 and report.locked_cells_skipped == 0
    assert reader.get(TABLE, row, "v") == b"v3"
    assert cluster.begin().get(TABLE, row, "v") == b"v4"
    # Kept: v3's record (newest at or below the horizon), the rollback record and v4 above it.
    assert len(versions(cluster.store, row, WRITE)) == 3
    assert len(versions(cluster.store, row, DATA)) == 2
    again = collect_garbage(cluster.store, horizon, [TABLE])
    assert again.write_versions_deleted == 0


def test_gc_skips_locked_cells(cluster):
    cluster.create_table(TABLE)
    row = b"gcl-" + uuid.uuid4().hex.encode()
    for i in range(3):
        with cluster.begin() as txn:
            txn.set(TABLE, row, "v", b"v%d" % i)
    pending = cluster.begin()
    pending.set(TABLE, row, "v", b"pending")
    pending.prewrite()
    report = collect_garbage(cluster.store, cluster.oracle.get_timestamp(), [TABLE])
    assert report.locked_cells_skipped >= 1
    assert len(versions(cluster.store, row, WRITE)) == 3
    pending.rollback()
