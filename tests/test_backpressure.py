"""Back-pressure: a feed is paced once the observers' backlog would hold a page longer than
the freshness target, and runs free again once the backlog is fresh (crawler.backpressure)."""

from __future__ import annotations

import time
import uuid

from caffeine.percolator import Application, Observer
from caffeine.percolator.workers_table import Membership, ensure_workers_table
from crawler.backpressure import BackPressure


def test_the_pace_falls_while_the_backlog_is_stale_and_lifts_once_it_is_fresh():
    bp = BackPressure(None, ["t"], target_s=5.0)
    bp.workers = 1
    bp.oldest_age_s = 2.0
    bp._adjust(fed_rate=40.0)
    assert bp.rate is None, "under the target: unpaced"
    bp.oldest_age_s = 10.0
    bp._adjust(fed_rate=30.0)
    assert bp.rate == 20.0  # what the feed did, less a third
    bp._adjust(fed_rate=20.0, growing=True)
    assert round(bp.rate, 6) == round(40 / 3, 6)
    bp._adjust(fed_rate=13.0, growing=False)  # being caught up with: held
    assert round(bp.rate, 6) == round(40 / 3, 6)
    bp.rate = 10.0
    bp.oldest_age_s = 1.0
    rates = []
    for _ in range(12):
        bp._adjust(fed_rate=min(bp.rate or 1e9, 30.0))
        rates.append(bp.rate)
    assert rates[0] == 12.5 and rates[-1] is None, rates


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


def test_a_stale_backlog_paces_only_while_a_worker_runs(fresh_cluster):
    # A deployment of its own: the fake worker registered below must not own rows of others.
    cluster = fresh_cluster
    table = "bp" + uuid.uuid4().hex[:8]
    app = Application("bp" + uuid.uuid4().hex[:6], [Observer("o", table, "v", lambda txn, row, column: None)])
    app.install(cluster)
    with cluster.begin() as txn:
        for i in range(40):
            txn.set(table, b"r%02d" % i, "v", b"x")
    bp = BackPressure(cluster, [table], target_s=0.2, interval_s=0.05, min_backlog=10)
    time.sleep(0.3)  # the notifications are older than the target now
    bp.start()
    try:
        time.sleep(0.3)
        assert bp.backlog >= 40 and bp.rate is None and "no observer worker" in bp.describe()
        ensure_workers_table(cluster.store)
        member = Membership(cluster.store, "bp-worker", grace_ms=60_000, describe=lambda: {"worker": "bp-worker"})
        member.beat()
        deadline = time.monotonic() + 5
        while bp.rate is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert bp.rate is not None and "paced to" in bp.describe()
        member.beat(alive=False)
    finally:
        bp.stop()
