"""``caffeine notify``: a backfill makes the observer chain run again over rows it already ran on.

On the real HBase and the in-memory store (the ``cluster`` fixture), with real workers as
threads; the command itself runs as a child process against the real HBase.
"""

from __future__ import annotations

import json
import uuid

import pytest

from caffeine.ops.backfill import Checkpoint, backfill
from caffeine.ops.rows import RowRange, prefix_stop
from caffeine.percolator import Application, Observer
from caffeine.percolator.engine_status import pending_notifications, wait_until_quiescent
from caffeine.percolator.worker import Worker
from support.cli_helpers import assert_no_stack_trace, cli_env, run_cli
from support.session import SESSION_PREFIX
from support.observer_apps import chain_app


def unique(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:6]}"


def quiesce(cluster, app):
    wait_until_quiescent(cluster, app.observed_tables, timeout_s=120, poll_s=0.05)


def runs(cluster, table, rows):
    with cluster.begin() as txn:
        got = txn.get_rows(table, rows, ["a_runs", "b_runs", "c_runs"])
    return {row: tuple(int(v or b"0") for v in got[row].values()) for row in rows}


def crawl(cluster, table, rows):
    """The chain runs once over every row (the 'old data')."""
    with cluster.begin() as txn:
        for row in rows:
            txn.set(table, row, "a", b"v1")
    # Rows without the backfilled column: never notified by it.
    with cluster.begin() as txn:
        txn.set(table, b"zz-no-a", "other", b"x")


def test_prefix_stop_is_the_first_key_after_the_prefix():
    assert prefix_stop(b"ab") == b"ac"
    assert prefix_stop(b"a\xff") == b"b"
    assert prefix_stop(b"\xff\xff") is None
    rng = RowRange.of(prefix="r1")
    assert (rng.start, rng.stop) == (b"r1", b"r2")
    with pytest.raises(ValueError):
        RowRange.of(start="b", stop="a")


def test_backfill_reruns_the_whole_chain_on_the_rows_of_a_prefix_only(cluster):
    table = unique("backfill")
    app = chain_app(table)
    app.install(cluster)
    rows = [b"r%02d" % i for i in range(30)]
    with Worker(cluster, app, threads=4):
        crawl(cluster, table, rows)
        quiesce(cluster, app)
        assert set(runs(cluster, table, rows).values()) == {(1, 1, 1)}

        progress = backfill(cluster, app.observers_of(table, "a"), table, "a", RowRange.of(prefix="r1"), batch_size=4)
        assert progress.rows == 10 and progress.batches == 3 and progress.acks_cleared == 10
        quiesce(cluster, app)
    after = runs(cluster, table, rows)
    for row in rows:
        # A ran again on r10..r19 and rewrote b, so B and C ran again too; nothing else ran.
        expected = (2, 2, 2) if row.startswith(b"r1") else (1, 1, 1)
        assert after[row] == expected, (row, after[row])
    with cluster.begin() as txn:
        assert txn.get(table, b"zz-no-a", "a_runs") is None
    assert pending_notifications(cluster.store, [table]).count == 0


def test_an_interrupted_backfill_resumes_after_its_last_committed_batch(cluster, tmp_path):
    table = unique("resume")
    app = chain_app(table)
    app.install(cluster)
    rows = [b"r%02d" % i for i in range(12)]
    checkpoint = Checkpoint.for_backfill(tmp_path, "p_", table, "a", RowRange())
    with Worker(cluster, app, threads=4):
        crawl(cluster, table, rows)
        quiesce(cluster, app)

        class Interrupted(Exception):
            pass

        def stop_after_two(progress):
            if progress.batches == 2:
                raise Interrupted

        with pytest.raises(Interrupted):
            backfill(cluster, app.observers_of(table, "a"), table, "a", batch_size=5,
                     checkpoint=checkpoint, on_batch=stop_after_two)
        assert checkpoint.load() == (b"r09", 10)
        progress = backfill(cluster, app.observers_of(table, "a"), table, "a", batch_size=5, checkpoint=checkpoint)
        assert progress.rows == 12 and progress.batches == 1  # only r10, r11 were left
        assert checkpoint.load() is None
        quiesce(cluster, app)
    # Every row ran exactly once more: none skipped, none twice.
    assert set(runs(cluster, table, rows).values()) == {(2, 2, 2)}


