#!/usr/bin/env python3
"""Transactions vs raw storage: what Percolator's protocol costs, measured in one run.

The paper's comparison (Section 4.2): a one-cell read transaction against a raw read, and a
one-cell write transaction against a raw write, same client, same servers. Here, through the
same store and the same Thrift connection pools:

============  ==========================================================================
raw_get       ``store.read_row`` of one cell of a plain table (one Thrift1 get)
txn_read      ``cluster.begin()``, ``txn.get`` of one cell, ``commit()`` (read-only):
              one start_ts from the oracle + one Thrift1 get of the cell's lock/write/data
raw_put       ``store.mutate_row`` with one Put (one Thrift2 mutateRow, the row guard included)
txn_write_cas ``cluster.begin()``, ``txn.set`` of one cell, ``commit()`` with the ``thrift-cas``
              committer: start_ts, prewrite (guarded read + checkAndMutate), commit_ts,
              commit of the primary (checkAndMutate on the snapshot the prewrite left)
txn_write_cp  the same with the ``coprocessor`` committer: start_ts, prewrite (one checked
              putMultiple), commit_ts, commit of the primary (one checked putMultiple, the
              lock delete carried with it); measured when the HBase runs Caffeine's coprocessor
============  ==========================================================================

Each raw operation and its transaction are measured as a pair, at each thread count: for
``--seconds`` each, interleaved in ``--slice`` slices (A B B A A B B A ...; every thread stops
at a barrier between slices), so both see the same load on a shared, noisy machine and their
ratio is taken within one window. ``--repeats`` such windows (every pair and thread count
once, then again); the median rate and the median ratio are reported, with min–max. Write
threads each own a disjoint set of rows (no conflicts: this measures the protocol, not
contention).

Round trips are counted, not assumed: during the timed slices from the pools' own counters
(``thrift1_calls`` / ``thrift2_calls`` in ``store.stats``) and the oracle client's
``round_trips`` / ``timestamps``; and in an untimed single-threaded pass, through a counting
wrapper around each pool's ``call`` that names the store method that sent each call (the
owner registry's heartbeat thread excluded). A latency "anatomy" times oracle round trips and
gets back to back and alternating (as a read transaction makes them).

Finally single-threaded write and read loops run under pyinstrument (a dev tool, not a
project dependency: ``pip install pyinstrument``), and the time per transaction is split into
the oracle, HBase reads, checkAndMutate, other writes and the rest (Python: protocol steps,
encoding, the transaction object, pools), each with the part spent waiting on sockets.

Usage::

    export CAFFEINE_THRIFT2_IDL=/path/to/hbase/thrift2/hbase.thrift   # if not resolvable
    python3 bench/bench_transactions.py [--seconds 2] [--repeats 3] [--threads 1,8] [--slice 0.25] [--profile-seconds 3]

Tables live under a fresh ``bench_txn_<random>_`` prefix (the data tables and the owner
registry) and are all dropped at the end. Writes ``bench/results/transactions.csv`` and the
full profile to ``bench/results/transactions_profile.txt``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import itertools
import os
import random
import shlex
import statistics
import sys
import threading
import time
import uuid
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from call_paths import caller_path  # bench/, this script's directory
from proc_cpu import runtime_cpu_s

HERE = Path(__file__).resolve().parent
RESULTS_CSV = HERE / "results" / "transactions.csv"
PROFILE_TXT = HERE / "results" / "transactions_profile.txt"

RAW_FAMILY = b"a"
QUAL = b"v"
COLUMN = "v"
PAPER = {"txn_read": 0.94, "txn_write_cas": 0.23, "txn_write_cp": 0.23}  # Percolator / Bigtable, Section 4.2
GOAL = {"txn_read": 0.90, "txn_write_cas": 0.25, "txn_write_cp": 0.60}
BASE_OF = {"txn_read": "raw_get", "txn_write_cas": "raw_put", "txn_write_cp": "raw_put"}

Step = Callable[[], None]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- round-trip accounting ---------------------------------------------------------------------

class RoundTrips:
    """Counts calls through the store's pools, by pool and by the store method that made them.

    Installed only for the untimed accounting pass (its frame walk costs a few microseconds
    per call); the timed runs read the pools' own counters in ``store.stats``.
    """

    _SKIP = {"_guarded_call", "call", "counted"}

    def __init__(self, store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self.counts: Counter[str] = Counter()

    def install(self) -> None:
        for label in ("thrift1", "thrift2"):
            pool = getattr(self.store, label)
            pool.call = self._wrap(label, pool.call)  # an instance attribute shadows the method

    def uninstall(self) -> None:
        for label in ("thrift1", "thrift2"):
            vars(getattr(self.store, label)).pop("call", None)

    def _wrap(self, label: str, call):
        lock, counts, skip = self._lock, self.counts, self._SKIP

        def counted(fn, *args, **kwargs):
            if threading.current_thread().name != "caffeine-heartbeat":
                caller = caller_path(skip)
                with lock:
                    counts[label] += 1
                    counts[f"{label}.{caller}"] += 1
            return call(fn, *args, **kwargs)
        return counted

    def snapshot(self) -> Counter[str]:
        with self._lock:
            return Counter(self.counts)


def pool_calls(store) -> Counter[str]:
    """The pools' own round-trip counters (every thread, the heartbeat's ~1 call/s included)."""
    stats = store.stats.as_dict()
    return Counter({"thrift1": stats.get("thrift1_calls", 0), "thrift2": stats.get("thrift2_calls", 0)})


def account(ctx: Ctx, ops: list["Op"], n: int) -> dict[str, tuple[Counter, int, int]]:
    """Round trips of ``n`` single-threaded runs of each op, counted by the wrapper (untimed)."""
    rts = RoundTrips(ctx.store)
    rts.install()
    out = {}
    try:
        for op in ops:
            step = op.make(ctx, 0, 1, random.Random(5))
            step()  # connections opened, first-call effects out of the way
            before, o_before = rts.snapshot(), (ctx.cluster.oracle.round_trips, ctx.cluster.oracle.timestamps)
            for _ in range(n):
                step()
            o_after = (ctx.cluster.oracle.round_trips, ctx.cluster.oracle.timestamps)
            out[op.name] = (rts.snapshot() - before, o_after[0] - o_before[0], o_after[1] - o_before[1])
    finally:
        rts.uninstall()
    return out


# -- the operations ----------------------------------------------------------------------------

@dataclass
class Ctx:
    store: object
    cluster: object
    raw_table: str
    txn_table: str
    keys: list[bytes]
    value: bytes
    ts: Callable[[], int] = field(default_factory=lambda: itertools.count(1_000_000).__next__)
    # The same client with the coprocessor committer (None: the HBase runs no coprocessor).
    cp_cluster: object = None
    # Round trips sent so far, by pool ("thrift1", "thrift2").
    pool_calls: Callable[[], Counter] = field(default_factory=lambda: Counter)


@dataclass(frozen=True)
class Op:
    name: str
    what: str
    make: Callable[[Ctx, int, int, random.Random], Step]


def own_rows(ctx: Ctx, tid: int, n: int) -> list[bytes]:
    return ctx.keys[tid::n]


def make_raw_get(ctx, tid, n, rng) -> Step:
    from caffeine.storage import ReadSpec

    store, table, keys = ctx.store, ctx.raw_table, ctx.keys
    spec = ReadSpec(columns=((RAW_FAMILY, QUAL),))

    def step():
        row = store.read_row(table, rng.choice(keys), spec)
        if row.latest(RAW_FAMILY, QUAL) is None:
            raise AssertionError("raw_get: empty row")
    return step


def make_txn_read(ctx, tid, n, rng) -> Step:
    cluster, table, keys = ctx.cluster, ctx.txn_table, ctx.keys

    def step():
        txn = cluster.begin()
        if txn.get(table, rng.choice(keys), COLUMN) is None:
            raise AssertionError("txn_read: no value")
        txn.commit()
    return step


def make_raw_put(ctx, tid, n, rng) -> Step:
    from caffeine.storage import Put

    store, table, value, ts = ctx.store, ctx.raw_table, ctx.value, ctx.ts
    rows = own_rows(ctx, tid, n)

    def step():
        store.mutate_row(table, rng.choice(rows), [Put(RAW_FAMILY, QUAL, ts(), value)])
    return step


def make_txn_write(ctx, tid, n, rng, *, coprocessor: bool = False) -> Step:
    cluster, table, value = ctx.cp_cluster if coprocessor else ctx.cluster, ctx.txn_table, ctx.value
    rows = own_rows(ctx, tid, n)

    def step():
        txn = cluster.begin()
        txn.set(table, rng.choice(rows), COLUMN, value)
        txn.commit()
    return step


OPS = [
    Op("raw_get", "store.read_row of one cell (Thrift1 get)", make_raw_get),
    Op("txn_read", "one-cell read transaction: begin, get, commit", make_txn_read),
    Op("raw_put", "store.mutate_row, one Put (Thrift2 mutateRow)", make_raw_put),
    Op("txn_write_cas", "one-cell write transaction: begin, set, commit (thrift-cas committer)", make_txn_write),
    Op("txn_write_cp", "one-cell write transaction: begin, set, commit (coprocessor committer)",
       lambda ctx, tid, n, rng: make_txn_write(ctx, tid, n, rng, coprocessor=True)),
]
BY_NAME = {op.name: op for op in OPS}
PAIRS = [(BY_NAME["raw_get"], BY_NAME["txn_read"]), (BY_NAME["raw_put"], BY_NAME["txn_write_cas"]),
         (BY_NAME["raw_put"], BY_NAME["txn_write_cp"])]


# -- running one measurement -------------------------------------------------------------------

@dataclass
class Sample:
    ops: int
    elapsed: float
    cpu: float
    latencies: list[float]
    round_trips: Counter
    oracle_round_trips: int
    timestamps: int
    conflicts: int
    servers: dict[str, float]  # CPU seconds of each local runtime process (hbase, thrift1, ...)

    @property
    def rate(self) -> float:
        return self.ops / self.elapsed


@dataclass
class Mark:
    """Counters read at a slice boundary (every thread stopped at the barrier)."""

    perf: float
    cpu: float
    rts: Counter
    oracle_round_trips: int
    timestamps: int
    conflicts: int
    servers: Counter

    @classmethod
    def now(cls, ctx: Ctx) -> "Mark":
        oracle = ctx.cluster.oracle
        return cls(time.perf_counter(), time.process_time(), ctx.pool_calls(), oracle.round_trips,
                   oracle.timestamps, ctx.store.stats.as_dict().get("cas_conflicts", 0),
                   Counter(runtime_cpu_s(ctx.cluster.settings)))


def measure_pair(ctx: Ctx, pair: tuple[Op, Op], n_threads: int, seconds: float, slice_s: float,
                 warmup_s: float, seed: int) -> tuple[Sample, Sample]:
    """The raw operation and its transaction in alternating time slices, ``seconds`` each.

    On a shared, noisy machine two measurements taken seconds apart see different loads; the
    ratio of two such numbers is mostly noise. So both run inside one window, in slices of
    ``slice_s`` ordered A B B A A B B A ... (drift within the window hits both alike), with
    every thread stopped at a barrier between slices. Returns one Sample per operation.
    """
    n_slices = 2 * max(2, round(seconds / slice_s))
    order = [1 if i % 4 in (1, 2) else 0 for i in range(n_slices)]
    marks: list[Mark] = []
    barrier = threading.Barrier(n_threads, action=lambda: marks.append(Mark.now(ctx)))
    counts = [[0] * n_slices for _ in range(n_threads)]
    lats: list[list[list[float]]] = [[[], []] for _ in range(n_threads)]
    errors: list[BaseException] = []

    def worker(tid: int) -> None:
        try:
            steps = [op.make(ctx, tid, n_threads, random.Random(seed * 1000 + tid * 2 + k)) for k, op in enumerate(pair)]
            for step in steps:
                until = time.perf_counter() + warmup_s / 2
                while time.perf_counter() < until:
                    step()
            perf = time.perf_counter
            barrier.wait()
            for i, which in enumerate(order):
                step, out, n = steps[which], lats[tid][which], 0
                deadline = marks[i].perf + slice_s
                while True:
                    t0 = perf()
                    if t0 >= deadline:
                        break
                    step()
                    out.append(perf() - t0)
                    n += 1
                counts[tid][i] = n
                barrier.wait()
        except threading.BrokenBarrierError:
            return  # another thread failed; its error is reported
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    out = []
    for which in (0, 1):
        slices = [i for i, w in enumerate(order) if w == which]
        a = lambda attr: sum(getattr(marks[i + 1], attr) - getattr(marks[i], attr) for i in slices)
        out.append(Sample(
            ops=sum(counts[t][i] for t in range(n_threads) for i in slices),
            elapsed=a("perf"),
            cpu=a("cpu"),
            latencies=[x for t in range(n_threads) for x in lats[t][which]],
            round_trips=sum((marks[i + 1].rts - marks[i].rts for i in slices), Counter()),
            oracle_round_trips=a("oracle_round_trips"),
            timestamps=a("timestamps"),
            conflicts=a("conflicts"),
            servers=dict(sum((marks[i + 1].servers - marks[i].servers for i in slices), Counter())),
        ))
    return out[0], out[1]


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


# -- why a read transaction costs more than its one extra round trip suggests ----------------

def anatomy(ctx: Ctx, n: int) -> dict[str, tuple[float, float]]:
    """Latency (median, mean in ms) of an oracle round trip and of a one-cell Thrift1 get,
    each back to back (the server stays hot) and alternating (what a read transaction
    does: each server sleeps while the other works, and is woken for every call)."""
    from caffeine.storage import ReadSpec

    oracle, store, keys, rng = ctx.cluster.oracle, ctx.store, ctx.keys, random.Random(3)
    spec = ReadSpec(columns=((RAW_FAMILY, QUAL),))
    perf = time.perf_counter
    lat: dict[str, list[float]] = {k: [] for k in ("oracle, back to back", "get, back to back",
                                                  "oracle, alternating", "get, alternating")}
    for _ in range(n):
        t0 = perf()
        oracle.get_timestamp()
        lat["oracle, back to back"].append(perf() - t0)
    for _ in range(n):
        t0 = perf()
        store.read_row(ctx.raw_table, rng.choice(keys), spec)
        lat["get, back to back"].append(perf() - t0)
    for _ in range(n):
        t0 = perf()
        oracle.get_timestamp()
        t1 = perf()
        store.read_row(ctx.raw_table, rng.choice(keys), spec)
        t2 = perf()
        lat["oracle, alternating"].append(t1 - t0)
        lat["get, alternating"].append(t2 - t1)
    return {k: (statistics.median(v) * 1e3, statistics.fmean(v) * 1e3) for k, v in lat.items()}


# -- the profile -------------------------------------------------------------------------------

# Outermost matching frame decides the category; (file suffix, function names).
CATEGORIES = [
    ("oracle", "caffeine/oracle/client.py", {"get_timestamp", "get_timestamps"}),
    ("HBase reads", "caffeine/storage/hbase.py", {"_read", "read_row", "_read_guarded", "read_rows",
                                                  "read_rows_guarded", "scan"}),
    ("checkAndMutate", "caffeine/storage/hbase.py", {"_compare_and_apply"}),
    ("other HBase writes", "caffeine/storage/hbase.py", {"mutate_row", "put_rows", "delete_rows"}),
]
# Frames where the client waits for the network (the server's time and the wire).
WAIT_FUNCTIONS = {"recv", "recv_into", "sendall", "send", "select", "poll", "read", "readinto", "acquire"}


def profile_op(ctx: Ctx, op: Op, seconds: float) -> tuple[int, float, dict[str, tuple[float, float]], str]:
    """Run ``op`` single-threaded under pyinstrument; (ops, wall s, {category: (s, wait s)}, text)."""
    try:
        from pyinstrument import Profiler
    except ImportError:
        return 0, 0.0, {}, "pyinstrument is not installed: pip install pyinstrument (a dev tool)"
    step = op.make(ctx, 0, 1, random.Random(99))
    for _ in range(50):
        step()
    profiler = Profiler(interval=0.0002)
    n = 0
    profiler.start()
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
    wall = time.perf_counter() - t0
    profiler.stop()
    session = profiler.last_session
    totals: dict[str, list[float]] = {name: [0.0, 0.0] for name, _, _ in CATEGORIES}
    totals["Python (the rest)"] = [0.0, 0.0]

    def category_of(frame) -> str | None:
        path = (frame.file_path or "").replace("\\", "/")
        for name, suffix, functions in CATEGORIES:
            if path.endswith(suffix) and frame.function in functions:
                return name
        return None

    def walk(frame, category: str | None) -> None:
        category = category or category_of(frame)
        # Self time: what the children do not account for. pyinstrument puts a frame's own
        # samples in synthetic "[self]" children, named after their parent here.
        own = frame.time - sum(child.time for child in frame.children)
        if own > 0:
            bucket = totals[category or "Python (the rest)"]
            bucket[0] += own
            name = frame.parent.function if frame.is_synthetic and frame.parent is not None else frame.function
            if name.rsplit(".", 1)[-1] in WAIT_FUNCTIONS:
                bucket[1] += own
        for child in frame.children:
            walk(child, category)

    root = session.root_frame()
    if root is not None:
        walk(root, None)
    text = profiler.output_text(unicode=False, color=False, show_all=False)
    return n, wall, {k: (v[0], v[1]) for k, v in totals.items()}, text


# -- setup, the run, the report ----------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=2.0,
                   help="timed seconds per operation per repeat, in alternating slices (default 2)")
    p.add_argument("--slice", type=float, default=0.25,
                   help="length of one slice: raw and transaction alternate A B B A ... (default 0.25)")
    p.add_argument("--repeats", type=int, default=3, help="repeats per measurement, median reported (default 3)")
    p.add_argument("--threads", default="1,8", help="comma-separated client thread counts (default 1,8)")
    p.add_argument("--rows", type=int, default=2048, help="rows pre-populated in each table (default 2048)")
    p.add_argument("--value-size", type=int, default=64, help="bytes per value (default 64)")
    p.add_argument("--warmup", type=float, default=0.3, help="untimed warm-up seconds per measurement (default 0.3)")
    p.add_argument("--profile-seconds", type=float, default=3.0,
                   help="seconds of each profiled single-threaded loop (writes, then reads); 0 skips them "
                        "(default 3)")
    p.add_argument("--account-ops", type=int, default=200,
                   help="untimed single-threaded runs of each operation whose round trips are counted "
                        "by calling method (default 200)")
    p.add_argument("--csv", type=Path, default=RESULTS_CSV, help="CSV output (default bench/results/transactions.csv)")
    args = p.parse_args(argv)
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        p.error("--threads: comma-separated integers, e.g. 1,8")
    if not args.threads or min(args.threads) < 1 or args.rows < max(args.threads):
        p.error("--threads: positive counts, and --rows at least the largest")
    if args.seconds <= 0 or args.repeats < 1 or not 0 < args.slice <= args.seconds:
        p.error("need --seconds > 0, --repeats >= 1 and 0 < --slice <= --seconds")
    return args


def reproduce_command(argv: list[str]) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items()) if k.startswith("CAFFEINE_"))
    cmd = " ".join(shlex.quote(a) for a in ["python3", "bench/bench_transactions.py", *argv])
    return f"{env} {cmd}".strip()


def populate(ctx: Ctx) -> None:
    from caffeine.storage import Put

    for i in range(0, len(ctx.keys), 512):
        ctx.store.put_rows(ctx.raw_table, {k: [Put(RAW_FAMILY, QUAL, ctx.ts(), ctx.value)] for k in ctx.keys[i:i + 512]})
    for i in range(0, len(ctx.keys), 256):
        with ctx.cluster.begin() as txn:
            for key in ctx.keys[i:i + 256]:
                txn.set(ctx.txn_table, key, COLUMN, ctx.value)


def drop_all(store, prefix: str) -> None:
    """Drop every table under this run's prefix (the run's own: the prefix is random), then
    close the store; warns instead of raising, so the run's own error is never masked."""
    try:
        for table in store.list_tables():
            try:
                store.drop_table(table)
            except Exception as exc:
                log(f"warning: could not drop {prefix}{table}: {exc}")
        log(f"dropped the tables under {prefix}")
    except Exception as exc:
        log(f"warning: could not list the tables under {prefix} to drop them: {exc}")
    finally:
        store.close()


