#!/usr/bin/env python3
"""The per-row toll of storage calls: CPU per row of multi-row Thrift2 calls by batch size.

What batching the storage calls of concurrent transactions can save: for each kind of call
and each batch size B, the CPU that one row costs in each process on its way (this Python
client, the Thrift2 server JVM, the HBase JVM), and the wall time of one call.

==========  ================================================================================
kind        one call (B rows, one client thread, calls back to back)
==========  ================================================================================
get         ``getMultiple`` of B ``TGet``s, two columns each (``d:c1``, ``w:c1``), rows
            pre-populated and picked at random; answers decoded into ``Row``s
put         ``putMultiple`` of B ``TPut``s, two cells each (``d:c1``, ``n:c1``) plus the row
            guard, as ``store.put_rows`` sends them
delete      ``deleteMultiple`` of B ``TDelete``s, one exact version each (``n:c1``,
            DELETE_COLUMN), as ``store.delete_rows`` sends notification deletes
prewrite    B checked prewrites (data + lock of two columns, the coprocessor checks each
            row under its row lock) in ONE ``putMultiple`` on fresh rows: how the
            coprocessor committer sends a table's secondaries
commit      B checked commits (write records + lock deletes of two columns) sent as
            today: ONE ``mutateRow`` PER ROW (``Store._send_checked``), on rows the
            prewrite kind locked (an untimed top-up prewrites more when they run out)
==========  ================================================================================

Contract: needs a runtime whose HBase loads Caffeine's coprocessor (``caffeine up``) and the
local pid files (``bench/proc_cpu.py``: the Thrift2 and HBase JVMs' CPU from /proc). Each
(kind, B) cell is a timed window of ``--seconds``; cells are interleaved (every kind and size
once per repeat, sizes in a rotated order each repeat) and the median over ``--repeats`` is
reported. The JVMs' idle CPU rate, measured for ``--idle`` seconds before the first window
(metrics and chore threads), is subtracted from each window, so a row's JVM figure is what
the calls added. Per-row figures are µs of CPU per row; "wall" is ms per call.

    python3 bench/bench_storage_toll.py [--sizes 1,4,16,64] [--kinds get,put,delete,prewrite,commit]
                                        [--seconds 2] [--repeats 5] [--warmup 30] [--idle 5]

A Percolator table ``bench_toll_<random>`` is created for the run and dropped at the end;
the CSV goes to ``bench/results/storage_toll.csv``.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import os
import random
import shlex
import statistics
import sys
import time
import uuid
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from proc_cpu import cpu_seconds, runtime_cpu_s  # noqa: E402

RESULTS_CSV = HERE / "results" / "storage_toll.csv"
KINDS = ("get", "put", "delete", "prewrite", "commit")
JVMS = ("thrift2", "hbase")
COLUMNS = ("c1", "c2")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@dataclass
class Bench:
    """What the calls share: the store, the table, the rows, a clock of cell timestamps."""

    store: object
    table: str
    keys: list[bytes]
    value: bytes
    lock: bytes
    rng: random.Random
    # Ever-growing explicit timestamps, above anything populated.
    ts: Callable[[], int] = field(default_factory=lambda: itertools.count(1 << 40, 2).__next__)
    # Rows prewritten (locked at start_ts) and not committed yet, oldest first.
    locked: list[tuple[bytes, int]] = field(default_factory=list)
    fresh: Callable[[], int] = field(default_factory=lambda: itertools.count().__next__)

    @property
    def name(self) -> bytes:
        return self.store._name(self.table)

    def pick(self, b: int) -> list[bytes]:
        return self.rng.sample(self.keys, b)


# -- one call of each kind (returns the rows it covered) --------------------------------------

def call_get(bench: Bench, b: int) -> int:
    from caffeine.percolator.layout import DATA, WRITE
    from caffeine.storage import ReadSpec

    store, codec = bench.store, bench.store.codec
    spec = ReadSpec(columns=((DATA, b"c1"), (WRITE, b"c1")))
    tgets = [codec.tget(row, spec, (), False) for row in bench.pick(b)]
    name = bench.name
    results = store.thrift2.call(lambda c: c.getMultiple(name, tgets))
    rows = [codec.row_of(r.row, r.columnValues, spec) for r in results if r.row is not None]
    if len(rows) != b:
        raise AssertionError(f"get: {len(rows)} of {b} rows found")
    return b


def call_put(bench: Bench, b: int) -> int:
    from caffeine.percolator.layout import DATA, NOTIFY
    from caffeine.storage import Put

    codec, ts, value = bench.store.codec, bench.ts, bench.value
    tputs = []
    for row in bench.pick(b):
        t = ts()
        tputs.append(codec.guarded_tput(row, [Put(DATA, b"c1", t, value), Put(NOTIFY, b"c1", t, b"")], os.urandom(16)))
    name = bench.name
    bench.store.thrift2.call(lambda c: c.putMultiple(name, tputs))
    return b


def call_delete(bench: Bench, b: int) -> int:
    from caffeine.percolator.layout import NOTIFY
    from caffeine.storage import Delete

    codec, ts = bench.store.codec, bench.ts
    tdeletes = []
    for row in bench.pick(b):
        tdeletes += codec.tdeletes(row, [Delete(NOTIFY, b"c1", ts())])
    name = bench.name
    failed = bench.store.thrift2.call(lambda c: c.deleteMultiple(name, tdeletes))
    if failed:
        raise AssertionError(f"delete: {len(failed)} of {b} deletes failed")
    return b


def prewrite_rows(bench: Bench, b: int) -> int:
    """B checked prewrites on fresh rows in one putMultiple; the rows join ``bench.locked``."""
    from caffeine.percolator.steps import server

    codec = bench.store.codec
    writes = {}
    for _ in range(b):
        row = b"p%010d" % bench.fresh()
        start_ts = bench.ts()
        writes[row] = (start_ts, server.prewrite_write(
            {c: bench.value for c in COLUMNS}, {c: bench.lock for c in COLUMNS}, start_ts))
    tputs = [codec.guarded_tput(row, w.mutations, os.urandom(16), w.attributes) for row, (_, w) in writes.items()]
    name = bench.name
    # Not idempotent in general (a checked write); a refusal raises, which the fresh rows rule out.
    bench.store.thrift2.call(lambda c: c.putMultiple(name, tputs), idempotent=False)
    bench.locked.extend((row, start_ts) for row, (start_ts, _) in writes.items())
    return b


def commit_rows(bench: Bench, b: int) -> int:
    """B checked commits, one mutateRow per row (``_send_checked`` of one row, as the
    coprocessor committer sends every commit step today)."""
    from caffeine.percolator.records import Kind
    from caffeine.percolator.steps import server

    store = bench.store
    done = 0
    for row, start_ts in bench.locked[:b]:
        write = server.commit_write({c: Kind.PUT for c in COLUMNS}, start_ts, bench.ts())
        answers = store._send_checked(bench.table, {row: write}, {row: os.urandom(16)})
        if answers.get(row) is not None:
            raise AssertionError(f"commit of {row!r} refused: {answers[row]}")
        done += 1
    del bench.locked[:done]
    return done


CALLS = {"get": call_get, "put": call_put, "delete": call_delete, "prewrite": prewrite_rows, "commit": commit_rows}


# -- one timed window ------------------------------------------------------------------------

@dataclass
class Window:
    rows: int
    calls: int
    elapsed: float
    cpu: dict[str, float]  # seconds, by process ("client", "thrift2", "hbase"), idle removed

    def per_row_us(self, proc: str) -> float:
        return 1e6 * self.cpu[proc] / self.rows


def top_up(bench: Bench, rows: int) -> None:
    """Untimed: prewrite until at least ``rows`` rows are locked, for the commit window."""
    while len(bench.locked) < rows:
        prewrite_rows(bench, 64)


def window(bench: Bench, kind: str, b: int, seconds: float, idle: dict[str, float], settings) -> Window:
    """Calls of ``kind`` with ``b`` rows each, back to back for ``seconds`` (a commit window
    ends early if the locked rows run out)."""
    call = CALLS[kind]
    pid = os.getpid()
    rows = calls = 0
    jvm0, me0, t0 = runtime_cpu_s(settings), cpu_seconds(pid), time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        if kind == "commit" and len(bench.locked) < b:
            break
        rows += call(bench, b)
        calls += 1
    elapsed = time.perf_counter() - t0
    jvm1, me1 = runtime_cpu_s(settings), cpu_seconds(pid)
    cpu = {"client": me1 - me0}
    for piece in JVMS:
        cpu[piece] = (jvm1[piece] - jvm0[piece]) - idle.get(piece, 0.0) * elapsed
    return Window(rows, calls, elapsed, cpu)


def warm_up(bench: Bench, kinds: list[str], sizes: list[int], seconds: float) -> None:
    """Untimed: every (kind, size) in turn until ``seconds`` have passed (at least once each),
    so the JVMs' JIT compiles the paths of every cell before any is timed."""
    deadline = time.monotonic() + seconds
    while True:
        for kind in kinds:
            for b in sizes:
                if kind == "commit":
                    top_up(bench, b)
                CALLS[kind](bench, b)
        if time.monotonic() >= deadline:
            return


