"""Real HBase, real faults: the protocol's invariants hold while the network and the Thrift
servers misbehave (tests/support/fault_proxy.py in front of both Thrift servers).

The proxy injects, per request and at seeded random rates: lost replies of applied writes
(``drop_reply``), a Thrift ``TIOError``/``IOError`` answered for a write the server applied
(``error_after_apply``), delays, and connection resets before a request arrives whole.

- The proxy's own tests prove each injection is real: the client sees a failure while the
  write is visible when read directly (not through the proxy); a reset applies nothing;
  reads and scans ride the faults out; ``close()`` leaves no thread or socket.
- Bank: transfer processes (tests/support/bank_child.py, ``cluster.run``) and a thread doing
  plain ``begin()``/commit transfers talk to HBase only through the proxies; checkers read
  every account in one snapshot, directly and through the proxies: every snapshot sums to the
  total. After faults are switched off: a final snapshot sums right, and once every account
  was read no lock is left.
- Observers: worker processes run tests/support/fault_apps.py (two strong observers, each run
  counting itself in the observed row and in a counter row of another table) through the
  proxies under faults; every change is counted exactly once by each observer, in its row and
  in the tallies, and no lock is left.

Each test prints the proxies' counts (``pytest -s``). ``CAFFEINE_TEST_FAULT_SEED`` picks the
proxies' seed (the fault sequence still depends on thread timing).
"""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter

import happybase
import Hbase_thrift
import pytest
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TBufferedTransportFactory

from caffeine.errors import CaffeineError
from caffeine.oracle.client import OracleClient
from caffeine.percolator.cluster import Cluster
from caffeine.percolator.layout import LOCK
from caffeine.percolator.engine_status import pending_notifications, wait_until_quiescent
from caffeine.storage import ReadSpec, StorageError
from caffeine.storage.hbase import HBaseStore
from caffeine.storage.model import FamilySpec, Put
from support.bank import ACCOUNTS, COLUMN, TOTAL, Ledger, account, follow
from support.child_helpers import alive_or_fail, child_env, run_for, stop_cleanly, wait_started
from support.fault_apps import tally_app
from support.fault_proxy import INJECTED_MESSAGE, THRIFT1_WRITES, FaultProxy
from support.session import close_keeping_store
from support.workers import stop_workers

pytestmark = pytest.mark.hbase

FAULTS = {"drop_reply": 0.04, "error_after_apply": 0.04, "delay": 0.05, "reset": 0.02}

PROCESSES = 3
BANK_FAULT_S = 35.0

CHANGES = 240
OBSERVER_WORKERS = 2
OBSERVER_FEED_S = 20.0

# The fixtures (proxies, children, workers, fast_cluster, bank_table, say) are tests/faults/conftest.py's.


def through(settings, p1: FaultProxy, p2: FaultProxy):
    """Settings whose Thrift servers are the proxies."""
    return settings.model_copy(update={"thrift1_host": "127.0.0.1", "thrift1_port": p1.port,
                                       "thrift2_host": "127.0.0.1", "thrift2_port": p2.port})


def report(p1: FaultProxy, p2: FaultProxy) -> str:
    def one(p):
        faults = Counter()
        for (kind, method), n in p.faults_by_method.items():
            if kind != "resets":
                faults[f"{kind}:{method}"] += n
        return f"{p.name} {p.counts} by method {dict(faults.most_common(8))}"
    return "\n  ".join(["proxy counts:", one(p1), one(p2)])


# -- the proxy itself ------------------------------------------------------------------------

def test_a_dropped_reply_hides_an_applied_write(hbase_store, hbase_settings, proxies):
    p1, p2 = proxies
    table = "fp_" + uuid.uuid4().hex[:8]
    hbase_store.create_table(table, {b"f": FamilySpec()})
    store = HBaseStore(through(hbase_settings, p1, p2))
    try:
        store.thrift2.retry_deadline_s = 1.0  # every reply is lost: give up soon
        p2.set_rates(drop_reply=1.0)
        with pytest.raises(StorageError):
            store.mutate_row(table, b"row", [Put(b"f", b"q", 7, b"applied")])
        assert p2.counts["dropped_replies"] >= 2, p2.counts  # the pool retried, and lost again
        assert store.stats.as_dict().get("retried_calls", 0) >= 1
        row = hbase_store.read_row(table, b"row")
        assert [(c.ts, c.value) for c in row] == [(7, b"applied")]
    finally:
        store.close()
    print(report(p1, p2))


