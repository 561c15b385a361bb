"""The observer engine, in-process: on the real HBase and on the in-memory store.

Workers run as threads here; tests/faults/test_observer_processes.py kills real worker processes.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from caffeine.percolator import testing as txn_steps
from caffeine.percolator import Application, Observer
from caffeine.percolator.layout import NOTIFY, qualifier
from caffeine.percolator.engine_status import pending_notifications, wait_until_quiescent
from caffeine.percolator.worker import Worker
from caffeine.percolator.workers_table import list_failures
from caffeine.storage import ReadSpec
from support.observer_apps import chain_app
from support.publishing import PublishingObserver, publish_three_rows


def unique(name: str) -> str:
    return f"{name}_{uuid.uuid4().hex[:6]}"


def quiesce(cluster, app, timeout_s=120):
    wait_until_quiescent(cluster, app.observed_tables, timeout_s=timeout_s, poll_s=0.05)


def test_a_chain_of_three_observers_runs_each_change_once(cluster):
    table = unique("chain")
    app = chain_app(table)
    app.install(cluster)
    rows = [b"r%03d" % i for i in range(40)]
    with Worker(cluster, app, threads=4) as worker:
        for i in range(0, len(rows), 8):
            with cluster.begin() as txn:
                for row in rows[i:i + 8]:
                    txn.set(table, row, "a", b"x")
        quiesce(cluster, app)
    with cluster.begin() as txn:
        for row in rows:
            got = txn.get_row(table, row, ["a_runs", "b_runs", "c_runs", "c"])
            assert got == {"a_runs": b"1", "b_runs": b"1", "c_runs": b"1", "c": b"x"}, (row, got)
    assert worker.metrics.commits == 3 * len(rows)
    assert pending_notifications(cluster.store, [table]).count == 0


def test_many_changes_before_a_run_collapse_into_fewer_runs(cluster):
    table = unique("collapse")
    runs = []

    def copy(txn, row, column):
        runs.append(1)
        txn.set(table, row, "copy", txn.get(table, row, "v"))

    app = Application("collapse", [Observer("copy", table, "v", copy)])
    app.install(cluster)
    for i in range(30):
        with cluster.begin() as txn:
            txn.set(table, b"hot", "v", b"%d" % i)
    with Worker(cluster, app, threads=2):
        quiesce(cluster, app)
    assert 1 <= len(runs) < 30
    with cluster.begin() as txn:
        assert txn.get(table, b"hot", "copy") == b"29"


def install_tally(cluster, table: str) -> Application:
    """A weak observer on (table, *, "in") writing "total": an idempotent recount of every
    ``src-*`` row that points at the hot row."""

    def tally(txn, row, column):
        total = sum(1 for _ in txn.scan(table, b"src-", b"src.", ["points"]))
        txn.set(table, row, "total", str(total))

    app = Application(table, [Observer("tally", table, "in", tally, notification="weak")])
    app.install(cluster)
    return app


def test_weak_notifications_at_a_hot_row_do_not_storm(cluster):
    table = unique("weak")
    app = install_tally(cluster, table)

    def feed(k):
        for i in range(10):
            with cluster.begin() as txn:
                txn.set(table, b"src-%d-%d" % (k, i), "points", b"hot")
                txn.notify(table, b"hot", "in")

    with Worker(cluster, app, threads=2) as worker:
        feeders = [threading.Thread(target=feed, args=(k,)) for k in range(4)]
        for f in feeders:
            f.start()
        for f in feeders:
            f.join()
        quiesce(cluster, app)
    with cluster.begin() as txn:
        assert txn.get(table, b"hot", "total") == b"40"
    assert worker.metrics.runs < 40, "notifications collapsed"
    assert worker.metrics.conflicts <= 5


def test_a_weak_notification_overwritten_by_a_later_commit_is_still_observed(cluster):
    """T1 notifies, T2 notifies the same cell later (one version: T2's replaces T1's) and
    commits first; the run T2's notification starts waits on T1's lock, and T1 commits after
    that run's snapshot. The run clears the cell having seen only T2: T1's change must still
    be observed (its commit writes the notification again)."""
    table = unique("weak_late")
    app = install_tally(cluster, table)
    t1 = cluster.begin()
    t1.set(table, b"src-1", "points", b"hot")
    t1.notify(table, b"hot", "in")
    txn_steps.prewrite(t1)
    with cluster.begin() as t2:
        t2.set(table, b"src-2", "points", b"hot")
        t2.notify(table, b"hot", "in")

    def commit_t1_late():
        time.sleep(1.0)  # the tally run is waiting on T1's lock by now
        txn_steps.commit_primary(t1)
        txn_steps.commit_secondaries(t1)

    late = threading.Thread(target=commit_t1_late)
    with Worker(cluster, app, threads=1):
        late.start()
        late.join()
        quiesce(cluster, app)
    with cluster.begin() as txn:
        assert txn.get(table, b"hot", "total") == b"2"


def test_an_observer_that_writes_nothing_commits_nothing_and_clears_its_notification(cluster):
    """A run that found nothing to do commits nothing, not even its ack (a prewrite and a
    commit spared); its notification goes all the same."""
    table = unique("noop")
    observer = Observer("noop", table, "v", lambda txn, row, column: None)
    app = Application("noop", [observer])
    app.install(cluster)
    with cluster.begin() as txn:
        txn.set(table, b"r", "v", b"1")
    with Worker(cluster, app, threads=1) as worker:
        quiesce(cluster, app)
    assert worker.metrics.runs == 1 and worker.metrics.commits == 0
    assert pending_notifications(cluster.store, [table]).count == 0
    with cluster.begin() as txn:
        assert txn.get(table, b"r", observer.ack_column) is None


def test_a_self_retriggering_observer_stops_when_it_stops_writing(cluster):
    table = unique("countdown")

    def countdown(txn, row, column):
        n = int(txn.get(table, row, "n"))
        if n > 0:
            txn.set(table, row, "n", str(n - 1))

    app = Application("countdown", [Observer("countdown", table, "n", countdown)])
    app.install(cluster)
    with cluster.begin() as txn:
        txn.set(table, b"r", "n", b"5")
    with Worker(cluster, app, threads=1) as worker:
        quiesce(cluster, app)
    with cluster.begin() as txn:
        assert txn.get(table, b"r", "n") == b"0"
    # Five runs wrote; the sixth found n = 0 and committed nothing.
    assert worker.metrics.runs == 6 and worker.metrics.commits == 5


def test_a_failing_observer_is_retried_and_surfaced_while_neighbours_flow(cluster):
    table = unique("fail")
    attempts = []
    heal = threading.Event()

    def flaky(txn, row, column):
        if row == b"bad" and not heal.is_set():
            attempts.append(1)
            raise ValueError("cannot parse this one")
        txn.set(table, row, "ok", b"1")

    app = Application("flaky", [Observer("flaky", table, "v", flaky)])
    app.install(cluster)
    with cluster.begin() as txn:
        for row in (b"bad", b"good1", b"good2"):
            txn.set(table, row, "v", b"x")
    with Worker(cluster, app, threads=2):
        deadline = __import__("time").monotonic() + 30
        while len(attempts) < 3 and __import__("time").monotonic() < deadline:
            __import__("time").sleep(0.05)
        assert len(attempts) >= 3, "retried with backoff"
        failures = [f for f in list_failures(cluster.store) if f["table"] == table]
        assert failures and failures[0]["row"] == "bad" and "cannot parse" in failures[0]["error"]
        assert failures[0]["attempts"] >= 2
        with cluster.begin() as txn:
            assert txn.get(table, b"good1", "ok") == b"1" and txn.get(table, b"good2", "ok") == b"1"
        heal.set()
        quiesce(cluster, app)
    with cluster.begin() as txn:
        assert txn.get(table, b"bad", "ok") == b"1"
    assert not [f for f in list_failures(cluster.store) if f["table"] == table]


def test_post_commit_work_that_fails_is_redone_without_a_second_commit(cluster):
    # A run commits, then its on_commit work fails: the notification must survive, and the
    # worker must call the observer's redo (not run a second transaction for the change).
    table = unique("redo")
    pub = PublishingObserver(table, "v", failures={b"r1": 1, b"r2": 2})
    app = Application("redo", [Observer("pub", table, "v", pub.run, redo=pub.redo)])
    app.install(cluster)
    worker = publish_three_rows(cluster, app, table, "v", pub)
    assert worker.metrics.commits == 3 and worker.metrics.redos == 3


def test_a_backfill_rerun_whose_post_commit_work_fails_is_redone(cluster):
    # `caffeine notify` writes its notification at its own commit_ts, newer than the change it
    # re-runs the observer for. If that re-run commits and its on_commit work then fails, the
    # notification is all that is left to get the work done: the next pass must call redo
    # (the ack covers the change), not take the notification for a stale one and drop it.
    from caffeine.ops.backfill import backfill

    table = unique("bfredo")
    code = {"version": b"v1"}  # what the observer's code makes of a value (a new parser, say)
    side, fail_next = {}, {"n": 0}
    redos = []

    def publish(row, value):
        if fail_next["n"] > 0:
            fail_next["n"] -= 1
            raise OSError("serving system unreachable")
        side[row] = value

    def run(txn, row, column):
        value = code["version"] + b":" + txn.get(table, row, "v")
        txn.set(table, row, "published", value)
        txn.on_commit(lambda: publish(row, value))

    def redo(txn, row, column):
        redos.append(row)
        value = txn.get(table, row, "published")
        txn.on_commit(lambda: publish(row, value))

    app = Application("bfredo", [Observer("pub", table, "v", run, redo=redo)])
    app.install(cluster)
    with cluster.begin() as txn:
        txn.set(table, b"r", "v", b"x")
    with Worker(cluster, app, threads=2):
        quiesce(cluster, app)
    assert side == {b"r": b"v1:x"}
    code["version"], fail_next["n"] = b"v2", 1
    backfill(cluster, app.observers_of(table, "v"), table, "v")
    with Worker(cluster, app, threads=2):
        quiesce(cluster, app)
    with cluster.begin() as txn:
        assert txn.get(table, b"r", "published") == b"v2:x"
    assert side == {b"r": b"v2:x"}, "the re-run's post-commit work was never redone"
    assert redos == [b"r"]


def test_a_scan_listing_from_before_a_clear_does_not_run_the_change_again(cluster, monkeypatch):
    # A scan pass reads notify cells in batches: a pass that began while a notification was
    # being handled can list it, and reach it in its batch after the worker cleared it. The
    # handled change must not be dispatched again (with redo, that redoes committed work).
    table = unique("stale")
    runs, redos = [], []

    def run(txn, row, column):
        runs.append(row)
        time.sleep(0.3)  # the next scan pass begins while this run is in flight
        txn.set(table, row, "published", txn.get(table, row, "v"))

    def redo(txn, row, column):
        redos.append(row)

    app = Application("stale", [Observer("pub", table, "v", run, redo=redo)])
    app.install(cluster)
    with cluster.begin() as txn:
        txn.set(table, b"r", "v", b"1")
    spec = ReadSpec(families=(NOTIFY,))
    listing = list(cluster.store.scan(table, b"", None, spec))
    assert listing, "the notification is there before the worker runs"
    real_scan = cluster.store.scan
    calls, served, worker = [], threading.Event(), []

    def scan(t, *args, **kw):
        read_spec = args[2] if len(args) > 2 else kw.get("spec")
        if t != table or read_spec != spec:
            return real_scan(t, *args, **kw)
        calls.append(t)
        if len(calls) != 2:
            return real_scan(t, *args, **kw)

        def batch_read_before_the_clear():
            # This pass's batch was read while the run was in flight; it is iterated after
            # the notification was handled and cleared.
            deadline = time.monotonic() + 10
            while not (worker and worker[0].metrics.cleared) and time.monotonic() < deadline:
                time.sleep(0.01)
            yield from listing
            served.set()

        return batch_read_before_the_clear()

    monkeypatch.setattr(cluster.store, "scan", scan)
    with Worker(cluster, app, threads=2) as w:
        worker.append(w)
        assert served.wait(15)
        quiesce(cluster, app)
        time.sleep(0.3)
    assert w.metrics.cleared == 1
    assert runs == [b"r"] and redos == [], "a handled change ran again"
    assert w.metrics.stale == 0 and w.metrics.redos == 0


def test_declared_reads_come_with_the_workers_first_read(cluster, monkeypatch):
    table = unique("reads")
    calls = []
    for name in ("read_row", "read_rows"):
        real = getattr(cluster.store, name)
        monkeypatch.setattr(cluster.store, name, lambda *a, _real=real, **k: calls.append(a[1]) or _real(*a, **k))
    seen = {}

    def copy(txn, row, column):
        before = len(calls)
        seen[row] = txn.get_row(table, row, ["v", "w"])
        seen[row + b"-again"] = txn.get(table, row, "w")  # a snapshot read twice: read once
        seen["reads"] = len(calls) - before
        txn.set(table, row, "copy", seen[row]["v"])

    app = Application("reads", [Observer("copy", table, "v", copy, reads=("v", "w"))])
    app.install(cluster)
    with cluster.begin() as txn:
        txn.set(table, b"r", "v", b"1")
        txn.set(table, b"r", "w", b"2")
    with Worker(cluster, app, threads=1):
        quiesce(cluster, app)
    assert seen[b"r"] == {"v": b"1", "w": b"2"} and seen[b"r-again"] == b"2"
    assert seen["reads"] == 0, "no round trip inside the observer for declared columns"
    with cluster.begin() as txn:
        assert txn.get(table, b"r", "copy") == b"1"


def test_redo_is_only_for_strong_observers():
    with pytest.raises(ValueError, match="redo is for strong observers"):
        Observer("w", "t", "c", lambda *a: None, notification="weak", redo=lambda *a: None)


def test_roll_forward_of_an_observed_write_keeps_its_notifications(cluster):
    table = unique("rollfwd")
    seen = []
    app = Application("rollfwd", [Observer("seen", table, "v", lambda txn, row, column: seen.append(row))])
    app.install(cluster)
    txn = cluster.begin()
    txn.set(table, b"p", "v", b"1")
    txn.set(table, b"s", "v", b"1")
    txn_steps.prewrite(txn)
    txn_steps.commit_primary(txn)  # the writer "dies" before its secondaries
    with cluster.begin() as reader:
        assert reader.get(table, b"s", "v") == b"1"  # rolls s forward
    notified = cluster.store.read_row(table, b"s", ReadSpec(families=(NOTIFY,))).latest(NOTIFY, qualifier("v"))
    assert notified is not None
    with Worker(cluster, app, threads=1):
        quiesce(cluster, app)
    assert sorted(seen) == [b"p", b"s"]


def test_pending_printer_prints_each_count_once():
    import io

    from caffeine.percolator.engine_status import Pending, pending_printer

    out = io.StringIO()
    progress = pending_printer(out, every_s=0.0)
    first, second = Pending(5, None), Pending(3, None)
    for pending in (first, first, second, second):
        progress(pending)
    assert out.getvalue() == "  5 notifications pending\n  3 notifications pending\n"


def test_handled_notifications_are_deleted_in_batches(cluster, monkeypatch):
    from caffeine.percolator.clearer import NotificationClearer
    from caffeine.storage import DeleteUpTo, Put, StorageError

    table = unique("clear")
    cluster.create_table(table)
    store = cluster.store
    rows = [b"n%02d" % i for i in range(20)]
    store.put_rows(table, {r: [Put(NOTIFY, b"c", 5, b""), Put(NOTIFY, b"d", 9, b"")] for r in rows})
    sent, results = [], []
    real = store.delete_rows
    monkeypatch.setattr(store, "delete_rows", lambda t, batch: sent.append(len(batch)) or real(t, batch))
    clearer = NotificationClearer(store, max_delay_s=0.2)
    for r in rows:
        clearer.clear(table, r, DeleteUpTo(NOTIFY, b"c", 5), results.append)
        clearer.clear(table, r, DeleteUpTo(NOTIFY, b"d", 8), results.append)  # below the version: kept
    deadline = time.monotonic() + 10
    while len(results) < 2 * len(rows) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert results == [True] * (2 * len(rows))
    assert sent == [len(rows)], "one round trip for all of them"
    left = {row.key: set(row.family(NOTIFY)) for row in store.scan(table, spec=ReadSpec(families=(NOTIFY,)))}
    assert left == {r: {b"d"} for r in rows}

    # A failed delete says so; the notification stays for a later pass.
    monkeypatch.setattr(store, "delete_rows", lambda t, batch: (_ for _ in ()).throw(StorageError("down")))
    clearer.clear(table, rows[0], DeleteUpTo(NOTIFY, b"d", 9), results.append)
    clearer.close()  # sends what is queued
    assert results[-1] is False
    assert b"d" in store.read_row(table, rows[0], ReadSpec(families=(NOTIFY,))).family(NOTIFY)


def test_a_worker_prefetches_the_columns_an_observer_read_on_its_own_last_time(cluster, monkeypatch):
    """Read-ahead: a run that reads a column of its row beyond its declared reads costs one
    more read; the worker remembers the column and fetches it with the next run's first read."""
    table = unique("readahead")
    seen = []

    def run(txn, row, column):
        seen.append((txn.get(table, row, "v"), txn.get(table, row, "extra")))
        txn.set(table, row, "out", b"1")

    app = Application("readahead", [Observer("ra", table, "v", run)])
    app.install(cluster)
    with cluster.begin() as txn:
        for row in (b"r1", b"r2"):
            txn.set(table, row, "v", b"x")
            txn.set(table, row, "extra", b"e-" + row)
    reads = []
    real = cluster.store.read_row

    def counting(t, row, spec=ReadSpec()):
        if t == table:
            reads.append(row)
        return real(t, row, spec)

    monkeypatch.setattr(cluster.store, "read_row", counting)
    worker = Worker(cluster, app, threads=1)
    for row in (b"r1", b"r2"):
        cell = cluster.store.read_row(table, row, ReadSpec(families=(NOTIFY,))).latest(NOTIFY, b"v")
        reads.clear()
        worker.handle(table, row, "v", cell, app.observers)
        if row == b"r1":
            first = list(reads)
    second = list(reads)
    worker.stop()
    assert seen == [(b"x", b"e-r1"), (b"x", b"e-r2")]
    assert second.count(b"r2") == 1 and first.count(b"r1") > 1, (first, second)


