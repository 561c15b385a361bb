#!/usr/bin/env python3
"""Timestamp oracle throughput: timestamps/s with 1, 8 and 64 concurrent requesters over 2 processes.

Starts its own ``caffeine oracle`` (a subprocess, under a fresh ``bench_oracle_<random>_``
table prefix whose table is dropped at the end) unless ``--oracle HOST:PORT`` names a running
one. Two long-lived worker processes each hold one ``OracleClient``; for each cell the
requesters are split over them (1 requester: one thread in one process) and every requester
is a thread calling ``get_timestamp()`` in a loop for ``--seconds``. Both workers start at
the same wall-clock instant; the cell's rate is the sum of their rates. Repeats are
interleaved (every cell once, then every cell again) so the drift of a shared machine hits
all cells alike, and the median is reported with min–max.

Also reported per cell: timestamps per round trip (the client's batching), p50/p99 latency of
one call (every 16th call timed), the workers' CPU per timestamp (user+sys, both processes),
and the oracle server's CPU use. A first line measures the floor the client is built on: one
lock hand-off between two Python threads in one process (ping-pong), since every caller that
is not the batch's leader must be woken by another thread once per call.

Usage::

    export CAFFEINE_THRIFT2_IDL=/path/to/hbase/thrift2/hbase.thrift   # if not resolvable
    python3 bench/bench_oracle.py [--seconds 5] [--repeats 3] [--requesters 1,8,64] [--oracle HOST:PORT]

Writes ``bench/results/oracle.csv``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS_CSV = HERE / "results" / "oracle.csv"
PROCESSES = 2
SAMPLE_EVERY = 16


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- worker process ------------------------------------------------------------------------

def worker(host: str, port: int) -> None:
    """Read ``{"threads", "seconds", "start_at"}`` lines on stdin, answer one JSON line each."""
    from caffeine.oracle.client import OracleClient

    client = OracleClient(host=host, port=port)
    client.get_timestamp()  # connect before the first timed cell
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("quit"):
            break
        print(json.dumps(run_cell(client, cmd["threads"], cmd["seconds"], cmd["start_at"])), flush=True)
    client.close()


def run_cell(client, threads: int, seconds: float, start_at: float) -> dict:
    counts = [0] * threads
    samples: list[list[float]] = [[] for _ in range(threads)]
    stop = threading.Event()
    ready = threading.Barrier(threads + 1)

    def requester(i: int) -> None:
        get = client.get_timestamp
        perf = time.perf_counter
        lat = samples[i]
        n = 0
        ready.wait()
        while not stop.is_set():
            # Time every SAMPLE_EVERY-th call only: the timer itself would otherwise be a
            # visible share of a ~10 us call.
            for _ in range(SAMPLE_EVERY - 1):
                get()
            t0 = perf()
            get()
            lat.append(perf() - t0)
            n += SAMPLE_EVERY
        counts[i] = n

    pool = [threading.Thread(target=requester, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    before = client.stats()
    time.sleep(max(0.0, start_at - time.time()))
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    ready.wait()
    time.sleep(seconds)
    stop.set()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    after = client.stats()
    lat = sorted(x for s in samples for x in s)
    return {
        "count": sum(counts),
        "elapsed": elapsed,
        "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime),
        "round_trips": after["round_trips"] - before["round_trips"],
        "timestamps": after["timestamps"] - before["timestamps"],
        "lat": lat[:: max(1, len(lat) // 2000)],  # a thinned sample is enough for percentiles
    }


# -- the floor: one thread hand-off --------------------------------------------------------

def handoff_floor(n: int = 20_000) -> float:
    """Hand-offs per second between two threads through two locks (one process, one GIL)."""
    from _thread import allocate_lock

    a, b = allocate_lock(), allocate_lock()
    a.acquire()
    b.acquire()

    def other():
        for _ in range(n):
            a.acquire()
            b.release()

    t = threading.Thread(target=other)
    t.start()
    t0 = time.perf_counter()
    for _ in range(n):
        a.release()
        b.acquire()
    elapsed = time.perf_counter() - t0
    t.join()
    return 2 * n / elapsed


# -- driver --------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_oracle(prefix: str, port: int) -> subprocess.Popen:
    env = dict(os.environ, CAFFEINE_TABLE_PREFIX=prefix)
    proc = subprocess.Popen([sys.executable, "-m", "caffeine.commands", "oracle", "--port", str(port)],
                            env=env, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    lines = []
    deadline = time.monotonic() + 120
    while True:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit(f"oracle exited ({proc.wait()}):\n{''.join(lines)}")
        lines.append(line)
        if "listening on" in line:
            log(line.rstrip())
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("oracle did not start:\n" + "".join(lines))
    # Keep draining stderr so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
    return proc


def process_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def split(requesters: int) -> list[int]:
    """Threads per worker process: 1 -> [1, 0]; 8 -> [4, 4]; 64 -> [32, 32]."""
    base, extra = divmod(requesters, PROCESSES)
    return [base + (1 if i < extra else 0) for i in range(PROCESSES)]


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=5.0, help="duration of one cell (default 5)")
    p.add_argument("--repeats", type=int, default=3, help="repeats per cell, median reported (default 3)")
    p.add_argument("--requesters", default="1,8,64", help="requester counts, comma-separated (default 1,8,64)")
    p.add_argument("--oracle", metavar="HOST:PORT", help="use this running oracle instead of starting one")
    p.add_argument("--worker", metavar="HOST:PORT", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.worker:
        host, port = args.worker.rsplit(":", 1)
        worker(host, int(port))
        return 0
    requesters = [int(x) for x in args.requesters.split(",")]
    command = " ".join(["python3 bench/bench_oracle.py", *(shlex.quote(a) for a in (argv or sys.argv[1:]))])

    oracle = None
    prefix = f"bench_oracle_{uuid.uuid4().hex[:6]}_"
    if args.oracle:
        host, port = args.oracle.rsplit(":", 1)
        port = int(port)
    else:
        host, port = "127.0.0.1", free_port()
        log(f"starting caffeine oracle on {host}:{port} (table prefix {prefix})")
        oracle = start_oracle(prefix, port)
    floors = []
    workers = [
        subprocess.Popen([sys.executable, __file__, "--worker", f"{host}:{port}"], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(PROCESSES)
    ]
    results: dict[int, list[dict]] = {r: [] for r in requesters}
    try:
        for rep in range(args.repeats):
            floors.append(handoff_floor())  # measured between cells: the machine's load drifts
            for r in requesters:
                threads = split(r)
                start_at = time.time() + 0.3
                server_cpu0 = process_cpu_s(oracle.pid) if oracle else None
                for w, t in zip(workers, threads):
                    if t:
                        w.stdin.write(json.dumps({"threads": t, "seconds": args.seconds, "start_at": start_at}) + "\n")
                        w.stdin.flush()
                parts = [json.loads(w.stdout.readline()) for w, t in zip(workers, threads) if t]
                server_cpu = process_cpu_s(oracle.pid) - server_cpu0 if oracle else None
                wall = max(p["elapsed"] for p in parts)
                cell = {
                    "rate": sum(p["count"] / p["elapsed"] for p in parts),
                    "per_rt": sum(p["timestamps"] for p in parts) / max(1, sum(p["round_trips"] for p in parts)),
                    "cpu_us": sum(p["cpu"] for p in parts) / max(1, sum(p["count"] for p in parts)) * 1e6,
                    "server_cpu": None if server_cpu is None else server_cpu / wall * 100,
                    "lat": sorted(x for p in parts for x in p["lat"]),
                }
                results[r].append(cell)
                log(f"repeat {rep + 1}/{args.repeats}: {r:3d} requesters ({'+'.join(map(str, threads))} threads): "
                    f"{cell['rate']:9.0f} ts/s, {cell['per_rt']:5.1f} per round trip")
    finally:
        for w in workers:
            try:
                w.stdin.write(json.dumps({"quit": True}) + "\n")
                w.stdin.flush()
            except OSError:
                pass
            w.wait(30)
        if oracle is not None:
            oracle.terminate()
            oracle.wait(30)
            drop_tables(prefix)

    floor = statistics.median(floors)
    stamp = _dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    rows = []
    lines = [
        "| requesters | threads per process | timestamps/s (median) | min–max | ratio to 1 | ts per round trip "
        "| call p50 / p99 ms | workers' CPU µs per ts | oracle CPU % |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = statistics.median(c["rate"] for c in results[requesters[0]])
    for r in requesters:
        cells = results[r]
        rates = [c["rate"] for c in cells]
        med = statistics.median(rates)
        lat = sorted(x for c in cells for x in c["lat"])
        per_rt = statistics.median(c["per_rt"] for c in cells)
        cpu = statistics.median(c["cpu_us"] for c in cells)
        scpu = [c["server_cpu"] for c in cells if c["server_cpu"] is not None]
        scpu_s = f"{statistics.median(scpu):.0f}" if scpu else "n/a"
        lines.append(
            f"| {r} | {'+'.join(map(str, split(r)))} | {med:,.0f} | {min(rates):,.0f}–{max(rates):,.0f} "
            f"| {med / base:.2f} | {per_rt:.1f} | {percentile(lat, .5) * 1e3:.3f} / {percentile(lat, .99) * 1e3:.3f} "
            f"| {cpu:.1f} | {scpu_s} |"
        )
        rows.append({"when": stamp, "requesters": r, "threads": "+".join(map(str, split(r))),
                     "median_ts_per_s": round(med), "min": round(min(rates)), "max": round(max(rates)),
                     "ts_per_round_trip": round(per_rt, 2), "p50_ms": round(percentile(lat, .5) * 1e3, 4),
                     "p99_ms": round(percentile(lat, .99) * 1e3, 4), "worker_cpu_us_per_ts": round(cpu, 2),
                     "oracle_cpu_pct": scpu_s, "handoffs_per_s_floor": round(floor)})
    RESULTS_CSV.parent.mkdir(parents=True, exist_ok=True)
    new = not RESULTS_CSV.exists()
    with RESULTS_CSV.open("a", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        if new:
            w.writeheader()
        w.writerows(rows)

    print(f"## Timestamp oracle throughput ({stamp}, {os.cpu_count()} CPUs)\n")
    print(f"Median (min–max) of {args.repeats} × {args.seconds:g}s per cell; requesters are threads calling "
          f"`get_timestamp()` in a loop, split over {PROCESSES} processes, one `OracleClient` each.\n")
    print("\n".join(lines))
    print(f"\nFloor: a requester that is not its batch's leader is woken by another thread once per call. "
          f"One such hand-off (lock ping-pong between two threads of one process, median of "
          f"{len(floors)} runs between cells) costs {1e6 / floor:.1f} µs here ({floor:,.0f}/s): "
          "the budget that bounds each process, whatever the oracle does.")
    print("\nReproduce:\n")
    print(f"    {command}")
    return 0


def drop_tables(prefix: str) -> None:
    try:
        from caffeine.config import load_settings
        from caffeine.storage import open_store

        with open_store(load_settings(table_prefix=prefix)) as store:
            for table in store.list_tables():
                store.drop_table(table)
    except Exception as exc:  # the numbers are still good; say what to clean up
        log(f"could not drop tables with prefix {prefix}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