def idle_rates(settings, seconds: float) -> dict[str, float]:
    """CPU seconds per second each JVM spends with nothing asked of it."""
    before = runtime_cpu_s(settings)
    time.sleep(seconds)
    after = runtime_cpu_s(settings)
    return {p: (after[p] - before[p]) / seconds for p in JVMS}


# -- setup, the run, the report --------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1,4,16,64", help="batch sizes (rows per call), default 1,4,16,64")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"subset of {','.join(KINDS)}")
    p.add_argument("--seconds", type=float, default=2.0, help="timed seconds per window (default 2)")
    p.add_argument("--repeats", type=int, default=5, help="windows per (kind, size); medians reported (default 5)")
    p.add_argument("--warmup", type=float, default=30.0,
                   help="untimed seconds cycling through every cell first: a JVM compiles its hot "
                        "paths for minutes after a start (default 30)")
    p.add_argument("--idle", type=float, default=5.0, help="seconds of idle JVM CPU measured first (default 5)")
    p.add_argument("--rows", type=int, default=4096, help="pre-populated rows for get/put/delete (default 4096)")
    p.add_argument("--value-size", type=int, default=64, help="bytes per data value (default 64)")
    p.add_argument("--transport", choices=("buffered", "framed"), default="buffered",
                   help="Thrift2 client transport: framed for a server started with -hsha, "
                        "-nonblocking or -threadedselector (default buffered, what Caffeine speaks)")
    p.add_argument("--protocol", choices=("binary", "compact"), default="binary",
                   help="Thrift2 client protocol: compact for a server started with -c (default binary)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--csv", type=Path, default=RESULTS_CSV)
    args = p.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    args.kinds = [k for k in args.kinds.split(",") if k.strip()]
    bad = [k for k in args.kinds if k not in KINDS]
    if bad or not args.sizes or min(args.sizes) < 1 or max(args.sizes) > args.rows:
        p.error(f"--kinds from {','.join(KINDS)}; --sizes positive and at most --rows")
    return args


