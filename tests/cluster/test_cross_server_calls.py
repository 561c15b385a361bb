"""Calls whose rows live on different region servers, on the cluster of ``conftest.py``.

A table split at ``SPLITS`` into nine regions, which HBase spreads over the three region
servers (round-robin, from a random server: three each, seldom otherwise); each test puts a row
in a region of each server:

- the coprocessor's intersection of posting rows (``read_common``, ``RowsCommon.java``) with
  the first row on one server and the others on the two others runs through its remote path
  (a Get through the region server's connection), and answers what the client's own
  intersection answers, whichever server the first row is on;
- with the server of a remote row frozen (SIGSTOP, shorter than ZooKeeper's session timeout),
  a gathering read gives up after ``caffeine.common.remote.timeout.ms`` rather than holding
  its handler, and more gathering reads than the region server's share of handlers are refused
  as busy at once (the client answers None for a server-only read, or reads the rows itself);
- multi-row calls (reads, puts, deletes, and the coprocessor's checked row steps, one row of a
  batch refused) over rows of every server answer per row, through the batching store too.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest

from caffeine.percolator import layout
from caffeine.percolator.layout import DATA, LOCK, WRITE
from caffeine.percolator.records import CellRef, Kind, Lock, Write
from caffeine.percolator.steps import server
from caffeine.storage import Delete, FamilySpec, Put, ReadSpec, Refusal, Store
from caffeine.storage.batching import BatchingStore
from caffeine.storage.hbase import HBaseStore
from support.frozen import Frozen
from support.local_cluster import REGIONSERVERS, regionserver_name

SPLITS = (b"c", b"f", b"i", b"l", b"o", b"r", b"u", b"x")  # nine regions
BASE = 1_000_000
# RowsCommon.DEFAULT_REMOTE_TIMEOUT_MS: how long a gathering read waits on another server.
REMOTE_TIMEOUT_S = 5.0
FREEZE_S = 9.0


@pytest.fixture(scope="module")
def store(running_cluster):
    _, settings, _ = running_cluster
    with HBaseStore(settings) as store:
        yield store


def spread_table(store: Store, families=None) -> tuple[str, list[bytes], dict[bytes, str]]:
    """A table of nine regions over the three region servers: (name, a row prefix in a region
    of each server, prefix -> its server)."""
    name = "x" + uuid.uuid4().hex[:8]
    if families is None:
        layout.create_table(store, name, split_keys=SPLITS)
    else:
        store.create_table(name, families, SPLITS)
    regions = store.regions(name)
    by_server: dict[str, bytes] = {}
    for r in regions:
        by_server.setdefault(r.server, r.start or b"a")
    assert len(by_server) == REGIONSERVERS, f"the regions do not spread over the servers: {regions}"
    prefixes = sorted(by_server.values())
    return name, prefixes, {prefix: server for server, prefix in by_server.items()}


def pid_of(local, server: str) -> int:
    """The pid of the region server named ``localhost:<port>``."""
    pids = local.status(probe_timeout_s=5).piece(regionserver_name(local.settings, server)).pids
    assert len(pids) == 1, pids
    return pids[0]


# -- the coprocessor's intersection through its remote path ----------------------------------


def posting_rows(store: Store, table: str, prefixes: list[bytes]) -> list[bytes]:
    """A row in each region: a00..a39 in the first, every second in the next, every third in
    the last, so the three have a00, a06, ..., a36 in common."""
    keys = [prefix + b"-" + uuid.uuid4().hex[:6].encode() for prefix in prefixes]
    for i, key in enumerate(keys):
        store.put_rows(table, {key: [Put(b"p", b"a%02d" % j, 5, b"%d:%d" % (i, j)) for j in range(0, 40, i + 1)]})
    return keys


COMMON = [b"a%02d" % j for j in range(0, 40, 6)]


@pytest.mark.hbase
def test_an_intersection_gathers_rows_from_the_other_servers_and_answers_as_the_client(store):
    table, prefixes, _ = spread_table(store, {b"p": FamilySpec()})
    keys = posting_rows(store, table, prefixes)
    for first in range(3):  # the first row on each server in turn: the others are remote
        order = [keys[first]] + [k for k in keys if k != keys[first]]
        for limit in (0, 3, 100):
            got = store.read_common(table, order, b"p", limit, server_only=True)
            here = Store.read_common(store, table, order, b"p", limit)
            assert got is not None and got.server_side, "the region server did not intersect"
            assert (got.cells, got.count) == (here.cells, here.count)
            assert got.count == len(COMMON) and list(got.cells[order[0]]) == COMMON[:limit]


@pytest.mark.hbase
def test_a_gathering_read_gives_up_on_a_frozen_server_and_the_rest_are_refused_busy(store, running_cluster):
    local, _, _ = running_cluster
    table, prefixes, servers = spread_table(store, {b"p": FamilySpec()})
    keys = posting_rows(store, table, prefixes)
    store.read_common(table, keys, b"p", 10, server_only=True)  # the remote rows' locations cached
    handlers = 30  # hbase.regionserver.handler.count, HBase's default: a quarter may gather at once
    permits = handlers // 4
    timings: list[tuple[float, object]] = []
    guard = threading.Lock()

    def gather(_):
        t0 = time.monotonic()
        try:
            answer = store.read_common(table, keys, b"p", 10, server_only=True)
        except Exception as exc:  # noqa: BLE001 - reported below
            answer = exc
        with guard:
            timings.append((time.monotonic() - t0, answer))

    # Frozen for FREEZE_S: longer than the remote timeout, well under ZooKeeper's session
    # timeout (15 s), so the server is not declared dead meanwhile.
    with Frozen(pid_of(local, servers[prefixes[2]])):
        with ThreadPoolExecutor(permits + 4) as pool:
            running = [pool.submit(gather, i) for i in range(permits + 4)]
            time.sleep(FREEZE_S)
    for future in running:
        future.result()
    refused = sorted(t for t, answer in timings if answer is None)
    print(f"\n{permits + 4} gathering reads while the server of a remote row was frozen for {FREEZE_S:g}s: "
          f"{len(timings)} answered in {', '.join(f'{t:.2f}s' for t, _ in sorted(timings, key=lambda x: x[0]))}; "
          f"{len(refused)} of them refused (None), the others {[type(a).__name__ for _, a in timings if a is not None]}")
    # Every one is refused: the share of handlers that may gather at once at once as busy, the
    # others once their remote read gives up, never retried until the server thaws.
    assert len(refused) == permits + 4, timings
    assert sum(1 for t in refused if t < 1.0) >= 4, timings
    assert all(t < REMOTE_TIMEOUT_S + 2.5 for t in refused), timings
    # Thawed: the permits were all given back, and the server intersects again.
    got = store.read_common(table, keys, b"p", 10, server_only=True)
    assert got is not None and got.server_side and got.count == len(COMMON)


# -- multi-row calls over every server ---------------------------------------------------------


def lock(start_ts, primary_row=b"p"):
    return Lock(start_ts, Kind.PUT, CellRef("t", primary_row, "c"), 3000, b"owner", 0).encode()


def prewrite(store, table, rows, start_ts, value=b"v"):
    writes = {row: server.prewrite_write({"c": value}, {"c": lock(start_ts)}, start_ts) for row in rows}
    return store.apply_checked(table, writes)


@pytest.mark.hbase
@pytest.mark.parametrize("batching", [False, True], ids=["direct", "batching-store"])
def test_multi_row_calls_over_every_server_answer_per_row(store, batching):
    table, prefixes, _ = spread_table(store)
    rows = [prefix + b"-" + uuid.uuid4().hex[:6].encode() for prefix in prefixes]
    calls = BatchingStore(store, linger_ms=1) if batching else store
    calls.put_rows(table, {row: [Put(DATA, b"plain", 7, row)] for row in rows})
    read = calls.read_rows(table, rows, ReadSpec(families=(DATA,)))
    assert {row: read[row].latest(DATA, b"plain").value for row in rows} == {row: row for row in rows}
    calls.delete_rows(table, {row: [Delete(DATA, b"plain", 7)] for row in rows[::2]})
    read = calls.read_rows(table, rows, ReadSpec(families=(DATA,)))
    assert [read[row].latest(DATA, b"plain") is None for row in rows] == [True, False, True]

    # Checked row steps: the middle row (on the second server) holds another lock, so its
    # prewrite is refused; the rows on the other two servers are prewritten.
    assert prewrite(calls, table, [rows[1]], BASE) == {rows[1]: None}
    answers = prewrite(calls, table, rows, BASE + 5, value=b"new")
    assert answers == {rows[0]: None, rows[1]: Refusal("LOCKED", (b"c".hex(), str(BASE), lock(BASE).hex())),
                       rows[2]: None}
    # Their commits, in one call over two servers; each row atomic.
    commits = {row: server.commit_write({"c": Kind.PUT}, BASE + 5, BASE + 9) for row in (rows[0], rows[2])}
    assert calls.apply_checked(table, commits) == {rows[0]: None, rows[2]: None}
    after = calls.read_rows(table, rows, ReadSpec(families=(LOCK, WRITE)))
    for row in (rows[0], rows[2]):
        assert after[row].latest(LOCK, b"c") is None
        assert Write.decode(after[row].latest(WRITE, b"c").value) == Write(Kind.PUT, BASE + 5)
    assert after[rows[1]].latest(LOCK, b"c").ts == BASE and after[rows[1]].latest(WRITE, b"c") is None

    if batching:
        # Concurrent callers' requests, combined into calls over the three servers.
        def one(i):
            row = prefixes[i % 3] + b"-c%03d" % i
            calls.put_rows(table, {row: [Put(DATA, b"n", 3, b"%d" % i)]})
            return calls.read_row(table, row, ReadSpec(families=(DATA,))).latest(DATA, b"n").value

        with ThreadPoolExecutor(12) as pool:
            assert list(pool.map(one, range(60))) == [b"%d" % i for i in range(60)]
