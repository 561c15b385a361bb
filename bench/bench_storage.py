#!/usr/bin/env python3
"""Storage baseline: operations per second of the Thrift calls the protocol is built from.

Runs against the real HBase named by the ``CAFFEINE_*`` settings, through the store's own
connection pools (``store.thrift1``, ``store.thrift2``), so every number is the same Thrift
path the protocol uses. For each thread count it measures:

==================  =====================================================================
t1_put              raw Thrift1 put of one cell (happybase ``Table.put``, ``mutateRowTs``)
t1_get              raw Thrift1 get of one cell (happybase ``Table.row``)
t2_get              Thrift2 ``get`` of one cell (``TGet``)
t2_put              Thrift2 ``put`` of one cell (``TPut``)
mutate_row          ``store.mutate_row``: two cells plus the row guard, atomically (Thrift2)
row_txn             ``store.row_transaction`` on rows owned by the thread: guarded read
                    (Thrift1) + check-and-mutate (Thrift2) = 2 round trips
check_and_mutate    bare ``store._compare_and_apply`` (one Thrift2 ``checkAndMutate``),
                    the guard known from one untimed guarded read per row
==================  =====================================================================

Each (operation, threads) cell runs for ``--seconds`` after a short untimed warm-up (which
also opens the pooled connections), ``--repeats`` times; repeats are interleaved (every cell
once, then every cell again) so slow drift of a shared machine hits all operations alike.
The median ops/s is reported, with its ratio to ``t1_get`` at the same thread count in the
same run. The table and its CSV (``bench/results/storage.csv``) also give per-call latency
(p50/p99 of the whole operation, in ms) and the client process's CPU use, which shows when
the Python client (one GIL) rather than HBase is the bottleneck.

Usage::

    export CAFFEINE_THRIFT2_IDL=/path/to/hbase/thrift2/hbase.thrift   # if not resolvable
    python3 bench/bench_storage.py [--seconds 2] [--repeats 3] [--threads 1,8] [--ops ...]

A table ``bench_storage_<random>`` is created for the run and dropped at the end.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
RESULTS_CSV = HERE / "results" / "storage.csv"

FAMILY = b"a"
QX = b"x"
QY = b"y"
COL_X = FAMILY + b":" + QX
COL_Y = FAMILY + b":" + QY

Step = Callable[[], None]


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- the operations ----------------------------------------------------------------------------

@dataclass
class Ctx:
    """What every operation needs: the store, the table, the pre-populated rows, a clock."""

    store: object
    table: str
    hname: bytes  # the HBase table name (prefix included)
    keys: list[bytes]
    value: bytes
    # Explicit, ever-growing cell timestamps (the protocol never lets the server stamp).
    # next() on itertools.count is atomic under the GIL.
    ts: Callable[[], int] = field(default_factory=lambda: itertools.count(1_000_000).__next__)


@dataclass(frozen=True)
class Op:
    name: str
    round_trips: int
    what: str
    # make(ctx, thread_index, n_threads, rng) -> step; anything done in make is untimed.
    make: Callable[[Ctx, int, int, random.Random], Step]


def make_t1_put(ctx: Ctx, tid: int, n: int, rng: random.Random) -> Step:
    keys, name, value, ts, pool = ctx.keys, ctx.hname, ctx.value, ctx.ts, ctx.store.thrift1

    def step():
        row = rng.choice(keys)
        pool.call(lambda conn: conn.table(name).put(row, {COL_X: value}, timestamp=ts()))
    return step


def make_t1_get(ctx: Ctx, tid: int, n: int, rng: random.Random) -> Step:
    keys, name, pool = ctx.keys, ctx.hname, ctx.store.thrift1

    def step():
        row = rng.choice(keys)
        got = pool.call(lambda conn: conn.table(name).row(row, columns=[COL_X]))
        if not got:
            raise AssertionError(f"t1_get: row {row!r} is empty")
    return step


def make_t2_get(ctx: Ctx, tid: int, n: int, rng: random.Random) -> Step:
    keys, name, pool, t2 = ctx.keys, ctx.hname, ctx.store.thrift2, ctx.store.t2
    columns = [t2.TColumn(family=FAMILY, qualifier=QX)]

    def step():
        row = rng.choice(keys)
        got = pool.call(lambda c: c.get(name, t2.TGet(row=row, columns=columns)))
        if not got.columnValues:
            raise AssertionError(f"t2_get: row {row!r} is empty")
    return step


def make_t2_put(ctx: Ctx, tid: int, n: int, rng: random.Random) -> Step:
    keys, name, value, ts, pool, t2 = ctx.keys, ctx.hname, ctx.value, ctx.ts, ctx.store.thrift2, ctx.store.t2

    def step():
        row = rng.choice(keys)
        tput = t2.TPut(row=row, columnValues=[
            t2.TColumnValue(family=FAMILY, qualifier=QX, value=value, timestamp=ts())])
        pool.call(lambda c: c.put(name, tput))
    return step


def make_mutate_row(ctx: Ctx, tid: int, n: int, rng: random.Random) -> Step:
    from caffeine.storage import Put

    store, table, keys, value, ts = ctx.store, ctx.table, ctx.keys, ctx.value, ctx.ts

    def step():
        t = ts()
        store.mutate_row(table, rng.choice(keys), [Put(FAMILY, QX, t, value), Put(FAMILY, QY, t, value)])
    return step


OWNED_ROWS = 64


def own_rows(ctx: Ctx, tid: int, n: int) -> list[bytes]:
    """The rows thread ``tid`` of ``n`` owns: disjoint across threads, spread over the table,
    at most OWNED_ROWS of them (check_and_mutate reads each one's guard before timing)."""
    return ctx.keys[tid::n][:OWNED_ROWS]


def make_row_txn(ctx: Ctx, tid: int, n: int, rng: random.Random) -> Step:
    from caffeine.storage import Decision, Put, ReadSpec

    store, table, value, ts = ctx.store, ctx.table, ctx.value, ctx.ts
    rows = own_rows(ctx, tid, n)
    spec = ReadSpec(columns=((FAMILY, QX), (FAMILY, QY)))

    def step():
        t = ts()
        mutations = [Put(FAMILY, QX, t, value), Put(FAMILY, QY, t, value)]
        store.row_transaction(table, rng.choice(rows), spec, lambda row: Decision(mutations, True))
    return step


def make_check_and_mutate(ctx: Ctx, tid: int, n: int, rng: random.Random) -> Step:
    from caffeine.storage import Put, ReadSpec

    store, table, value, ts = ctx.store, ctx.table, ctx.value, ctx.ts
    rows = own_rows(ctx, tid, n)
    spec = ReadSpec(columns=((FAMILY, QX), (FAMILY, QY)))
    # One guarded read per owned row (untimed); afterwards this thread is the only writer of
    # these rows, so the guard it last wrote is the one to expect.
    guards = {row: store._read_guarded(table, row, spec).guard for row in rows}

    def step():
        row = rng.choice(rows)
        t = ts()
        token = os.urandom(16)
        ok = store._compare_and_apply(
            table, row, guards[row], [Put(FAMILY, QX, t, value), Put(FAMILY, QY, t, value)], token)
        if not ok:
            raise AssertionError(f"check_and_mutate: lost the CAS on owned row {row!r}")
        guards[row] = token
    return step


OPS = [
    Op("t1_put", 1, "Thrift1 put, 1 cell (happybase)", make_t1_put),
    Op("t1_get", 1, "Thrift1 get, 1 cell (happybase)", make_t1_get),
    Op("t2_get", 1, "Thrift2 get, 1 cell", make_t2_get),
    Op("t2_put", 1, "Thrift2 put, 1 cell", make_t2_put),
    Op("mutate_row", 1, "Thrift2 mutateRow, 2 cells + guard (store.mutate_row)", make_mutate_row),
    Op("row_txn", 2, "row transaction: guarded read + checkAndMutate (store.row_transaction)", make_row_txn),
    Op("check_and_mutate", 1, "Thrift2 checkAndMutate alone (store._compare_and_apply)", make_check_and_mutate),
]
BASELINE = "t1_get"


# -- running one measurement -------------------------------------------------------------------

@dataclass
class Sample:
    ops: int
    elapsed: float
    cpu: float  # client process CPU seconds during the timed window
    latencies: list[float]

    @property
    def rate(self) -> float:
        return self.ops / self.elapsed


def measure(ctx: Ctx, op: Op, n_threads: int, seconds: float, warmup_s: float, seed: int) -> Sample:
    """``n_threads`` threads run ``op`` for ``seconds`` after an untimed warm-up."""
    go = {}

    def open_window() -> None:
        # Runs once, when every worker has built its step and warmed up (the guarded reads
        # of check_and_mutate included): only then does the timed window start.
        go["start"] = time.perf_counter()
        go["deadline"] = go["start"] + seconds
        go["cpu0"] = time.process_time()

    barrier = threading.Barrier(n_threads, action=open_window)
    counts = [0] * n_threads
    lats: list[list[float]] = [[] for _ in range(n_threads)]
    ends = [0.0] * n_threads
    errors: list[BaseException] = []

    def worker(tid: int) -> None:
        try:
            step = op.make(ctx, tid, n_threads, random.Random(seed * 1000 + tid))
            warm_until = time.perf_counter() + warmup_s
            while time.perf_counter() < warm_until:
                step()
        except BaseException as exc:  # reported after the barrier, never left hanging
            errors.append(exc)
            step = None
        barrier.wait()
        if step is None:
            return
        deadline = go["deadline"]
        out = lats[tid]
        perf = time.perf_counter
        n = 0
        try:
            while True:
                t0 = perf()
                if t0 >= deadline:
                    break
                step()
                out.append(perf() - t0)
                n += 1
        except BaseException as exc:
            errors.append(exc)
        counts[tid] = n
        ends[tid] = perf()

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cpu1 = time.process_time()
    if errors:
        raise errors[0]
    elapsed = max(ends) - go["start"]
    return Sample(sum(counts), elapsed, cpu1 - go["cpu0"], [x for l in lats for x in l])


def pct(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[i]


# -- setup, the run, the report ----------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=2.0,
                   help="timed duration of each measurement (default 2: the whole default run "
                        "takes about 1.5 minutes)")
    p.add_argument("--repeats", type=int, default=3, help="repeats per measurement; the median is reported (default 3)")
    p.add_argument("--threads", default="1,8", help="comma-separated client thread counts (default 1,8)")
    p.add_argument("--ops", default=",".join(o.name for o in OPS),
                   help=f"comma-separated subset of: {', '.join(o.name for o in OPS)} "
                        f"({BASELINE} is always measured: it is the ratio's baseline)")
    p.add_argument("--rows", type=int, default=4096, help="rows pre-populated and spread over (default 4096)")
    p.add_argument("--value-size", type=int, default=64, help="bytes per cell value (default 64)")
    p.add_argument("--warmup", type=float, default=0.25, help="untimed warm-up seconds per measurement (default 0.25)")
    p.add_argument("--csv", type=Path, default=RESULTS_CSV, help=f"CSV output (default {RESULTS_CSV.relative_to(HERE.parent)})")
    args = p.parse_args(argv)
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        p.error("--threads: comma-separated integers, e.g. 1,8")
    if not args.threads or min(args.threads) < 1:
        p.error("--threads: at least one positive thread count")
    names = {o.name for o in OPS}
    chosen = [s.strip() for s in args.ops.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in names]
    if unknown:
        p.error(f"--ops: unknown {', '.join(unknown)}; choose from {', '.join(sorted(names))}")
    chosen = set(chosen) | {BASELINE}
    args.ops = [o for o in OPS if o.name in chosen]
    if args.seconds <= 0 or args.repeats < 1 or args.rows < max(args.threads):
        p.error("need --seconds > 0, --repeats >= 1 and --rows >= the largest thread count")
    return args


def reproduce_command(argv: list[str]) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items()) if k.startswith("CAFFEINE_"))
    cmd = " ".join(shlex.quote(a) for a in ["python3", "bench/bench_storage.py", *argv])
    return f"{env} {cmd}".strip()


