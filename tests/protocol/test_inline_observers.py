"""Inline observers (``Observer.inline``): run inside the transaction of the run that changed
their column on the same row, on the real HBase and on the in-memory store."""

from __future__ import annotations

import uuid

import pytest

from caffeine.percolator import Application, Observer
from caffeine.percolator.engine_status import pending_notifications, wait_until_quiescent
from caffeine.percolator.layout import ack_column
from caffeine.percolator.records import ack_covers, encode_ack, encode_inline_ack
from caffeine.percolator.worker import Worker
from support.publishing import PublishingObserver, publish_three_rows


def unique(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:6]}"


def quiesce(cluster, app, timeout_s=120):
    wait_until_quiescent(cluster, app.observed_tables, timeout_s=timeout_s, poll_s=0.05)


def _incr(txn, table, row, column):
    txn.set(table, row, column, str(int(txn.get(table, row, column) or b"0") + 1))


def _step(table, src, dst):
    def run(txn, row, column):
        _incr(txn, table, row, f"{src}_runs")
        if dst:
            txn.set(table, row, dst, txn.get(table, row, src))
    return run


def test_an_inline_chain_commits_once_per_change_and_leaves_no_notification(cluster):
    table = unique("inline")
    app = Application("inline", [
        Observer("A", table, "a", _step(table, "a", "b")),
        Observer("B", table, "b", _step(table, "b", "c"), inline=True),
        Observer("C", table, "c", _step(table, "c", None), inline=True),
    ])
    app.install(cluster)
    rows = [b"r%03d" % i for i in range(20)]
    with cluster.begin() as txn:
        for row in rows:
            txn.set(table, row, "a", b"x")
    with Worker(cluster, app, threads=4) as worker:
        quiesce(cluster, app)
    with cluster.begin() as txn:
        for row in rows:
            got = txn.get_row(table, row, ["a_runs", "b_runs", "c_runs", "c", ack_column("B"), ack_column("C")])
            assert {k: got[k] for k in ("a_runs", "b_runs", "c_runs", "c")} == \
                {"a_runs": b"1", "b_runs": b"1", "c_runs": b"1", "c": b"x"}, (row, got)
            # Both acks name the one transaction that ran all three.
            assert got[ack_column("B")] == got[ack_column("C")] and got[ack_column("B")].startswith(b"="), got
    assert worker.metrics.commits == len(rows), "one transaction per row, not three"
    assert worker.metrics.inline == 2 * len(rows)
    assert pending_notifications(cluster.store, [table]).count == 0


def test_an_inline_run_with_work_after_the_commit_keeps_its_notification_until_the_work_is_done(cluster):
    # B runs inline and publishes after the commit; the publish fails for r1 once and r2
    # twice: B's notification must outlive those failures, and B's redo (not a second
    # transaction) must publish what the one commit wrote.
    table = unique("inline_redo")
    pub = PublishingObserver(table, "b", failures={b"r1": 1, b"r2": 2})
    app = Application("inline_redo", [
        Observer("A", table, "a", _step(table, "a", "b")),
        Observer("B", table, "b", pub.run, redo=pub.redo, inline=True),
    ])
    app.install(cluster)
    # A's run writes b = a: B runs inline in it, once per change, and its work is redone.
    worker = publish_three_rows(cluster, app, table, "a", pub)
    assert worker.metrics.commits == 3 and worker.metrics.inline == 3 and worker.metrics.redos == 3


def test_a_column_written_again_after_its_inline_observer_ran_is_run_one_transaction_each(cluster):
    # A writes b, B (inline) copies b to c, C (inline) marks b "done": b changes after B ran
    # in that transaction, so B would not have seen the b that commits. The worker runs A
    # alone instead, and every change of b is then run by B, the last one included.
    table = unique("inline_cycle")

    def mark(txn, row, column):
        _incr(txn, table, row, "c_runs")
        if txn.get(table, row, "b") != b"done":
            txn.set(table, row, "b", b"done")

    app = Application("inline_cycle", [
        Observer("A", table, "a", _step(table, "a", "b")),
        Observer("B", table, "b", _step(table, "b", "c"), inline=True),
        Observer("C", table, "c", mark, inline=True),
    ])
    app.install(cluster)
    with cluster.begin() as txn:
        txn.set(table, b"r", "a", b"x")
    with Worker(cluster, app, threads=2):
        quiesce(cluster, app)
    with cluster.begin() as txn:
        got = txn.get_row(table, b"r", ["a_runs", "b_runs", "c_runs", "b", "c"])
    assert got == {"a_runs": b"1", "b_runs": b"2", "c_runs": b"2", "b": b"done", "c": b"done"}
    assert pending_notifications(cluster.store, [table]).count == 0


def test_an_ack_covers_its_change_and_the_earlier_ones_by_commit_or_by_start():
    change = (120, 100)  # committed at 120, started at 100
    assert not ack_covers(None, change) and not ack_covers(b"", change)
    assert ack_covers(encode_ack(120), change) and ack_covers(encode_ack(130), change)
    assert not ack_covers(encode_ack(119), change)
    assert ack_covers(encode_inline_ack(100), change) and ack_covers(encode_inline_ack(125), change)
    assert not ack_covers(encode_inline_ack(99), change)


def test_inline_is_for_strong_observers():
    with pytest.raises(ValueError, match="inline is for strong observers"):
        Observer("w", "t", "c", lambda txn, row, column: None, notification="weak", inline=True)
