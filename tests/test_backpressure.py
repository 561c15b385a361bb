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


def test_the_feed_is_paced_below_the_chains_throughput_while_pages_would_wait_too_long():
    bp = BackPressure(None, "repo", target_s=5.0)
    bp._observe(in_chain=0, workers=2, elapsed_s=1.0)
    assert bp.rate is None and bp.throughput is None
    # The chain lets 20 pages a second through; the feed brings 40: 20 more wait each second.
    in_chain = 0
    for second in range(10):
        feed(bp, 40)
        in_chain += 20
        bp._observe(in_chain=in_chain, workers=2, elapsed_s=1.0)
    assert round(bp.throughput) == 20
    # 200 pages in the chain at 20 a second: a 10 s hold, twice the 5 s target: paced at half
    # of what gets through, so the chain drains.
    assert bp.hold_s == 10.0 and bp.rate == 10.0
    assert "paced to 10.0/s" in bp.describe() and "(~10.0s)" in bp.describe()


def test_the_pace_lifts_once_the_chain_is_short():
    bp = BackPressure(None, "repo", target_s=5.0)
    bp.throughput, bp.workers, bp.in_chain, bp.counted = 20.0, 2, 20, True
    bp.rate = 10.0
    rates = []
    for _ in range(12):
        bp._adjust(fed_rate=min(bp.rate or 1e9, 30.0))
        rates.append(bp.rate)
    assert rates[0] == 12.5 and rates[-1] is None, rates


def test_no_worker_no_pacing():
    bp = BackPressure(None, "repo", target_s=5.0)
    bp._observe(in_chain=10_000, workers=0, elapsed_s=1.0)
    feed(bp, 50)
    bp._observe(in_chain=10_050, workers=0, elapsed_s=1.0)
    assert bp.rate is None and "no observer worker runs" in bp.describe()


def test_a_paced_feed_waits_its_turn_and_an_unpaced_one_does_not():
    bp = BackPressure(None, "repo", target_s=5.0)
    started = time.monotonic()
    for _ in range(20):
        bp.wait()
    assert time.monotonic() - started < 0.05
    bp.rate = 20.0
    started = time.monotonic()
    for _ in range(6):
        bp.wait()
    assert 0.2 <= time.monotonic() - started < 1.0  # five turns of 50 ms after the first
    assert bp.paced_s > 0.1  # (less when the machine is slow between the turns)


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
        while bp.rate is None and time.monotonic() < deadline:
            # Fed, and nobody takes the pages out of the chain: it only grows.
            bp.wait()
            with cluster.begin() as txn:
                txn.set(table, b"r" + uuid.uuid4().hex.encode(), "v", b"x")
            time.sleep(0.01)
        assert bp.in_chain > 0 and bp.workers == 1
        assert bp.rate is not None and "paced to" in bp.describe()
        member.beat(alive=False)
    finally:
        bp.stop()
