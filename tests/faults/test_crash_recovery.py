"""A writer process SIGKILLed at each step of its commit; readers see all of it or none of it.

Real processes, real HBase, real timestamp oracle (in-process variants: test_lock_recovery.py).
A child (``tests/support/txn_child.py``) writes one 4-row transaction, stops at a chosen step,
prints ``READY <start_ts> <commit_ts>`` and is SIGKILLed there. Then:

- the locks it left are exactly the ones that step leaves (checked before the kill);
- fresh readers in this process, several at once, reading the rows in different orders and by
  scan, each see the whole transaction (killed after its commit point) or none of it (killed
  before); a reader whose snapshot predates the writer sees none of it either way;
- every lock is gone once the readers met it: rolled forward after the commit point, rolled
  back before it (which needs the lock's TTL to run out or the owner's heartbeat to go stale:
  seconds, with the fast settings of ``child_helpers.FAST``);
- the records say so: a write record at commit_ts in every row, or a rollback record at
  start_ts wherever the writer had locked.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from caffeine.percolator.cluster import Cluster
from support.child_helpers import FAST, child_env
from support.percolator_helpers import must_locked, must_rolled_back, must_unlocked, must_written

pytestmark = pytest.mark.hbase

TABLE = "crash"
COLUMN = "v"
N_ROWS = 4


@pytest.fixture
def reader(fast_cluster):
    """A client in this process, over the real oracle, judging locks as the children do
    (tests/faults/conftest.py's ``fast_cluster``), with the test table."""
    fast_cluster.create_table(TABLE)
    return fast_cluster


def fresh_rows() -> list[bytes]:
    """Rows no other test (or other run of this one) writes; rows[0] will be the primary."""
    base = f"crash-{uuid.uuid4().hex[:12]}-"
    return [f"{base}{i}".encode() for i in range(N_ROWS)]


def old(row: bytes) -> bytes:
    return b"old:" + row


def new(row: bytes) -> bytes:
    return b"new:" + row


def seed(cluster: Cluster, rows: list[bytes]) -> None:
    with cluster.begin() as txn:
        for row in rows:
            txn.set(TABLE, row, COLUMN, old(row))


def start_writer(children, settings, rows, stop, **env_extra):
    child = children(
        "txn_child.py",
        ["--table", TABLE, "--rows", ",".join(r.decode() for r in rows), "--column", COLUMN,
         "--value-prefix", "new:", "--stop", stop],
        child_env(settings, **env_extra),
        name=f"writer stopped at {stop}",
    )
    start_ts, commit_ts = child.expect("READY")
    return child, int(start_ts), None if commit_ts == "-" else int(commit_ts)


def read_concurrently(cluster: Cluster, rows: list[bytes]) -> dict[str, dict[bytes, bytes | None]]:
    """Three readers at once, each in its own fresh transaction: rows in order (primary
    first), rows in reverse (secondaries first), and a scan of the rows' key range."""
    prefix = rows[0][: rows[0].rindex(b"-") + 1]
    stop_row = prefix[:-1] + bytes([prefix[-1] + 1])

    def forward(txn):
        return {r: txn.get(TABLE, r, COLUMN) for r in rows}

    def backward(txn):
        return {r: txn.get(TABLE, r, COLUMN) for r in reversed(rows)}

    def scan(txn):
        seen = {r: None for r in rows}
        seen.update((r, cols.get(COLUMN)) for r, cols in txn.scan(TABLE, prefix, stop_row, [COLUMN]))
        return seen

    results: dict[str, dict] = {}
    errors: list[BaseException] = []

    def run(name, fn):
        try:
            txn = cluster.begin()
            results[name] = fn(txn)
            txn.commit()
        except BaseException as exc:  # reported in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n, f)) for n, f in
               (("in order", forward), ("reversed", backward), ("scan", scan))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    assert len(results) == 3, "a reader hung"
    return results


def assert_all_or_nothing(results, rows, committed: bool) -> None:
    want = {r: (new(r) if committed else old(r)) for r in rows}
    for name, seen in results.items():
        assert seen == want, (
            f"reader {name!r} saw a {'partly ' if set(seen.values()) & set(want.values()) else ''}"
            f"wrong snapshot: {seen}, expected {'all' if committed else 'none'} of the killed transaction"
        )


# stop point -> (committed?, rows locked when the writer stops, rows already committed)
SCENARIOS = {
    "mid-prewrite": (False, {0, 1}, set()),
    "prewrite": (False, {0, 1, 2, 3}, set()),
    "primary": (True, {1, 2, 3}, {0}),
    "secondary": (True, {2, 3}, {0, 1}),
}


@pytest.mark.parametrize("stop", list(SCENARIOS))
def test_a_writer_killed_at_each_commit_step_is_seen_all_or_nothing(stop, reader, children, hbase_settings):
    store = reader.store
    committed, locked, written = SCENARIOS[stop]
    rows = fresh_rows()
    seed(reader, rows)
    early = reader.begin()  # a snapshot taken before the writer started

    child, start_ts, commit_ts = start_writer(children, hbase_settings, rows, stop)
    # Given: the writer stopped exactly where asked.
    assert (commit_ts is not None) == committed
    for i, row in enumerate(rows):
        if i in locked:
            lock = must_locked(store, TABLE, row, COLUMN, start_ts)
            assert lock.ttl_ms == FAST["lock_ttl_ms"] and lock.primary.row == rows[0]
        else:
            must_unlocked(store, TABLE, row, COLUMN)
        if i in written:
            must_written(store, TABLE, row, COLUMN, commit_ts, start_ts)

    # When: it dies without a word (no exit handler, no deregistration).
    child.sigkill()
    killed_at = time.monotonic()
    results = read_concurrently(reader, rows)
    resolved_in = time.monotonic() - killed_at

    # Then: all of it or none of it, for every reader.
    assert_all_or_nothing(results, rows, committed)
    assert {r: early.get(TABLE, r, COLUMN) for r in rows} == {r: old(r) for r in rows}
    early.commit()
    for row in rows:
        must_unlocked(store, TABLE, row, COLUMN)
    if committed:
        for row in rows:
            must_written(store, TABLE, row, COLUMN, commit_ts, start_ts)
    else:
        for i in sorted(locked):
            must_rolled_back(store, TABLE, rows[i], COLUMN, start_ts)
        # Rolled back only once its TTL ran out (or its heartbeat went stale): seconds.
        assert resolved_in < 15, f"resolving the dead writer's locks took {resolved_in:.1f}s"
    print(f"\n{stop}: {'rolled forward' if committed else 'rolled back'}, every lock resolved "
          f"{resolved_in:.2f}s after SIGKILL")


def test_a_killed_owner_with_a_long_ttl_is_detected_by_its_stale_heartbeat(reader, children, hbase_settings):
    """A TTL of a minute: only the owner registry can tell the lock is dead, after
    owner_grace_ms without a heartbeat, and it must not say so before."""
    store = reader.store
    rows = fresh_rows()
    seed(reader, rows)
    child, start_ts, _ = start_writer(children, hbase_settings, rows, "prewrite", lock_ttl_ms=60_000)
    assert must_locked(store, TABLE, rows[0], COLUMN, start_ts).ttl_ms == 60_000
    child.sigkill()
    killed_at = time.monotonic()
    results = read_concurrently(reader, rows)
    resolved_in = time.monotonic() - killed_at
    assert_all_or_nothing(results, rows, committed=False)
    for row in rows:
        must_unlocked(store, TABLE, row, COLUMN)
        must_rolled_back(store, TABLE, row, COLUMN, start_ts)
    grace_s = FAST["owner_grace_ms"] / 1000
    beat_s = FAST["heartbeat_interval_ms"] / 1000
    # The last beat was at most one interval before the kill, so the owner stays "alive" for
    # at least grace - interval after it; the readers waited that long, and not much longer.
    assert grace_s - beat_s - 0.2 <= resolved_in < grace_s + 10, resolved_in
    print(f"\ndead owner detected by heartbeat {resolved_in:.2f}s after SIGKILL (grace {grace_s:g}s)")


def test_a_slow_but_live_writer_is_waited_on_not_rolled_back(reader, children, hbase_settings):
    """The writer reads, spends longer than the lock TTL before writing (alive, heartbeating),
    prewrites, and commits half a second later; a reader meeting its lock meanwhile waits."""
    rows = fresh_rows()[:2]
    seed(reader, rows)
    ttl_s = FAST["lock_ttl_ms"] / 1000
    child = children(
        "txn_child.py",
        ["--table", TABLE, "--rows", ",".join(r.decode() for r in rows), "--column", COLUMN,
         "--stop", "prewrite", "--sleep-before-write", str(ttl_s + 1.0)],
        child_env(hbase_settings),
        name="slow writer",
    )
    start_ts = int(child.expect("READY")[0])
    must_locked(reader.store, TABLE, rows[0], COLUMN, start_ts)
    seen = {}

    def read_it():
        with reader.begin() as txn:  # starts after the prewrite: meets the live lock
            seen["value"] = txn.get(TABLE, rows[1], COLUMN)

    thread = threading.Thread(target=read_it)
    thread.start()
    time.sleep(0.5)  # the owner heartbeats all along and its prewrite is half a second old
    child.send("commit")
    outcome = child.read_line(timeout_s=60)  # COMMITTED <ts> or ROLLED_BACK <reason>
    thread.join(timeout=60)
    assert outcome is not None and outcome.startswith("COMMITTED"), f"the live writer got: {outcome!r}"
    assert seen["value"] == old(rows[1])