def test_a_reset_applies_nothing(hbase_store, hbase_settings, proxies):
    p1, p2 = proxies
    table = "fp_" + uuid.uuid4().hex[:8]
    hbase_store.create_table(table, {b"f": FamilySpec()})
    store = HBaseStore(through(hbase_settings, p1, p2))
    try:
        store.thrift2.retry_deadline_s = 1.0
        p2.set_rates(reset=1.0)
        with pytest.raises(StorageError):
            store.mutate_row(table, b"row", [Put(b"f", b"q", 7, b"never")])
        assert p2.counts["resets"] >= 2 and p2.counts["forwarded"] == 0, p2.counts
        assert not hbase_store.read_row(table, b"row")
        p2.set_rates()  # faults off: the same store works again
        store.mutate_row(table, b"row", [Put(b"f", b"q", 8, b"now")])
        assert [c.value for c in hbase_store.read_row(table, b"row")] == [b"now"]
    finally:
        store.close()
    print(report(p1, p2))


def our_tcp_sockets(port: int) -> int:
    """How many of this process's TCP sockets have ``port`` at either end (Linux /proc)."""
    ours = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            ours.add(target[8:-1])
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            ports = {int(fields[1].rsplit(":", 1)[1], 16), int(fields[2].rsplit(":", 1)[1], 16)}
            if fields[9] in ours and port in ports:
                count += 1
    return count


def test_close_leaves_no_thread_or_socket(hbase_store, hbase_settings):
    s = hbase_settings
    upstream_before = our_tcp_sockets(s.thrift1_port)
    proxy = FaultProxy(s.thrift1_host, s.thrift1_port, service=Hbase_thrift.Hbase, write_methods=THRIFT1_WRITES,
                       seed=1, rates={"delay": 0.5}, name="leak-check")
    conns = [happybase.Connection("127.0.0.1", proxy.port, timeout=10_000) for _ in range(3)]
    for conn in conns:
        conn.tables()
    assert our_tcp_sockets(s.thrift1_port) == upstream_before + 3
    proxy.close()  # with the three client connections still open
    for conn in conns:
        conn.close()
    assert [t.name for t in threading.enumerate() if t.name.startswith("leak-check")] == []
    assert our_tcp_sockets(proxy.port) == 0
    assert our_tcp_sockets(s.thrift1_port) == upstream_before


def test_an_error_after_apply_reports_an_applied_write_as_failed(hbase_store, hbase_settings, proxies):
    p1, p2 = proxies
    t2 = hbase_store.t2
    table = "fp_" + uuid.uuid4().hex[:8]
    hbase_store.create_table(table, {b"f": FamilySpec()})
    name = (hbase_settings.table_prefix + table).encode()
    p1.set_rates(error_after_apply=1.0)
    p2.set_rates(error_after_apply=1.0)

    # Thrift2, a raw client: the put applies, the answer is TIOError.
    client = make_client(t2.THBaseService, "127.0.0.1", p2.port, trans_factory=TBufferedTransportFactory(),
                         proto_factory=TBinaryProtocolFactory(), timeout=10_000)
    try:
        put = t2.TPut(row=b"r2", columnValues=[t2.TColumnValue(family=b"f", qualifier=b"q", value=b"v2", timestamp=5)])
        with pytest.raises(t2.TIOError) as raised:
            client.put(name, put)
        message = raised.value.message
        assert (message.decode() if isinstance(message, bytes) else message) == INJECTED_MESSAGE
        # The connection is still usable (a well-formed reply), and reads are never answered
        # with an injected error.
        got = client.get(name, t2.TGet(row=b"r2"))
        assert [(cv.value, cv.timestamp) for cv in got.columnValues] == [(b"v2", 5)]
    finally:
        client.close()
    assert p2.counts["errors_after_apply"] == 1, p2.counts

    # Thrift1 (happybase's mutateRows): the same.
    conn = happybase.Connection("127.0.0.1", p1.port, timeout=10_000, autoconnect=False)
    conn.open()
    try:
        with pytest.raises(Hbase_thrift.IOError):
            conn.table(name).put(b"r1", {b"f:q": b"v1"}, timestamp=6)
        assert conn.table(name).row(b"r1") == {b"f:q": b"v1"}
    finally:
        conn.close()
    assert p1.counts["errors_after_apply"] == 1, p1.counts

    for key, value in ((b"r1", b"v1"), (b"r2", b"v2")):
        assert [c.value for c in hbase_store.read_row(table, key)] == [value]
    print(report(p1, p2))


