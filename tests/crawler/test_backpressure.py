"""Back-pressure: a feed is paced once the observers' backlog would hold a page longer than
the freshness target, at what the workers sustain, and runs free again once the backlog is
small (crawler.backpressure)."""

from __future__ import annotations

import time
import uuid

from caffeine.percolator import Application, Observer
from caffeine.percolator.workers_table import Membership, ensure_workers_table
from crawler.backpressure import BackPressure


def feed(bp, pages):
    bp._fed += pages


def test_the_chain_holds_at_most_what_gets_through_in_the_target_time():
    bp = BackPressure(None, "repo", target_s=5.0)
    bp._observe(in_chain=0, workers=2, threads=16, elapsed_s=1.0)
    assert bp.window == 32 and bp.throughput is None  # the floor: every worker thread busy, twice
    # The chain lets 20 pages a second through; the feed brings 40: 20 more wait each second.
    in_chain = 0
    for second in range(25):
        feed(bp, 40)
        in_chain += 20
        bp._observe(in_chain=in_chain, workers=2, threads=16, elapsed_s=1.0)
    assert round(bp.throughput) == 20
    assert bp.window == 99 or bp.window == 100  # 20 pages/s for 5 s
    assert bp.hold_s == in_chain / bp.throughput
    assert bp.holding and "held: 500 pages" in bp.describe() and "at most" in bp.describe()


def test_no_worker_no_limit():
    bp = BackPressure(None, "repo", target_s=5.0)
    bp._observe(in_chain=10_000, workers=0, threads=0, elapsed_s=1.0)
    feed(bp, 50)
    bp._observe(in_chain=10_050, workers=0, threads=0, elapsed_s=1.0)
    assert bp.window is None and not bp.holding and "no observer worker runs" in bp.describe()


def test_a_caller_waits_for_room_in_the_chain():
    bp = BackPressure(None, "repo", target_s=5.0, interval_s=0.05)
    started = time.monotonic()
    for _ in range(20):
        bp.wait()
    assert time.monotonic() - started < 0.05  # no count yet: no limit
    bp.window, bp.in_chain = 5, 5
    import threading

    done = threading.Event()
    waiter = threading.Thread(target=lambda: (bp.wait(), done.set()))
    waiter.start()
    time.sleep(0.2)
    assert not done.is_set()  # the chain is full
    with bp._cond:
        bp.in_chain = 2  # the next count: pages left
        bp._fed = 0
        bp._cond.notify_all()
    assert done.wait(2)
    assert bp.paced_s >= 0.15


def test_it_counts_the_pages_in_the_chain_and_the_live_workers(fresh_cluster):
    # A deployment of its own: the fake worker registered below must not own rows of others.
    cluster = fresh_cluster
    table = "bp" + uuid.uuid4().hex[:8]
    app = Application("bp" + uuid.uuid4().hex[:6], [Observer("o", table, "v", lambda txn, row, column: None)])
    app.install(cluster)
    ensure_workers_table(cluster.store)
    member = Membership(cluster.store, "bp-worker", grace_ms=60_000, describe=lambda: {"worker": "bp-worker"})
    bp = BackPressure(cluster, table, target_s=0.5, interval_s=0.05).start()
    try:
        member.beat()
        deadline = time.monotonic() + 5
        while not bp.holding and time.monotonic() < deadline:
            # Fed, and nobody takes the pages out of the chain: it only grows.
            bp.wait()
            with cluster.begin() as txn:
                txn.set(table, b"r" + uuid.uuid4().hex.encode(), "v", b"x")
            time.sleep(0.01)
        assert bp.in_chain > 0 and bp.workers == 1
        assert bp.holding and "held:" in bp.describe()
        member.beat(alive=False)
    finally:
        bp.stop()