def test_a_worker_runs_one_observer_at_a_time_on_a_row(cluster):
    """Two observers of one row (one transaction changed both columns) would race on the
    row's cells: the worker runs them one after the other, never together."""
    table = unique("onerow")
    active: dict[bytes, int] = {}
    most: dict[bytes, int] = {}
    ran: list[tuple[bytes, str]] = []
    lock = threading.Lock()

    def observe(txn, row, column):
        with lock:
            active[row] = active.get(row, 0) + 1
            most[row] = max(most.get(row, 0), active[row])
            ran.append((row, column))
        time.sleep(0.05)
        with lock:
            active[row] -= 1

    app = Application("onerow", [Observer("on-a", table, "a", observe), Observer("on-b", table, "b", observe)])
    app.install(cluster)
    rows = [b"r%d" % i for i in range(6)]
    with cluster.begin() as txn:
        for row in rows:
            txn.set(table, row, "a", b"1")
            txn.set(table, row, "b", b"1")
    with Worker(cluster, app, threads=4):
        quiesce(cluster, app)
    assert sorted(ran) == sorted((row, column) for row in rows for column in ("a", "b"))
    assert max(most.values()) == 1, most


def test_an_observer_with_a_settle_time_handles_the_changes_within_it_in_one_run(cluster):
    """``settle_s``: a notification waits that long, so a burst of changes to a hot row is
    handled by one run; a row changed without pause is still handled every ``settle_s``."""
    table = unique("settle")
    runs: list[float] = []

    def tally(txn, row, column):
        runs.append(time.monotonic())
        txn.set(table, row, "total", b"%d" % sum(1 for _ in txn.scan(table, b"src-", b"src.", ["points"])))

    app = Application(table, [Observer("tally", table, "in", tally, notification="weak", settle_s=1.0)])
    app.install(cluster)

    def point(i):
        with cluster.begin() as txn:
            txn.set(table, b"src-%03d" % i, "points", b"hot")
            txn.notify(table, b"hot", "in")

    with Worker(cluster, app, threads=2):
        first = time.monotonic()
        for i in range(10):  # a burst, well within the settle time
            point(i)
        quiesce(cluster, app)
        assert len(runs) == 1 and runs[0] - first >= 0.9, [r - first for r in runs]
        # Changes that never pause for the settle time: runs go on regardless.
        runs.clear()
        feeding = time.monotonic()
        i = 10
        while time.monotonic() - feeding < 3.5:
            point(i)
            i += 1
            time.sleep(0.1)
        ran_while_feeding = len(runs)
        quiesce(cluster, app)
    assert ran_while_feeding >= 2, "a row changed without pause is handled every settle_s"
    with cluster.begin() as txn:
        assert txn.get(table, b"hot", "total") == b"%d" % i


