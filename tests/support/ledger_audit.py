"""A bank run through an outage, and its audit against the write records themselves.

Layer: test support. Shared by the tests that take storage away under running clients:
HBase SIGKILLed and restarted (``faults/test_hbase_kill.py``) and one region server of a
cluster SIGKILLed (``cluster/test_regionserver_kill.py``).

``run_through(...)`` starts ``processes`` transfer processes (``ledger_child.py``: each
transfer also writes a per-transfer marker; they print every attempt before it commits, ``P``,
and every acknowledged commit with its commit_ts, ``T``), waits for ``min_before`` commits,
calls ``outage(check)`` (which breaks something and returns the wall time at which the
storage answers again), waits until every process has committed again by itself, stops them
cleanly and waits for the observer worker to drain the ledger's notifications.

``audit(...)`` then checks, against the cells:

- every acknowledged transfer is present: its marker is visible in a snapshot, and its
  marker, payer and payee cells have a write record at exactly the acknowledged commit_ts
  pointing at the attempt's start_ts, over the value it wrote;
- an attempt that was not acknowledged is "maybe committed": whole if it is there (its three
  cells at one commit_ts), absent everywhere if not;
- no marker exists that no attempt announced, and the balances are exactly the replay of the
  committed transfers (so the total holds, no update lost or applied twice);
- no lock is left once every account and marker has been read;
- the worker, never restarted, observed every committed marker exactly once.

``Run.stalls()`` is what each client saw of the outage: its longest wait between two
acknowledged commits across it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from caffeine.errors import CaffeineError
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.percolator.layout import ALL_VERSIONS, DATA, LOCK, WRITE
from caffeine.percolator.records import Write
from caffeine.storage import ReadSpec
from support.bank import ACCOUNTS, COLUMN, START_BALANCE, TOTAL, account
from support.child_helpers import Child, alive_or_fail, follow_lines, run_for, stop_cleanly, wait_started

MARKER = "transfer"


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
    def on_line(kind: str, rest: str) -> None:
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

    return follow_lines(child, on_line, ready, ledger.lock)


def wait_serving(store, table: str, timeout_s: float = 180.0) -> float:
    """Seconds until a real read of ``table``'s every account answers (their regions are open)."""
    t0 = time.monotonic()
    while True:
        try:
            store.read_rows(table, [account(i) for i in range(ACCOUNTS)], ReadSpec(families=(WRITE,)))
            return time.monotonic() - t0
        except CaffeineError:
            if time.monotonic() - t0 > timeout_s:
                raise
            time.sleep(1.0)


@dataclass
class Run:
    """A bank run through an outage: what the children printed, and when things happened
    (wall times)."""

    ledger: Ledger
    names: list[str]
    acked_before: int
    broken_at: float
    healthy_at: float
    firsts: dict[str, float]  # child -> its first commit after ``healthy_at``

    def stalls(self) -> dict[str, float]:
        """Each child's longest wait between two acknowledged commits while the storage was
        broken (a gap that overlaps ``broken_at`` .. ``healthy_at``): the outage as that client
        saw it. A client whose transfers all touched rows still served waits less."""
        out = {}
        with self.ledger.lock:
            for name in self.names:
                times = sorted(self.ledger.commits.get(name, []))
                gaps = [b - a for a, b in zip(times, times[1:]) if b > self.broken_at and a < self.healthy_at]
                out[name] = max(gaps, default=float("nan"))
        return out