def per_op(sample_list: list[Sample], attr: str) -> float:
    ops = sum(s.ops for s in sample_list)
    return sum(getattr(s, attr) for s in sample_list) / ops if ops else float("nan")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)

    from caffeine.config import load_settings
    from caffeine.oracle.client import OracleClient
    from caffeine.percolator.cluster import Cluster
    from caffeine.percolator.backends.cas import CasCommitter
    from caffeine.percolator.backends.coprocessor import CoprocessorCommitter
    from caffeine.percolator.owners import TABLE as owners_table
    from caffeine.storage import FamilySpec
    from caffeine.storage.hbase import HBaseStore
    from caffeine.storage.probe import probe_row_steps

    prefix = f"bench_txn_{uuid.uuid4().hex[:6]}_"
    settings = load_settings(table_prefix=prefix)
    store = HBaseStore(settings, thrift2_idl=os.environ.get("CAFFEINE_THRIFT2_IDL") or None)
    if settings.pool_size < max(args.threads):
        log(f"warning: pool_size {settings.pool_size} < {max(args.threads)} threads; threads will queue")
    oracle = OracleClient(settings)
    try:
        # Creates the owner registry's table; the thrift-cas committer whatever the cluster runs.
        cluster = Cluster(store, oracle, settings, committer=CasCommitter())
    except BaseException:
        oracle.close()
        drop_all(store, prefix)
        raise
    keys = [b"%08x-%06d" % (zlib.crc32(b"%d" % i), i) for i in range(args.rows)]
    ctx = Ctx(store, cluster, "raw", "txn", keys, os.urandom(args.value_size))
    global OPS, PAIRS
    if probe_row_steps(store, owners_table) is not None:
        ctx.cp_cluster = Cluster(store, oracle, settings, committer=CoprocessorCommitter())
    else:
        log("this HBase runs no Caffeine coprocessor: measuring the thrift-cas committer only")
        OPS = [op for op in OPS if op.name != "txn_write_cp"]
        PAIRS = [pair for pair in PAIRS if pair[1].name != "txn_write_cp"]
    if hasattr(store.thrift1, "_calls_counter"):
        ctx.pool_calls = lambda: pool_calls(store)  # the pools count their own calls
    else:  # an older store: count with the wrapper throughout
        counter = RoundTrips(store)
        counter.install()
        ctx.pool_calls = lambda: Counter({k: v for k, v in counter.snapshot().items() if "." not in k})

    cells = [(pair, n) for n in args.threads for pair in PAIRS]
    total = len(cells) * args.repeats
    log(f"HBase Thrift1 {settings.thrift1_host}:{settings.thrift1_port}, Thrift2 {settings.thrift2_host}:"
        f"{settings.thrift2_port}, oracle {settings.oracle_host}:{settings.oracle_port}; tables under {prefix}")
    log(f"{len(PAIRS)} raw/transaction pairs x threads {args.threads} x {args.repeats} repeats x 2 x {args.seconds:g}s "
        f"in {args.slice:g}s slices = {total} measurements, about "
        f"{total * (2 * args.seconds + args.warmup + 0.3) + 2 * args.profile_seconds + 15:.0f}s")

    samples: dict[tuple[str, int], list[Sample]] = {(op.name, n): [] for pair, n in cells for op in pair}
    started = time.monotonic()
    profiles: dict[str, tuple] = {}
    accounting: dict = {}
    latency: dict = {}
    try:
        store.create_table(ctx.raw_table, {RAW_FAMILY: FamilySpec(max_versions=1)})
        cluster.create_table(ctx.txn_table)
        populate(ctx)
        log(f"created and populated {args.rows} rows per table in {time.monotonic() - started:.1f}s")
        accounting = account(ctx, OPS, args.account_ops)
        log(f"counted the round trips of {args.account_ops} runs of each operation")
        done = 0
        for rep in range(args.repeats):
            for pair, n in cells:
                raw, txn = measure_pair(ctx, pair, n, args.seconds, args.slice, args.warmup, seed=rep * 100 + n)
                done += 1
                for op, s in zip(pair, (raw, txn)):
                    samples[(op.name, n)].append(s)
                    hb = s.round_trips["thrift1"] + s.round_trips["thrift2"]
                    log(f"[{done:>3}/{total}] rep {rep + 1}  {op.name:<10} x{n:<2} {s.rate:>7.0f} ops/s  "
                        f"({s.ops} ops in {s.elapsed:.2f}s, {hb / max(s.ops, 1):.2f} HBase + "
                        f"{s.oracle_round_trips / max(s.ops, 1):.2f} oracle RTs/op, client CPU {s.cpu / s.elapsed:.0%})")
                log(f"          ratio {txn.rate / raw.rate:.2f}")
        log("latency anatomy: oracle and get, back to back and alternating")
        latency = anatomy(ctx, args.account_ops * 2)
        if args.profile_seconds > 0:
            for name in [op.name for op in OPS if op.name.startswith("txn_")]:
                log(f"profiling a single-threaded {name} loop for {args.profile_seconds:g}s (pyinstrument)")
                profiles[name] = profile_op(ctx, BY_NAME[name], args.profile_seconds)
        retries = {k: v for k, v in store.stats.as_dict().items()
                   if k in ("retried_calls", "reconnects", "unknown_outcomes", "guess_misses") and v}
        if retries:
            log(f"note: during the run: {retries}")
    finally:
        if ctx.cp_cluster is not None:
            ctx.cp_cluster.executor.shutdown(wait=True)
            ctx.cp_cluster.owners.close()
        cluster.executor.shutdown(wait=True)
        cluster.owners.close()
        oracle.close()
        drop_all(store, prefix)
    wall = time.monotonic() - started

    # -- aggregate
    results = []
    for op, n in [(op, n) for pair, n in cells for op in pair]:
        ss = samples[(op.name, n)]
        rates = [s.rate for s in ss]
        lat = sorted(x for s in ss for x in s.latencies)
        ops = sum(s.ops for s in ss)
        rt = sum((s.round_trips for s in ss), Counter())
        results.append(dict(
            operation=op.name, threads=n,
            median_ops_s=statistics.median(rates), min_ops_s=min(rates), max_ops_s=max(rates),
            p50_ms=pct(lat, 0.5) * 1e3, p99_ms=pct(lat, 0.99) * 1e3,
            client_cpu=statistics.median(s.cpu / s.elapsed for s in ss),
            hbase_rts_per_op=(rt["thrift1"] + rt["thrift2"]) / ops,
            thrift1_per_op=rt["thrift1"] / ops, thrift2_per_op=rt["thrift2"] / ops,
            rts_by_caller=";".join(f"{k}={v / args.account_ops:.3f}" for k, v in sorted(accounting[op.name][0].items())
                                   if "." in k),
            oracle_rts_per_op=per_op(ss, "oracle_round_trips"), timestamps_per_op=per_op(ss, "timestamps"),
            cas_conflicts=sum(s.conflicts for s in ss),
            # Server CPU per operation (µs), by local runtime process: where the rest of the
            # machine's two cores went.
            server_us_per_op={piece: 1e6 * sum(s.servers.get(piece, 0.0) for s in ss) / ops
                              for piece in sorted({p for s in ss for p in s.servers})},
            client_us_per_op=1e6 * sum(s.cpu for s in ss) / ops,
            samples_ops_s=";".join(f"{r:.1f}" for r in rates),
        ))
    by = {(r["operation"], r["threads"]): r for r in results}
    for r in results:
        # The ratio of each repeat is taken within its own window (interleaved slices); the
        # median of those is reported, not a ratio of two medians.
        base = BASE_OF.get(r["operation"])
        if base:
            ratios = [t.rate / b.rate for t, b in zip(samples[(r["operation"], r["threads"])],
                                                      samples[(base, r["threads"])])]
        else:
            ratios = [1.0]
        r["ratio_vs_raw"] = statistics.median(ratios)
        r["min_ratio"], r["max_ratio"] = min(ratios), max(ratios)

    # -- CSV
    stamp = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    command = reproduce_command(argv)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    fields = ["run_at", "operation", "threads", "median_ops_s", "ratio_vs_raw", "min_ratio", "max_ratio",
              "min_ops_s", "max_ops_s",
              "p50_ms", "p99_ms", "client_cpu", "hbase_rts_per_op", "thrift1_per_op", "thrift2_per_op",
              "oracle_rts_per_op", "timestamps_per_op", "rts_by_caller", "cas_conflicts", "repeats", "seconds", "slice",
              "client_us_per_op", "server_us_per_op", "samples_ops_s", "command"]
    floats = ("median_ops_s", "ratio_vs_raw", "min_ratio", "max_ratio", "min_ops_s", "max_ops_s", "p50_ms", "p99_ms", "client_cpu",
              "hbase_rts_per_op", "thrift1_per_op", "thrift2_per_op", "oracle_rts_per_op", "timestamps_per_op")
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in results:
            w.writerow({**r, "run_at": stamp, "repeats": args.repeats, "seconds": args.seconds, "command": command,
                        "slice": args.slice, "client_us_per_op": f"{r['client_us_per_op']:.1f}",
                        "server_us_per_op": ";".join(f"{k}={v:.1f}" for k, v in r["server_us_per_op"].items()),
                        **{k: f"{r[k]:.3f}" for k in floats}})

    # -- Markdown
    print(f"## Transactions vs raw storage ({stamp})\n")
    print(f"One run, same Thrift pools. Each repeat runs the raw operation and its transaction for "
          f"{args.seconds:g}s each, interleaved in {args.slice:g}s slices (A B B A ...), so both see the same "
          f"load; ops/s = median (min–max) over {args.repeats} repeats; ratio = transaction / raw within "
          f"each repeat, median (min–max). RTs = round trips per operation, counted during the timed "
          f"slices (HBase: Thrift1 + Thrift2 calls; oracle: requests, batched across threads).\n")
    head = ["operation", "threads", "ops/s", "ratio", "paper", "goal", "p50 ms", "p99 ms",
            "HBase RTs (T1+T2)", "oracle RTs", "client CPU"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["--:"] * (len(head) - 1)) + "|"]
    for n in args.threads:
        for op in OPS:
            r = by[(op.name, n)]
            is_txn = op.name in BASE_OF
            verdict = ""
            if is_txn:
                verdict = " ✓" if r["ratio_vs_raw"] >= GOAL[op.name] else " ✗"
            lines.append("| " + " | ".join([
                f"`{op.name}`", str(n),
                f"{r['median_ops_s']:,.0f} ({r['min_ops_s']:,.0f}–{r['max_ops_s']:,.0f})",
                f"**{r['ratio_vs_raw']:.2f}×**{verdict} ({r['min_ratio']:.2f}–{r['max_ratio']:.2f})" if is_txn else "1",
                f"{PAPER[op.name]:.2f}×" if is_txn else "",
                f"≥ {GOAL[op.name]:.2f}×" if is_txn else "",
                f"{r['p50_ms']:.2f}", f"{r['p99_ms']:.2f}",
                f"{r['hbase_rts_per_op']:.2f} ({r['thrift1_per_op']:.2f}+{r['thrift2_per_op']:.2f})",
                f"{r['oracle_rts_per_op']:.2f}" + (f" ({r['timestamps_per_op']:.0f} ts)" if is_txn else ""),
                f"{r['client_cpu']:.0%}",
            ]) + " |")
    print("\n".join(lines))
    print()
    for op in OPS:
        print(f"- `{op.name}`: {op.what}")
    print(f"\nRound trips per operation, single-threaded ({args.account_ops} untimed runs each), by the store "
          f"method that sent them:\n")
    for op in OPS:
        rt, o_rts, o_ts = accounting[op.name]
        k = args.account_ops
        parts = ", ".join(f"{key.split('.', 1)[0]} `{key.split('.', 1)[1]}` {v / k:.2f}"
                          for key, v in sorted(rt.items()) if "." in key)
        print(f"- `{op.name}`: HBase {(rt['thrift1'] + rt['thrift2']) / k:.2f} ({parts}); "
              f"oracle {o_rts / k:.2f} round trips, {o_ts / k:.2f} timestamps")
    if latency:
        print(f"\nLatency anatomy ({args.account_ops * 2} calls each, single thread): a read transaction is an "
              f"oracle round trip then a get, two servers taking turns.\n")
        print("| call | median ms | mean ms |")
        print("|---|--:|--:|")
        for name, (med, mean) in latency.items():
            print(f"| {name} | {med:.3f} | {mean:.3f} |")
    print("\nCPU per operation (µs), this client and each local server process, summed over the timed "
          "slices (the servers' CPU includes whatever else the machine ran meanwhile):\n")
    pieces = sorted({p for r in results for p in r["server_us_per_op"]})
    print("| operation | threads | client | " + " | ".join(pieces) + " | total |")
    print("|---|--:|--:|" + "--:|" * (len(pieces) + 1))
    for r in results:
        servers = r["server_us_per_op"]
        total_us = r["client_us_per_op"] + sum(servers.values())
        print(f"| `{r['operation']}` | {r['threads']} | {r['client_us_per_op']:.0f} | "
              + " | ".join(f"{servers.get(p, 0.0):.0f}" for p in pieces) + f" | {total_us:.0f} |")
    conflicts = sum(r["cas_conflicts"] for r in results)
    print(f"\nCAS conflicts: {conflicts} (write threads own disjoint rows: 0 expected). Wall time {wall:.0f}s. "
          f"CSV: {args.csv}")

    texts = []
    for name, (n, pwall, cats, text) in profiles.items():
        if not cats:
            print(f"\n(profile skipped: {text})")
            break
        texts.append(f"==== {name} ====\n{text}")
        total_s = sum(v[0] for v in cats.values())
        what = {"txn_write_cas": "write (thrift-cas)", "txn_write_cp": "write (coprocessor)"}.get(name, "read")
        print(f"\n### Where a one-cell {what} transaction's time goes (pyinstrument, 1 thread, {n} transactions "
              f"in {pwall:.1f}s: {pwall / n * 1e3:.2f} ms each under the profiler)\n")
        print("| part | ms / txn | share | of which waiting on sockets |")
        print("|---|--:|--:|--:|")
        for part, (secs, wait) in sorted(cats.items(), key=lambda kv: -kv[1][0]):
            if secs:
                print(f"| {part} | {secs / n * 1e3:.3f} | {secs / total_s:.0%} | {wait / n * 1e3:.3f} |")
    if texts:
        PROFILE_TXT.parent.mkdir(parents=True, exist_ok=True)
        PROFILE_TXT.write_text("\n".join(texts))
        print(f"\n\"Waiting on sockets\" is time in socket recv/send (the server's work, its wake-up, the "
              f"wire); the rest of each part is Python in this process. Full profiles: {PROFILE_TXT}")
    print("\nReproduce:\n")
    print(f"    {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