def use_wire(transport: str, protocol: str) -> None:
    """Make this process's Thrift2 connections speak ``transport``/``protocol`` (to measure a
    Thrift2 server started with another server type or protocol; Caffeine itself speaks
    buffered binary, which only ``-threadpool`` without ``-c`` answers)."""
    if (transport, protocol) == ("buffered", "binary"):
        return
    from thriftpy2.protocol import TBinaryProtocolFactory, TCompactProtocolFactory
    from thriftpy2.rpc import make_client
    from thriftpy2.transport import TBufferedTransportFactory, TFramedTransportFactory

    import caffeine.storage.hbase as hbase

    def connect(t2, settings):
        return make_client(
            t2.THBaseService, settings.thrift2_host, settings.thrift2_port,
            trans_factory=TFramedTransportFactory() if transport == "framed" else TBufferedTransportFactory(),
            proto_factory=TCompactProtocolFactory() if protocol == "compact" else TBinaryProtocolFactory(),
            timeout=settings.thrift_timeout_ms)

    hbase.thrift2.connect = connect


def reproduce_command(argv: list[str]) -> str:
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(os.environ.items()) if k.startswith("CAFFEINE_"))
    return f"{env} {' '.join(shlex.quote(a) for a in ['python3', 'bench/bench_storage_toll.py', *argv])}".strip()


def populate(bench: Bench) -> None:
    """Every key gets ``d:c1`` and ``w:c1`` (what the get kind reads), in batches."""
    from caffeine.percolator.layout import DATA, WRITE
    from caffeine.storage import Put

    t = bench.ts()
    for i in range(0, len(bench.keys), 512):
        bench.store.put_rows(bench.table, {
            key: [Put(DATA, b"c1", t, bench.value), Put(WRITE, b"c1", t + 1, bench.value[:16])]
            for key in bench.keys[i:i + 512]})


def schedule(kinds: list[str], sizes: list[int], repeats: int) -> list[tuple[int, str, int]]:
    """(repeat, kind, size) in run order: each repeat covers every cell, sizes rotated per
    repeat so no size always runs first or right after a flush-heavy kind."""
    out = []
    for rep in range(repeats):
        rotated = sizes[rep % len(sizes):] + sizes[:rep % len(sizes)]
        for kind in kinds:
            out += [(rep, kind, b) for b in rotated]
    return out


def summarize(windows: dict[tuple[str, int], list[Window]]) -> list[dict]:
    """Median per-row CPU by process, per-call wall, rows/s for each (kind, size)."""
    out = []
    for (kind, b), ws in windows.items():
        r = {"kind": kind, "batch": b, "windows": len(ws)}
        for proc in ("client", *JVMS):
            r[f"{proc}_us_row"] = statistics.median(w.per_row_us(proc) for w in ws)
        r["total_us_row"] = statistics.median(sum(w.per_row_us(p) for p in ("client", *JVMS)) for w in ws)
        r["wall_ms_call"] = statistics.median(1e3 * w.elapsed / w.calls for w in ws)
        r["rows_s"] = statistics.median(w.rows / w.elapsed for w in ws)
        out.append(r)
    return out