def test_reads_and_scans_ride_out_lost_replies_and_resets(hbase_store, hbase_settings, proxies):
    p1, p2 = proxies
    table = "fp_" + uuid.uuid4().hex[:8]
    hbase_store.create_table(table, {b"f": FamilySpec()})
    hbase_store.put_rows(table, {b"r%04d" % i: [Put(b"f", b"q", 3, b"%d" % i)] for i in range(300)})
    want = [(r.key, list(r)) for r in hbase_store.scan(table)]
    store = HBaseStore(through(hbase_settings, p1, p2))
    try:
        for p in (p1, p2):
            p.set_rates(drop_reply=0.1, reset=0.05, delay=0.05, error_after_apply=1.0)
        # Thrift1 scanners (open, get, close per page), then Thrift2's getScannerResults.
        for versions, batch in ((1, 32), (2, 8)):
            got = [(r.key, list(r)) for r in store.scan(table, spec=ReadSpec(versions=versions), batch_size=batch)]
            assert got == want
        assert list(store.read_rows(table, [b"r0001", b"r0299"])[b"r0299"]) == want[299][1]
    finally:
        store.close()
    assert p1.counts["dropped_replies"] + p1.counts["resets"] > 0, p1.counts
    assert p2.counts["dropped_replies"] + p2.counts["resets"] > 0, p2.counts
    assert p1.counts["errors_after_apply"] == p2.counts["errors_after_apply"] == 0
    print(report(p1, p2))


def test_idempotent_writes_ride_out_errors_after_apply(hbase_store, hbase_settings, proxies):
    """A blind write (explicit timestamps) answered with a server-side error may have applied
    or not; being safe to resend, it is resent, so the caller sees it succeed. (A worker
    registering itself, an observer's failure record, a batch of index cells: none may fail
    for good on one ambiguous answer.)"""
    p1, p2 = proxies
    table = "fp_" + uuid.uuid4().hex[:8]
    hbase_store.create_table(table, {b"f": FamilySpec()})
    store = HBaseStore(through(hbase_settings, p1, p2))
    try:
        p2.set_rates(error_after_apply=0.3)
        for i in range(20):
            store.mutate_row(table, b"m%02d" % i, [Put(b"f", b"q", 7, b"%d" % i)])
            store.put_rows(table, {b"p%02d" % i: [Put(b"f", b"q", 7, b"%d" % i)]})
            store.put_cells(table, {b"c%02d" % i: [(b"f", b"q", 7, b"%d" % i)]})  # a serving table's
    finally:
        p2.set_rates()
        store.close()
    assert p2.counts["errors_after_apply"] >= 8, p2.counts
    rows = {r.key: [c.value for c in r] for r in hbase_store.scan(table)}
    assert rows == {prefix + b"%02d" % i: [b"%d" % i] for i in range(20) for prefix in (b"m", b"p", b"c")}
    print(report(p1, p2))


# -- bank transfers through the proxies -------------------------------------------------------

class Checker:
    """Reads every account in one snapshot, again and again, in its own thread.

    Transaction-layer failures (a storage call that failed for good under faults) are counted
    and survived; a snapshot that does not sum to the total, or any other exception, is kept
    for the test to report.
    """

    def __init__(self, cluster: Cluster, table: str, name: str, seed: int) -> None:
        self.cluster, self.table, self.name = cluster, table, name
        self.snapshots = 0
        self.failures: Counter = Counter()
        self.violations: list[str] = []
        self.crashes: list[BaseException] = []
        self._rng = random.Random(seed)
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def snapshot(self, how: str) -> dict[bytes, int]:
        with self.cluster.begin() as txn:
            if how == "scan":
                return {row: int(cols[COLUMN]) for row, cols in txn.scan(self.table, columns=[COLUMN])}
            rows = [account(i) for i in range(ACCOUNTS)]
            self._rng.shuffle(rows)
            return {row: int(txn.get(self.table, row, COLUMN)) for row in rows}

    def check(self, balances: dict[bytes, int], how: str) -> None:
        total = sum(balances.values())
        if len(balances) != ACCOUNTS or total != TOTAL or min(balances.values()) < 0:
            self.violations.append(f"{self.name} {how} snapshot at {time.monotonic() - self._started:.1f}s: "
                                   f"{len(balances)} accounts, total {total} (expected {TOTAL}): {balances}")

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            how = "scan" if i % 2 else "gets"
            i += 1
            try:
                self.check(self.snapshot(how), how)
            except CaffeineError as exc:
                self.failures[type(exc).__name__] += 1
                continue
            except BaseException as exc:
                self.crashes.append(exc)
                return
            self.snapshots += 1
            self._stop.wait(0.1)  # leave the shared cores to the transfers

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._thread.is_alive(), f"{self.name} hung"