def populate(ctx: Ctx) -> None:
    """Every key gets a:x and a:y (no guard yet: row transactions start from an absent one)."""
    name = ctx.hname

    def fill(conn):
        with conn.table(name).batch(timestamp=ctx.ts(), batch_size=512) as b:
            for key in ctx.keys:
                b.put(key, {COL_X: ctx.value, COL_Y: ctx.value})

    ctx.store.thrift1.call(fill)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)

    from caffeine.config import load_settings
    from caffeine.storage import FamilySpec
    from caffeine.storage.hbase import HBaseStore

    settings = load_settings(table_prefix="bench_")
    # Passed explicitly so the bench runs whether or not Settings knows ``thrift2_idl`` yet.
    store = HBaseStore(settings, thrift2_idl=os.environ.get("CAFFEINE_THRIFT2_IDL") or None)
    if settings.pool_size < max(args.threads):
        log(f"warning: pool_size {settings.pool_size} < {max(args.threads)} threads; "
            "threads will queue for connections")
    table = f"storage_{uuid.uuid4().hex[:8]}"
    # Keys spread over the key space (hash prefix), as the protocol's rows would be.
    keys = [b"%08x-%06d" % (zlib.crc32(b"%d" % i), i) for i in range(args.rows)]
    ctx = Ctx(store, table, (settings.table_prefix + table).encode(), keys, os.urandom(args.value_size))

    cells = [(op, n) for n in args.threads for op in args.ops]
    total = len(cells) * args.repeats
    est = total * (args.seconds + args.warmup + 0.1)
    log(f"HBase Thrift1 {settings.thrift1_host}:{settings.thrift1_port}, "
        f"Thrift2 {settings.thrift2_host}:{settings.thrift2_port}; table {settings.table_prefix}{table}")
    log(f"{len(args.ops)} operations x threads {args.threads} x {args.repeats} repeats x {args.seconds:g}s "
        f"= {total} measurements, about {est:.0f}s")

    samples: dict[tuple[str, int], list[Sample]] = {(op.name, n): [] for op, n in cells}
    conflicts: dict[tuple[str, int], int] = {(op.name, n): 0 for op, n in cells}
    started = time.monotonic()
    store.create_table(table, {FAMILY: FamilySpec(max_versions=1)})
    try:
        populate(ctx)
        log(f"created and populated {args.rows} rows in {time.monotonic() - started:.1f}s")
        done = 0
        for rep in range(args.repeats):
            for op, n in cells:
                before = store.stats.as_dict()
                s = measure(ctx, op, n, args.seconds, args.warmup, seed=rep * 100 + n)
                after = store.stats.as_dict()
                conflicts[(op.name, n)] += after["cas_conflicts"] - before["cas_conflicts"]
                samples[(op.name, n)].append(s)
                done += 1
                log(f"[{done:>3}/{total}] rep {rep + 1}  {op.name:<17} x{n:<3} "
                    f"{s.rate:>8.0f} ops/s  ({s.ops} ops in {s.elapsed:.2f}s, client CPU {s.cpu / s.elapsed:.0%})")
        retries = {k: v for k, v in store.stats.as_dict().items()
                   if k in ("retried_calls", "reconnects", "unknown_outcomes") and v}
        if retries:
            log(f"note: the pools retried during the run: {retries}")
    finally:
        try:
            store.drop_table(table)
            log(f"dropped {settings.table_prefix}{table}")
        except Exception as exc:  # report, never mask the run's own error
            log(f"warning: could not drop {settings.table_prefix}{table}: {exc}")
        store.close()
    wall = time.monotonic() - started

    # -- aggregate
    results = []
    for op, n in cells:
        ss = samples[(op.name, n)]
        rates = [s.rate for s in ss]
        lat = sorted(x for s in ss for x in s.latencies)
        results.append(dict(
            operation=op.name, threads=n, round_trips=op.round_trips,
            median_ops_s=statistics.median(rates), min_ops_s=min(rates), max_ops_s=max(rates),
            p50_ms=pct(lat, 0.50) * 1e3, p99_ms=pct(lat, 0.99) * 1e3,
            client_cpu=statistics.median(s.cpu / s.elapsed for s in ss),
            cas_conflicts=conflicts[(op.name, n)],
            samples_ops_s=";".join(f"{r:.1f}" for r in rates),
        ))
    base = {r["threads"]: r["median_ops_s"] for r in results if r["operation"] == BASELINE}
    for r in results:
        r["ratio_vs_t1_get"] = r["median_ops_s"] / base[r["threads"]]

    # -- CSV
    stamp = _dt.datetime.now().astimezone().isoformat(timespec="seconds")
    command = reproduce_command(argv)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    fields = ["run_at", "operation", "threads", "round_trips", "median_ops_s", "ratio_vs_t1_get",
              "min_ops_s", "max_ops_s", "p50_ms", "p99_ms", "client_cpu", "cas_conflicts",
              "repeats", "seconds", "samples_ops_s", "command"]
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in results:
            w.writerow({**r, "run_at": stamp, "repeats": args.repeats, "seconds": args.seconds,
                        "command": command,
                        **{k: f"{r[k]:.3f}" for k in ("median_ops_s", "ratio_vs_t1_get", "min_ops_s",
                                                      "max_ops_s", "p50_ms", "p99_ms", "client_cpu")}})

    # -- Markdown
    by = {(r["operation"], r["threads"]): r for r in results}
    head = ["operation", "RTs"]
    for n in args.threads:
        head += [f"ops/s ×{n}", f"vs t1_get ×{n}", f"p50 ms ×{n}", f"client CPU ×{n}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["--:"] * (len(head) - 1)) + "|"]
    for op in args.ops:
        row = [f"`{op.name}`", str(op.round_trips)]
        for n in args.threads:
            r = by[(op.name, n)]
            row += [f"{r['median_ops_s']:,.0f} ({r['min_ops_s']:,.0f}–{r['max_ops_s']:,.0f})", f"{r['ratio_vs_t1_get']:.2f}",
                    f"{r['p50_ms']:.2f}", f"{r['client_cpu']:.0%}"]
        lines.append("| " + " | ".join(row) + " |")
    print(f"## Storage baseline ({stamp})\n")
    print(f"Median (min–max) of {args.repeats} × {args.seconds:g}s per cell; ratio to `{BASELINE}` at the same "
          f"thread count in this run; p50 = per-call latency; client CPU = this process's CPU "
          f"time / wall time (100% = one core).\n")
    print("\n".join(lines))
    print()
    for op in args.ops:
        print(f"- `{op.name}`: {op.what}")
    total_conflicts = sum(conflicts.values())
    print(f"\nCAS conflicts: {total_conflicts} (rows are owned per thread, so 0 expected). "
          f"Wall time {wall:.0f}s. CSV: {args.csv}\n")
    print("Reproduce:\n")
    print(f"    {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
