"""Byte-exact encodings of the protocol's records, and the pinned public API."""

from __future__ import annotations

import pytest

import caffeine.percolator
from caffeine.percolator.records import CellRef, Kind, Lock, Write


def test_lock_encoding_is_pinned_and_round_trips():
    lock = Lock(start_ts=7, kind=Kind.PUT, primary=CellRef("dups", b"h\x00", "canonical-url"), ttl_ms=3000, owner=b"o1", refreshed_ms=5)
    data = lock.encode()
    assert data == (
        b"\x01\x01" + b"\x00\x00\x0b\xb8" + b"\x00" * 7 + b"\x05"
        + b"\x00\x00\x00\x02o1" + b"\x00\x00\x00\x04dups" + b"\x00\x00\x00\x02h\x00"
        + b"\x00\x00\x00\x0dcanonical-url"
    )
    assert Lock.decode(7, data) == lock


@pytest.mark.parametrize("kind", list(Kind))
def test_write_encoding_is_pinned_and_round_trips(kind):
    write = Write(kind, 0x0102030405060708)
    assert write.encode() == bytes([int(kind)]) + bytes(range(1, 9))
    assert Write.decode(write.encode()) == write


@pytest.mark.parametrize("bad", [b"", b"\x02\x01" + b"\x00" * 20, b"\x01\x01\x00"])
def test_garbage_is_not_a_lock(bad):
    with pytest.raises(ValueError):
        Lock.decode(1, bad)


def test_public_api_is_pinned():
    assert sorted(caffeine.percolator.__all__) == sorted([
        "connect", "Cluster", "Transaction", "TransactionError", "CommitConflict",
        "TransactionRolledBack", "CommitUnknown", "SnapshotTooOld", "LockWaitTimeout", "TransactionClosed",
        "OracleUnavailable",
        "Observer", "Application", "ServingTable", "Snapshot",
    ])
    for name in caffeine.percolator.__all__:
        assert hasattr(caffeine.percolator, name)


# Class attributes only (start_ts, cluster, read_only are set per instance).
READS = {"get", "get_row", "get_rows", "get_all", "get_all_rows", "present_columns", "scan", "committed_write"}


def test_a_transactions_public_surface_is_reads_writes_commit_and_rollback():
    """The commit's steps, the worker's hooks and the plumbing stay out of it (tests reach
    the steps through caffeine.percolator.testing)."""
    from caffeine.percolator import Snapshot, Transaction

    def public(cls):
        return {n for n in dir(cls) if not n.startswith("_")}

    assert public(Transaction) == READS | {
        "set", "delete", "notify", "on_commit", "commit", "rollback",
        "state", "commit_ts", "primary", "written_cells",
    }
    assert public(Snapshot) == READS | {"close"}