def test_a_run_in_flight_with_the_old_code_cannot_outlive_a_later_backfill(cluster):
    """Backfill 1 deletes the ack; a worker starts the re-run with the code of then; the new
    code is deployed and backfill 2 runs while that run is still in flight (the ack still
    absent). Backfill 2 must make the in-flight run lose (or run after it): otherwise the run
    commits the old code's output, acks the change, and the new code never runs for the row."""
    import threading

    from caffeine.percolator.layout import NOTIFY, column_name
    from caffeine.storage import ReadSpec

    table = unique("inflight")
    code = {"version": b"v1"}
    in_run, release = threading.Event(), threading.Event()
    hold = {"on": False}

    def run(txn, row, column):
        made = code["version"] + b":" + txn.get(table, row, "v")
        if hold["on"]:
            hold["on"] = False
            in_run.set()
            release.wait(30)
        txn.set(table, row, "out", made)

    app = Application("inflight", [Observer("out", table, "v", run)])
    app.install(cluster)
    with cluster.begin() as txn:
        txn.set(table, b"r", "v", b"x")
    with Worker(cluster, app, threads=2):
        quiesce(cluster, app)
    backfill(cluster, app.observers_of(table, "v"), table, "v")  # 1: deletes the ack

    # A worker picks the notification up and runs the old code; it stays in flight.
    row = cluster.store.read_row(table, b"r", ReadSpec(families=(NOTIFY,)))
    (q, versions), = row.family(NOTIFY).items()
    worker = Worker(cluster, app, threads=1)
    hold["on"] = True
    handler = threading.Thread(target=worker.handle, args=(table, b"r", column_name(q), versions[0], app.observers))
    handler.start()
    assert in_run.wait(30)
    code["version"] = b"v2"
    backfill(cluster, app.observers_of(table, "v"), table, "v")  # 2: the new code's
    release.set()
    handler.join(30)
    worker.stop()
    with Worker(cluster, app, threads=2):
        quiesce(cluster, app)
    with cluster.begin() as txn:
        assert txn.get(table, b"r", "out") == b"v2:x", "the new code never ran for the row"


def test_a_weak_observer_runs_again_on_the_notification_alone(cluster):
    table = unique("weak")
    seen = []

    def count(txn, row, column):
        seen.append(row)
        txn.set(table, row, "n", str(len(txn.get(table, row, "v") or b"")))

    app = Application("weak", [Observer("count", table, "v", count, notification="weak")])
    app.install(cluster)
    with Worker(cluster, app, threads=2):
        with cluster.begin() as txn:
            for i in range(5):
                txn.set(table, b"k%d" % i, "v", b"abc")
        quiesce(cluster, app)
        before = len(seen)
        progress = backfill(cluster, app.observers_of(table, "v"), table, "v")
        assert progress.rows == 5 and progress.acks_cleared == 0
        quiesce(cluster, app)
    assert sorted(seen[before:]) == [b"k%d" % i for i in range(5)]


@pytest.mark.hbase
def test_the_notify_command_reruns_observers_and_scan_shows_the_result(hbase_store, hbase_settings, tmp_path):
    from caffeine.percolator.cluster import Cluster
    from support.session import oracle_for

    table = unique("cli")
    app = chain_app(table)
    cluster = Cluster(hbase_store, oracle_for(hbase_settings), hbase_settings)
    try:
        app.install(cluster)
        rows = [b"p%02d" % i for i in range(6)]
        env = cli_env(table_prefix=SESSION_PREFIX, test_chain_table=table)
        with Worker(cluster, app, threads=2):
            crawl(cluster, table, rows)
            quiesce(cluster, app)
            done = run_cli("notify", table, "a", "--app", "tests/support/observer_apps.py:chain", "--batch-size", "4",
                           "--checkpoint", str(tmp_path / "cp.json"), env=env)
            assert done.returncode == 0, done.stderr
            assert "notified 6 rows" in done.stdout
            assert "4 rows notified" in done.stderr  # progress: the first batch, then every 2 s
            quiesce(cluster, app)
        scanned = run_cli("scan", table, "--row-prefix", "p", "--column", "a_runs", "--column", "c_runs", "--json", env=env)
        assert scanned.returncode == 0, scanned.stderr
        lines = [json.loads(line) for line in scanned.stdout.splitlines()]
        assert [line["row"] for line in lines] == [r.decode() for r in rows]
        assert all(line["columns"] == {"a_runs": "2", "c_runs": "2"} for line in lines), lines

        unwatched = run_cli("notify", table, "a_runs", "--app", "tests/support/observer_apps.py:chain", env=env)
        assert unwatched.returncode == 2 and "no observer" in unwatched.stderr
        assert_no_stack_trace(unwatched.stderr)
    finally:
        cluster.executor.shutdown(wait=True)
        cluster.owners.close()
        cluster.oracle.close()