def test_a_table_whose_observers_all_settle_is_listed_a_bounded_number_of_times(cluster):
    """Under a steady stream some notification is always coming due, yet a table whose every
    observer settles is listed at most ``SETTLE_LISTINGS`` times per settle period (each
    listing walks every notification still settling); every one still runs, within a tenth
    of the settle time after it came due."""
    from caffeine.percolator.worker import SETTLE_LISTINGS

    table = unique("settlepace")
    settle_s = 1.0
    fed: dict[bytes, float] = {}
    ran: dict[bytes, float] = {}

    def note(txn, row, column):
        ran.setdefault(row, time.monotonic())

    app = Application(table, [Observer("note", table, "in", note, notification="weak", settle_s=settle_s)])
    app.install(cluster)
    with Worker(cluster, app, threads=4) as worker:
        began = time.monotonic()
        i = 0
        while time.monotonic() - began < 3.0:  # 20 rows a second, each coming due a second later
            row = b"r%04d" % i
            with cluster.begin() as txn:
                txn.notify(table, row, "in")
            fed[row] = time.monotonic()
            i += 1
            time.sleep(0.05)
        quiesce(cluster, app)
        elapsed = time.monotonic() - began
        passes = worker.metrics.passes
    assert sorted(ran) == sorted(fed)
    assert passes <= elapsed / (settle_s / SETTLE_LISTINGS) + 3, (passes, elapsed)
    late = {row: ran[row] - fed[row] - settle_s for row in fed}
    assert max(late.values()) < 2 * settle_s / SETTLE_LISTINGS + 0.5, sorted(late.values())[-5:]


def test_a_settle_time_is_not_negative():
    with pytest.raises(ValueError):
        Observer("x", "t", "c", lambda *a: None, settle_s=-1)


def test_a_worker_handles_the_oldest_notifications_first(cluster):
    """Notified rows are run in the order their changes committed, not in key order from
    wherever a scan began: a page waits behind older work only, at every stage of a chain."""
    import random as _random

    table = unique("oldest")
    order: list[bytes] = []

    def observe(txn, row, column):
        order.append(row)

    app = Application("oldest", [Observer("fifo", table, "v", observe)])
    app.install(cluster)
    rows = [b"row-%02d" % i for i in range(40)]
    _random.Random(7).shuffle(rows)
    for row in rows:  # one commit each: the commit order is the shuffled order
        with cluster.begin() as txn:
            txn.set(table, row, "v", b"1")
    with Worker(cluster, app, threads=1):
        quiesce(cluster, app)
    assert order == rows