class PlainTransfers:
    """Transfers with ``begin()`` and a commit on leaving the ``with``: no retry helper."""

    def __init__(self, cluster: Cluster, table: str, seed: int) -> None:
        self.cluster, self.table = cluster, table
        self.committed = 0
        self.failures: Counter = Counter()
        self.crashes: list[BaseException] = []
        self._rng = random.Random(seed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="plain-transfers", daemon=True)

    def _run(self) -> None:
        accounts = [account(i) for i in range(ACCOUNTS)]
        while not self._stop.is_set():
            payer, payee = self._rng.sample(accounts, 2)
            try:
                with self.cluster.begin() as txn:
                    a = int(txn.get(self.table, payer, COLUMN))
                    b = int(txn.get(self.table, payee, COLUMN))
                    amount = min(a, self._rng.randint(1, 10))
                    txn.set(self.table, payer, COLUMN, str(a - amount))
                    txn.set(self.table, payee, COLUMN, str(b + amount))
            except CaffeineError as exc:
                self.failures[type(exc).__name__] += 1
                self._stop.wait(0.02)
                continue
            except BaseException as exc:
                self.crashes.append(exc)
                return
            self.committed += 1

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        assert not self._thread.is_alive(), "the plain transfers hung"


@pytest.mark.timeout(300)
def test_bank_total_holds_under_lost_replies_and_errors_after_apply(hbase_store, proxies, fast_cluster, bank_table,
                                                                     children, say):
    p1, p2 = proxies
    direct, table, settings = fast_cluster, bank_table, fast_cluster.settings
    proxied_store = HBaseStore(through(settings, p1, p2))
    proxied = Cluster(proxied_store, OracleClient(settings), settings)

    print()
    env = child_env(settings, thrift1_host="127.0.0.1", thrift1_port=p1.port,
                    thrift2_host="127.0.0.1", thrift2_port=p2.port)
    ledger = Ledger()
    procs = []
    for i in range(PROCESSES):
        ready = threading.Event()
        child = children("bank_child.py", ["--table", table, "--accounts", str(ACCOUNTS), "--seed", str(i)],
                         env, name=f"transfers {i}")
        follow(child, ledger, ready)
        procs.append((child, ready))
    for child, ready in procs:
        wait_started(child, ready)
    transfers = [child for child, _ in procs]

    checkers = [Checker(direct, table, "direct checker", 1), Checker(proxied, table, "proxied checker", 2)]
    plain = PlainTransfers(proxied, table, 3)
    for p in (p1, p2):
        p.set_rates(FAULTS)
    say(f"{PROCESSES} transfer processes and a plain-commit thread through the proxies, faults on: {FAULTS}")
    for worker in (*checkers, plain):
        worker.start()
    try:
        run_for(BANK_FAULT_S, lambda: alive_or_fail(transfers))
        during_faults = ledger.count()
        for p in (p1, p2):
            p.set_rates()
        say(f"faults off; {during_faults} transfers committed by the processes so far")
        time.sleep(3)
        alive_or_fail(transfers)
    finally:
        for worker in (*checkers, plain):
            worker.stop()
        stop_cleanly(transfers)
    time.sleep(0.3)  # the followers' last lines

    with ledger.lock:
        errors = Counter(e.split(" ", 1)[0] for e in ledger.errors)
    say(f"{ledger.count()} transfers committed by the processes ({dict(sorted(ledger.by_process.items()))}), "
        f"{len(ledger.errors)} failed for good {dict(errors)}; plain commits: {plain.committed} committed, "
        f"failed {dict(plain.failures)}")
    for c in checkers:
        say(f"{c.name}: {c.snapshots} snapshots, failed reads {dict(c.failures)}, {len(c.violations)} violations")
    print(report(p1, p2))
    if ledger.errors:
        print("failed transfers (first 5):", *ledger.errors[:5], sep="\n  ")

    try:
        for c in checkers:
            assert not c.crashes, f"{c.name} crashed: {c.crashes[0]!r}"
        assert not plain.crashes, f"plain transfers crashed: {plain.crashes[0]!r}"
        violations = [v for c in checkers for v in c.violations]
        assert not violations, f"{len(violations)} inconsistent snapshots, e.g. {violations[:3]}"
        for child, _ in procs:
            assert child.proc.returncode == 0, f"{child.name} exited {child.proc.returncode}:\n{child.stderr_text()}"
        assert len(ledger.done) == PROCESSES, f"clean stops: {ledger.done}"
        # The faults were real, and work got done through them.
        assert p2.counts["dropped_replies"] > 0 and p2.counts["errors_after_apply"] > 0, p2.counts
        assert during_faults > 0, "no transfer committed under faults"
        assert checkers[0].snapshots >= 10, f"only {checkers[0].snapshots} direct snapshots"

        # Faults off: a final snapshot sums right, directly and through the proxies, and once
        # every account was read no lock is left.
        final = [Checker(direct, table, "final direct", 4), Checker(proxied, table, "final proxied", 5)]
        for c in final:
            for how in ("gets", "scan"):
                c.check(c.snapshot(how), how)
        violations = [v for c in final for v in c.violations]
        assert not violations, violations
        locked = [row.key for row in hbase_store.scan(table, spec=ReadSpec(families=(LOCK,)))]
        assert locked == [], f"locks left after every account was read: {locked}"
    finally:
        close_keeping_store(proxied)()
        proxied_store.close()