def run_through(outage: Callable[[Callable[[], None]], float], *, cluster, table: str, ledger_table: str, env,
                children, worker, say, processes: int = 3, min_before: int = 30,
                resume_timeout_s: float = 120.0) -> Run:
    """Transfers through ``outage(check)``; see the module's docstring. ``check`` fails the
    test if a child or the worker died; ``outage`` calls it while it waits."""
    ledger = Ledger()
    procs: list[Child] = []
    readies: list[threading.Event] = []

    def check() -> None:
        worker.alive_or_fail("the observer worker")
        alive_or_fail(procs)

    for i in range(processes):
        child = children("ledger_child.py", ["--table", table, "--ledger", ledger_table, "--tag", f"c{i}",
                                             "--accounts", str(ACCOUNTS), "--notify"], env, name=f"transfers {i}")
        ready = threading.Event()
        follow(child, ledger, ready)
        procs.append(child)
        readies.append(ready)
    try:
        for child, ready in zip(procs, readies):
            wait_started(child, ready)
        say(f"{processes} transfer processes running over {ACCOUNTS} accounts (total {TOTAL})")
        run_for(5, check)
        deadline = time.monotonic() + 60
        while ledger.count() < min_before and time.monotonic() < deadline:
            run_for(0.5, check)
        acked_before = ledger.count()
        assert acked_before >= min_before, f"only {acked_before} transfers committed before the outage"
        broken_at = time.time()
        healthy_at = outage(check)

        # Every child resumes by itself: it commits again after the storage answers.
        deadline = time.monotonic() + resume_timeout_s
        while True:
            check()
            firsts = {c.name: ledger.first_commit_after(c.name, healthy_at) for c in procs}
            if all(t is not None for t in firsts.values()):
                break
            if time.monotonic() > deadline:
                stuck = [n for n, t in firsts.items() if t is None]
                raise AssertionError(f"no commit within {resume_timeout_s:.0f}s after the storage answered "
                                     f"again from {stuck}; their last errors: {ledger.errors[-5:]}")
            time.sleep(0.2)
        say("every process committed again, first commits " + ", ".join(
            f"{n}: +{t - healthy_at:.1f}s" for n, t in sorted(firsts.items())) + " after the storage answered")
        run_for(3, check)
        check()
        for child in procs:  # a clean stop: end of input, then they close their clusters
            child.proc.stdin.close()
        for child in procs:
            child.proc.wait(timeout=90)
        # The worker, running since before the outage, drains every notification by itself.
        waited = wait_until_quiescent(cluster, [ledger_table], timeout_s=resume_timeout_s, poll_s=0.5)
        say(f"the observer worker drained the ledger's notifications ({waited:.1f}s after the transfers stopped)")
        worker.alive_or_fail("the observer worker")
    finally:
        stop_cleanly(procs)  # end of input; stuck ones are killed at teardown (``children``)
    time.sleep(0.3)  # the followers' last lines
    assert len(ledger.done) == processes, f"clean stops: {ledger.done}"
    return Run(ledger, [c.name for c in procs], acked_before, broken_at, healthy_at, firsts)


def audit(run: Run, *, cluster, store, table: str, ledger_table: str, worker, say) -> None:
    """The checks of the module's docstring; fails the test with the first problems found."""
    ledger = run.ledger
    with ledger.lock:
        attempts = dict(ledger.attempts)
        acked = dict(ledger.acked)
    unknown = {tid for tid in attempts if tid not in acked}

    # A snapshot after the outage (resolving whatever locks the errors left behind).
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
        row = store.read_row(table, account(i), ReadSpec(families=(DATA, WRITE), versions=ALL_VERSIONS))
        history[account(i)] = (
            {c.ts: Write.decode(c.value) for c in row.versions(WRITE, q_balance)},
            {c.ts: c.value for c in row.versions(DATA, q_balance)},
        )
    marker_rows = {r.key.decode(): r for r in store.scan(ledger_table, spec=ReadSpec(families=(DATA, WRITE),
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

    locked = [row.key for t in (table, ledger_table) for row in store.scan(t, spec=ReadSpec(families=(LOCK,)))]
    assert locked == [], f"locks left after every account and marker was read: {locked}"

    maybe_present = sorted(tid for tid in unknown if tid in markers)
    say(f"audit: {len(acked)} acknowledged transfers all present at their commit_ts "
        f"({run.acked_before} acknowledged before the outage); {len(unknown)} unacknowledged attempts, "
        f"{len(maybe_present)} of them committed (whole); balances = replay of {len(markers)} transfers, "
        f"total {TOTAL}; {len(ledger.errors)} transfers failed (survived); every marker observed once; "
        f"the children's storage counters {ledger.stats}")
    if ledger.errors:
        print("failed transfers (first 5):", *ledger.errors[:5], sep="\n  ")