def markdown(results: list[dict], sizes: list[int]) -> str:
    base = {r["kind"]: r["total_us_row"] for r in results if r["batch"] == sizes[0]}
    head = ["kind", "B", "client µs/row", "Thrift2 µs/row", "HBase µs/row", "total µs/row",
            f"vs B={sizes[0]}", "wall ms/call", "rows/s"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "--:|" * (len(head) - 1)]
    for r in results:
        lines.append("| " + " | ".join([
            r["kind"], str(r["batch"]), f"{r['client_us_row']:.0f}", f"{r['thrift2_us_row']:.0f}",
            f"{r['hbase_us_row']:.0f}", f"{r['total_us_row']:.0f}", f"{r['total_us_row'] / base[r['kind']]:.2f}",
            f"{r['wall_ms_call']:.2f}", f"{r['rows_s']:,.0f}"]) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)

    from caffeine.config import load_settings
    from caffeine.percolator.layout import create_table
    from caffeine.storage.hbase import HBaseStore

    settings = load_settings(table_prefix="bench_")
    use_wire(args.transport, args.protocol)
    store = HBaseStore(settings)
    table = f"toll_{uuid.uuid4().hex[:8]}"
    keys = [b"%08x-%06d" % (zlib.crc32(b"%d" % i), i) for i in range(args.rows)]
    rng = random.Random(args.seed)
    lock = b"\x01\x01" + os.urandom(60)  # a lock record's size (format, kind, ttl, owner, primary)
    bench = Bench(store, table, keys, rng.randbytes(args.value_size), lock, rng)
    plan = schedule(args.kinds, args.sizes, args.repeats)
    log(f"Thrift2 {settings.thrift2_host}:{settings.thrift2_port}; table {settings.table_prefix}{table}; "
        f"{len(plan)} windows of {args.seconds:g}s, about {len(plan) * (args.seconds + 0.3) + args.idle:.0f}s")
    windows: dict[tuple[str, int], list[Window]] = {(k, b): [] for k in args.kinds for b in args.sizes}
    started = time.monotonic()
    create_table(store, table)
    try:
        populate(bench)
        warm_up(bench, args.kinds, args.sizes, args.warmup)
        idle = idle_rates(settings, args.idle)
        log("idle JVM CPU: " + ", ".join(f"{p} {1e3 * v:.0f} ms/s" for p, v in idle.items()))
        for i, (rep, kind, b) in enumerate(plan, 1):
            if kind == "commit":
                estimate = max((w.rows / w.elapsed for w in windows[(kind, b)]), default=1500.0)
                top_up(bench, int(estimate * args.seconds * 1.5) + b)
            w = window(bench, kind, b, args.seconds, idle, settings)
            windows[(kind, b)].append(w)
            log(f"[{i:>3}/{len(plan)}] rep {rep + 1} {kind:<8} B={b:<3} {w.rows / w.elapsed:>7.0f} rows/s  "
                + "  ".join(f"{p} {w.per_row_us(p):5.0f}" for p in ("client", *JVMS)) + " µs/row")
    finally:
        try:
            store.drop_table(table)
        except Exception as exc:  # report, never mask the run's own error
            log(f"warning: could not drop {settings.table_prefix}{table}: {exc}")
        store.close()
    results = summarize(windows)
    command = reproduce_command(argv)
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*results[0], "idle_thrift2_ms_s", "idle_hbase_ms_s", "command"])
        w.writeheader()
        for r in results:
            w.writerow({**{k: (f"{v:.2f}" if isinstance(v, float) else v) for k, v in r.items()},
                        "idle_thrift2_ms_s": f"{1e3 * idle['thrift2']:.1f}",
                        "idle_hbase_ms_s": f"{1e3 * idle['hbase']:.1f}", "command": command})
    print(f"## The per-row toll of multi-row calls ({time.strftime('%Y-%m-%d %H:%M')})\n")
    print(f"Median of {args.repeats} windows × {args.seconds:g}s per cell, one client thread, CPU per row "
          f"by process (idle JVM CPU subtracted: Thrift2 {1e3 * idle['thrift2']:.0f} ms/s, HBase "
          f"{1e3 * idle['hbase']:.0f} ms/s); wall time per call. Run took {time.monotonic() - started:.0f}s.\n")
    print(markdown(results, args.sizes))
    print(f"\nCSV: {args.csv}\n\nReproduce:\n\n    {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
