"""HBase itself killed: SIGKILL the HBase JVM in the middle of a bank run, restart it, audit.

Real processes, real HBase, real timestamp oracle. ``ACCOUNTS`` accounts start with
``START_BALANCE`` each; ``PROCESSES`` transfer processes (``tests/support/ledger_child.py``)
run random transfers, each of which also writes a per-transfer marker, and print every attempt
before it commits (``P``) and every acknowledged commit with its commit_ts (``T``). In the
middle of the run the test SIGKILLs the HBase JVM (master, region server and ZooKeeper: one
process; ``LocalHBase.kill("hbase")``), leaves it dead for ``DOWN_S`` (longer than a Thrift
call's socket timeout) and starts it again (``restart("hbase")``: meta is reassigned, the
killed server's write-ahead logs are split and replayed as its regions reopen). The Thrift
servers and the oracle keep running; their HBase clients reconnect. The children's calls time
out and are retried, or fail (a ``CaffeineError`` is survivable, they go on), and the children
must resume by themselves: each one has to commit again after the restart. An observer worker
process (``caffeine worker``, ``tests/support/ledger_observer.py``) watches the markers
throughout and must likewise carry on without help: in the end every committed marker has been
observed, once.

Then the audit, against the write records themselves:

- every acknowledged transfer (``T``) is present: its marker is visible in a snapshot taken
  after the restart, and its marker, payer and payee cells have a write record at exactly the
  acknowledged commit_ts pointing at the attempt's start_ts, over the value it wrote;
- an attempt that was not acknowledged (the process saw an error, e.g. ``CommitUnknown`` or a
  storage timeout, while HBase was down) is "maybe committed": not required, but whole if it
  is there (its three cells committed at one commit_ts) and absent everywhere if not;
- no marker exists that no attempt announced, and the balances are exactly the replay of the
  committed transfers (so the total holds, and no update was lost or applied twice);
- no lock is left once every account and marker has been read;
- the worker, never restarted, has observed every committed marker exactly once.

``test_kill_sigkills_only_the_named_piece`` pins ``LocalHBase.kill`` on stand-in processes
(no HBase needed). The HBase test only runs with ``CAFFEINE_TEST_RESTART_HBASE=1`` (like the
Thrift2 restart in test_bank.py: CI runs against a runtime it started itself; other people's
HBase must not be killed under them); otherwise skipped, saying so. Whatever happens, HBase
is running and serving the test tables again when the test ends.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field

import pytest

from caffeine.errors import CaffeineError
from caffeine.percolator.layout import ALL_VERSIONS, DATA, LOCK, WRITE
from caffeine.percolator.records import Write
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.storage import ReadSpec
from support.bank import ACCOUNTS, COLUMN, START_BALANCE, TOTAL, account
from support.child_helpers import Child, alive_or_fail, child_env, run_for, stop_cleanly, wait_started

PROCESSES = 3
MARKER = "transfer"
RESTART_ENV = "CAFFEINE_TEST_RESTART_HBASE"
# Transfers acknowledged before the kill, at least: the kill must land in a running bank.
MIN_BEFORE_KILL = 30
# How long HBase stays dead before the restart begins: longer than a Thrift call's socket
# timeout (thrift_timeout_ms, 30 s), so calls in flight at the kill time out in the clients
# (retried if idempotent, an unknown outcome if not) instead of just being answered late.
# CAFFEINE_TEST_HBASE_DOWN_S changes it (e.g. 0: a restart at once, an outage of ~10 s).
DOWN_S = float(os.environ.get("CAFFEINE_TEST_HBASE_DOWN_S", "35"))
# After HBase answers again, every child must commit within this long. Calls that hung on
# the dead JVM time out after thrift_timeout_ms (30 s) and failed transfers back off, so a
# child may need about a minute to get going again.
RESUME_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class Attempt:
    tid: str
    start_ts: int
    payer: bytes
    payer_after: int
    payee: bytes
    payee_after: int
    amount: int


@dataclass
class Ledger:
    """What the children printed, gathered by one reader thread per child."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    attempts: dict[str, Attempt] = field(default_factory=dict)
    acked: dict[str, int] = field(default_factory=dict)  # id -> acknowledged commit_ts
    commits: dict[str, list[float]] = field(default_factory=dict)  # child -> wall time of each T
    errors: list[str] = field(default_factory=list)
    done: list[tuple[int, int]] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)  # the children's storage counters, summed

    def count(self, after: float = 0.0) -> int:
        with self.lock:
            return sum(1 for times in self.commits.values() for t in times if t > after)

    def first_commit_after(self, name: str, after: float) -> float | None:
        with self.lock:
            return min((t for t in self.commits.get(name, []) if t > after), default=None)