# -- observers through the proxies ------------------------------------------------------------

@pytest.mark.timeout(300)
def test_observers_count_every_change_once_under_faults(hbase_store, proxies, fast_cluster, workers, say):
    p1, p2 = proxies
    cluster, settings = fast_cluster, fast_cluster.settings
    table = "tally_" + uuid.uuid4().hex[:6]
    counters = table + "_tally"
    tally_app(table).install(cluster)

    env = child_env(settings, thrift1_host="127.0.0.1", thrift1_port=p1.port,
                    thrift2_host="127.0.0.1", thrift2_port=p2.port)
    env["CAFFEINE_TEST_TALLY_TABLE"] = table
    running = [workers("fault_apps.py:tally", env) for _ in range(OBSERVER_WORKERS)]

    def alive_or_fail() -> None:
        for worker in running:
            worker.alive_or_fail()

    print()
    try:
        for p in (p1, p2):
            p.set_rates(FAULTS)
        say(f"{OBSERVER_WORKERS} workers through the proxies, faults on: {FAULTS}; feeding {CHANGES} changes")
        # Changes arrive throughout the fault window (written directly: exactly one per row).
        rows = [b"row%05d" % i for i in range(CHANGES)]
        batch = 10
        pause = OBSERVER_FEED_S / (CHANGES / batch)
        for i in range(0, CHANGES, batch):
            with cluster.begin() as txn:
                for row in rows[i:i + batch]:
                    txn.set(table, row, "a", b"payload")
            alive_or_fail()
            time.sleep(pause)
        say(f"fed; {pending_notifications(hbase_store, [table]).count} notifications pending; "
            f"a few more seconds of faults")
        time.sleep(5)
        for p in (p1, p2):
            p.set_rates()
        say("faults off")
        waited = wait_until_quiescent(cluster, [table], timeout_s=150, poll_s=0.5)
        say(f"quiescent {waited:.1f}s after faults went off")
        alive_or_fail()
    finally:
        stop_workers(running)
        print(report(p1, p2))

    with cluster.begin() as txn:
        counts = {row: (cols.get("a_runs"), cols.get("b_runs"), cols.get("b"))
                  for row, cols in txn.scan(table, columns=["a_runs", "b_runs", "b"])}
        tallies = {row: cols for row, cols in txn.scan(counters, columns=["a", "b"])}
    wrong = {r: v for r, v in counts.items() if v != (b"1", b"1", b"payload")}
    sums = {col: sum(int(cols.get(col) or 0) for cols in tallies.values()) for col in ("a", "b")}
    say(f"{len(counts)} rows, {len(wrong)} counted wrongly; tallies {sums} (expected {CHANGES} each)")
    assert len(counts) == CHANGES
    assert not wrong, f"{len(wrong)} rows counted wrongly (a_runs, b_runs, b), e.g. {list(wrong.items())[:5]}"
    assert sums == {"a": CHANGES, "b": CHANGES}, f"tallies {sums} disagree with {CHANGES} changes counted once each"
    for t in (table, counters):
        locked = [row.key for row in hbase_store.scan(t, spec=ReadSpec(families=(LOCK,)))]
        assert locked == [], f"locks left in {t}: {locked[:10]}"
    assert p2.counts["dropped_replies"] > 0 and p2.counts["errors_after_apply"] > 0, p2.counts
