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


def test_the_feed_is_paced_at_what_the_workers_sustain_while_the_backlog_is_long():
    bp = BackPressure(None, ["t"], target_s=5.0)
    bp._observe(backlog=0, workers=2, cleared=0, elapsed_s=1.0)
    assert bp.rate is None and bp.drain is None
    # Workers clear 100 notifications/s; each page fed makes 5 (the chain fans out); the feed
    # brings 40 pages/s, 200 notifications/s: the backlog grows by 100 a second.
    cleared, backlog = 0, 0
    for second in range(12):
        feed(bp, 40)
        cleared += 100
        backlog += 200 - 100
        bp._observe(backlog=backlog, workers=2, cleared=cleared, elapsed_s=1.0)
    assert round(bp.drain) == 100 and round(bp.fanout, 1) == 5.0
    # 1,200 pending at 100/s: a 12 s wait, over the 5 s target. The workers sustain 20 pages/s;
    # paced below that in proportion, so the backlog drains.
    assert bp.wait_s == 12.0
    assert 8.0 < bp.rate < 20.0
    assert "paced to" in bp.describe() and "~12.0s of work" in bp.describe()


def test_the_pace_lifts_once_the_backlog_is_small():
    bp = BackPressure(None, ["t"], target_s=5.0)
    bp.drain, bp.fanout, bp.workers, bp.backlog, bp._cleared = 100.0, 5.0, 2, 100, 0
    bp.rate = 10.0
    rates = []
    for _ in range(12):
        bp._adjust(fed_rate=min(bp.rate or 1e9, 30.0))
        rates.append(bp.rate)
    assert rates[0] == 12.5 and rates[-1] is None, rates


def test_no_worker_no_pacing():
    bp = BackPressure(None, ["t"], target_s=5.0)
    bp._observe(backlog=10_000, workers=0, cleared=0, elapsed_s=1.0)
    feed(bp, 50)
    bp._observe(backlog=20_000, workers=0, cleared=0, elapsed_s=1.0)
    assert bp.rate is None and "no observer worker runs" in bp.describe()


def test_a_paced_feed_waits_its_turn_and_an_unpaced_one_does_not():
    bp = BackPressure(None, ["t"], target_s=5.0)
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


def test_it_counts_the_backlog_and_the_live_workers_counters(fresh_cluster):
    # A deployment of its own: the fake worker registered below must not own rows of others.
    cluster = fresh_cluster
    table = "bp" + uuid.uuid4().hex[:8]
    app = Application("bp" + uuid.uuid4().hex[:6], [Observer("o", table, "v", lambda txn, row, column: None)])
    app.install(cluster)
    with cluster.begin() as txn:
        for i in range(40):
            txn.set(table, b"r%02d" % i, "v", b"x")
    ensure_workers_table(cluster.store)
    counters = {"cleared": 0}
    member = Membership(cluster.store, "bp-worker", grace_ms=60_000,
                        describe=lambda: {"worker": "bp-worker", "metrics": dict(counters)})
    bp = BackPressure(cluster, [table], target_s=0.5, interval_s=0.05).start()
    try:
        member.beat()
        time.sleep(0.3)
        counters["cleared"] = 4  # a slow worker: 40 pending will take it long
        member.beat()
        deadline = time.monotonic() + 5
        while bp.rate is None and time.monotonic() < deadline:
            bp.wait()
            time.sleep(0.02)
        assert bp.backlog == 40 and bp.workers == 1
        assert bp.rate is not None and "paced to" in bp.describe()
        member.beat(alive=False)
    finally:
        bp.stop()