def follow(child: Child, ledger: Ledger, ready: threading.Event) -> threading.Thread:
    def run():
        while True:
            try:
                line = child.read_line(timeout_s=600)
            except (TimeoutError, OSError, ValueError):
                return
            if line is None:
                return
            kind, _, rest = line.partition(" ")
            with ledger.lock:
                if kind == "P":
                    tid, start_ts, payer, payer_after, payee, payee_after, amount = rest.split()
                    ledger.attempts[tid] = Attempt(tid, int(start_ts), payer.encode(), int(payer_after),
                                                   payee.encode(), int(payee_after), int(amount))
                elif kind == "T":
                    tid, commit_ts, wall = rest.split()
                    ledger.acked[tid] = int(commit_ts)
                    ledger.commits.setdefault(child.name, []).append(float(wall))
                elif kind == "E":
                    ledger.errors.append(f"{child.name}: {rest}")
                elif kind == "S":
                    for name, n in json.loads(rest).items():
                        ledger.stats[name] = ledger.stats.get(name, 0) + n
                elif kind == "DONE":
                    committed, failed = rest.split()
                    ledger.done.append((int(committed), int(failed)))
            if kind == "READY":
                ready.set()

    thread = threading.Thread(target=run, name=f"follow-{child.name}", daemon=True)
    thread.start()
    return thread


def wait_serving(store, table: str, timeout_s: float = 180.0) -> float:
    """Seconds until a real read of ``table`` answers (its region is open again)."""
    t0 = time.monotonic()
    while True:
        try:
            store.read_row(table, account(0), ReadSpec(families=(WRITE,)))
            return time.monotonic() - t0
        except CaffeineError:
            if time.monotonic() - t0 > timeout_s:
                raise
            time.sleep(1.0)


@pytest.fixture
def runtime(hbase_settings):
    """The local runtime whose HBase this test kills; skips unless that was asked for."""
    if os.environ.get(RESTART_ENV) != "1":
        pytest.skip(f"HBase kill SKIPPED: set {RESTART_ENV}=1 to SIGKILL and restart HBase mid-run (only "
                    f"against a runtime of your own: `LocalHBase(settings).kill('hbase')`)")
    from caffeine.runtime.local import LocalHBase

    local = LocalHBase(hbase_settings, progress=lambda msg: print(f"  runtime: {msg}", flush=True))
    if not local.status(probe_timeout_s=5).piece("hbase").running:
        pytest.fail(f"{RESTART_ENV}=1 but no HBase of this home ({local.layout.home}) runs here to kill; "
                    "the CAFFEINE_* settings point elsewhere")
    return local


@pytest.fixture
def bank(runtime, fast_cluster, bank_table):
    """(cluster, bank table, ledger table): the bank of tests/faults/conftest.py's ``bank_table``
    and an empty ledger table for the markers."""
    ledger_table = f"ledger_{uuid.uuid4().hex[:8]}"
    fast_cluster.create_table(ledger_table)
    return fast_cluster, bank_table, ledger_table


@pytest.fixture
def observer_worker(bank, hbase_settings, workers):
    """A ``caffeine worker`` process observing the ledger's markers (stopped at teardown)."""
    _, _, ledger_table = bank
    return workers("ledger_observer.py:audit", child_env(hbase_settings, test_ledger_table=ledger_table), threads=2)


def test_kill_sigkills_only_the_named_piece(tmp_path):
    from caffeine.config import Settings
    from caffeine.runtime.local import LocalHBase
    from caffeine.runtime.process import find_pieces, pid_alive, spawn

    home = tmp_path / "home"
    local = LocalHBase(Settings(home=home), progress=lambda msg: None)
    # Stand-ins for the JVMs: any process carrying our markers counts as that piece. The
    # "hbase" one ignores SIGTERM, so only a SIGKILL ends it.
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    procs = {
        name: spawn([sys.executable, "-c", code, f"-Dcaffeine.home={home}", f"-Dcaffeine.piece={name}"],
                    local.layout.log_file(name), local.layout.pid_file(name), cwd=tmp_path)
        for name in ("hbase", "thrift1")
    }
    try:
        deadline = time.monotonic() + 10
        while set(find_pieces(home)) != {"hbase", "thrift1"} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert local.kill("hbase") == [procs["hbase"].pid]
        assert not pid_alive(procs["hbase"].pid)
        assert not local.layout.pid_file("hbase").exists()
        assert find_pieces(home) == {"thrift1": [procs["thrift1"].pid]}  # the others keep running
        assert local.kill("hbase") == []  # nothing left to kill
        with pytest.raises(ValueError):
            local.kill("hmaster")
    finally:
        for proc in procs.values():
            if pid_alive(proc.pid):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.hbase
def test_acknowledged_transfers_survive_a_sigkill_of_hbase(runtime, bank, observer_worker, hbase_store, children,
                                                           say, hbase_settings):
    cluster, table, ledger_table = bank
    env = child_env(hbase_settings)
    ledger = Ledger()
    procs: list[Child] = []
    worker = observer_worker
    readies: list[threading.Event] = []

    def worker_alive_or_fail() -> None:
        worker.alive_or_fail("the observer worker")

    def check() -> None:
        worker_alive_or_fail()
        alive_or_fail(procs)

    print()
    for i in range(PROCESSES):
        child = children("ledger_child.py", ["--table", table, "--ledger", ledger_table, "--tag", f"c{i}",
                                             "--accounts", str(ACCOUNTS), "--notify"], env, name=f"transfers {i}")
        ready = threading.Event()
        follow(child, ledger, ready)
        procs.append(child)
        readies.append(ready)
    for child, ready in zip(procs, readies):
        wait_started(child, ready)
    say(f"{PROCESSES} transfer processes running over {ACCOUNTS} accounts (total {TOTAL})")

    killed_at = healthy_at = None
    try:
        run_for(5, check)
        deadline = time.monotonic() + 60
        while ledger.count() < MIN_BEFORE_KILL and time.monotonic() < deadline:
            run_for(0.5, check)
        acked_before = ledger.count()
        assert acked_before >= MIN_BEFORE_KILL, f"only {acked_before} transfers committed before the kill"

        killed_at = time.time()
        pids = runtime.kill("hbase")
        assert pids, "HBase was not running"
        say(f"SIGKILLed HBase (pid {', '.join(map(str, pids))}) with {acked_before} transfers acknowledged")
        run_for(DOWN_S, check)  # the children meet a dead HBase
        restart_began = time.time()
        runtime.restart("hbase")
        healthy_at = time.time()
        say(f"HBase answers through both Thrift servers again: {healthy_at - restart_began:.1f}s after the "
            f"restart began, {healthy_at - killed_at:.1f}s after the kill")
        serving = wait_serving(hbase_store, table)
        say(f"the bank table answers a read {serving:.1f}s later")

        # Every child resumes by itself: it commits again after HBase is back.
        deadline = time.monotonic() + RESUME_TIMEOUT_S
        while True:
            check()
            firsts = {c.name: ledger.first_commit_after(c.name, healthy_at) for c in procs}
            if all(t is not None for t in firsts.values()):
                break
            if time.monotonic() > deadline:
                stuck = [n for n, t in firsts.items() if t is None]
                raise AssertionError(f"no commit within {RESUME_TIMEOUT_S:.0f}s after HBase came back from "
                                     f"{stuck}; their last errors: {ledger.errors[-5:]}")
            time.sleep(0.2)
        say("every process committed again, first commits " + ", ".join(
            f"{n}: +{t - healthy_at:.1f}s" for n, t in sorted(firsts.items())) + " after HBase answered")
        run_for(3, check)
        check()
        for child in procs:  # a clean stop: end of input, then they close their clusters
            child.proc.stdin.close()
        for child in procs:
            child.proc.wait(timeout=90)
        # The worker, running since before the kill, drains every notification by itself.
        waited = wait_until_quiescent(cluster, [ledger_table], timeout_s=RESUME_TIMEOUT_S, poll_s=0.5)
        say(f"the observer worker drained the ledger's notifications ({waited:.1f}s after the transfers stopped)")
        worker_alive_or_fail()
    finally:
        # Leave a working HBase to the rest of the suite (and to whoever else uses it),
        # whatever failed above; first, so a failure during the outage does not prolong it.
        if not runtime.status(probe_timeout_s=5).piece("hbase").running:
            say("HBase is not running after the test; starting it")
            runtime.up()
        stop_cleanly(procs)  # end of input; stuck ones are killed at teardown (``children``)
        wait_serving(hbase_store, table)
    time.sleep(0.3)  # the followers' last lines
    assert len(ledger.done) == PROCESSES, f"clean stops: {ledger.done}"
    # The outage reached the clients: calls in flight at the kill timed out and were retried
    # (or their outcome was unknown), rather than the test missing the running bank.
    assert ledger.stats.get("retried_calls", 0) + ledger.stats.get("unknown_outcomes", 0) > 0, ledger.stats

    # -- the audit -----------------------------------------------------------------------------
    with ledger.lock:
        attempts = dict(ledger.attempts)
        acked = dict(ledger.acked)
    unknown = {tid for tid in attempts if tid not in acked}

    # A snapshot after the restart (resolving whatever locks the errors left behind).
    with cluster.begin() as txn:
        balances = {row: int(cols[COLUMN]) for row, cols in txn.scan(table, columns=[COLUMN])}
        markers = {row.decode(): cols[MARKER].decode() for row, cols in txn.scan(ledger_table, columns=[MARKER])}

    lost = sorted(tid for tid in acked if tid not in markers)
    assert not lost, f"{len(lost)} of {len(acked)} acknowledged transfers are missing, e.g. " + ", ".join(
        f"{tid} (commit_ts {acked[tid]}, {attempts.get(tid)})" for tid in lost[:5])
    phantom = sorted(tid for tid in markers if tid not in attempts)
    assert not phantom, f"markers that no attempt announced: {phantom[:10]}"
    for tid, value in markers.items():
        a = attempts[tid]
        assert value == f"{a.payer.decode()} {a.payee.decode()} {a.amount}", (tid, value, a)

    expected = {account(i): START_BALANCE for i in range(ACCOUNTS)}
    for tid in markers:
        a = attempts[tid]
        expected[a.payer] -= a.amount
        expected[a.payee] += a.amount
    assert sum(balances.values()) == TOTAL, f"total {sum(balances.values())}, expected {TOTAL}: {balances}"
    diff = {row: (balances.get(row), want) for row, want in expected.items() if balances.get(row) != want}
    assert not diff, f"balances differ from the replay of the {len(markers)} committed transfers: {diff}"

    # The write records themselves: each committed transfer wrote its three cells at one commit_ts.
    q_balance, q_marker = COLUMN.encode(), MARKER.encode()
    history = {}
    for i in range(ACCOUNTS):
        row = hbase_store.read_row(table, account(i), ReadSpec(families=(DATA, WRITE), versions=ALL_VERSIONS))
        history[account(i)] = (
            {c.ts: Write.decode(c.value) for c in row.versions(WRITE, q_balance)},
            {c.ts: c.value for c in row.versions(DATA, q_balance)},
        )
    marker_rows = {r.key.decode(): r for r in hbase_store.scan(ledger_table, spec=ReadSpec(families=(DATA, WRITE),
                                                                                             versions=16))}

    def commit_ts_of(writes: dict[int, Write], start_ts: int) -> int | None:
        return next((ts for ts, w in writes.items() if w.start_ts == start_ts and not w.is_rollback), None)

    problems: list[str] = []
    for tid, a in attempts.items():
        mrow = marker_rows.get(tid)
        mwrites = {c.ts: Write.decode(c.value) for c in mrow.versions(WRITE, q_marker)} if mrow else {}
        marker_commit = commit_ts_of(mwrites, a.start_ts)
        if tid in acked and marker_commit != acked[tid]:
            problems.append(f"{tid}: acknowledged at {acked[tid]}, marker's write record at {marker_commit}")
        for acct, after in ((a.payer, a.payer_after), (a.payee, a.payee_after)):
            writes, data = history[acct]
            cell_commit = commit_ts_of(writes, a.start_ts)
            if cell_commit != marker_commit:
                problems.append(f"{tid} ({'acknowledged' if tid in acked else 'unacknowledged'}): "
                                f"{acct.decode()} committed at {cell_commit}, its marker at {marker_commit}")
            elif cell_commit is not None and data.get(a.start_ts) != str(after).encode():
                problems.append(f"{tid}: {acct.decode()} holds {data.get(a.start_ts)!r} at {a.start_ts}, "
                                f"expected {after}")
    assert not problems, f"{len(problems)} write-record problems, e.g. {problems[:5]}"

    with cluster.begin() as txn:
        seen = {row.decode(): (cols.get("seen"), cols.get("seen_runs"))
                for row, cols in txn.scan(ledger_table, columns=[MARKER, "seen", "seen_runs"])}
    unseen = {tid: (value, *seen.get(tid, (None, None))) for tid, value in markers.items()
              if seen.get(tid) != (value.encode(), b"1")}
    assert not unseen, (f"{len(unseen)} of {len(markers)} committed markers not observed exactly once "
                        f"(marker, seen, runs): {sorted(unseen.items())[:8]}; the worker's stderr:\n"
                        f"{worker.stderr_text()}")

    locked = [row.key for t in (table, ledger_table) for row in hbase_store.scan(t, spec=ReadSpec(families=(LOCK,)))]
    assert locked == [], f"locks left after every account and marker was read: {locked}"

    maybe_present = sorted(tid for tid in unknown if tid in markers)
    say(f"audit: {len(acked)} acknowledged transfers all present at their commit_ts "
        f"({acked_before} acknowledged before the kill); {len(unknown)} unacknowledged attempts, "
        f"{len(maybe_present)} of them committed (whole); balances = replay of {len(markers)} transfers, "
        f"total {TOTAL}; {len(ledger.errors)} transfers failed (survived); every marker observed once; "
        f"the children's storage counters {ledger.stats}")
    print(f"HBase outage: killed -> answering again {healthy_at - killed_at:.1f}s")
    if ledger.errors:
        print("failed transfers (first 5):", *ledger.errors[:5], sep="\n  ")
