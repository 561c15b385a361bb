"""Observer engine benchmark: notifications/s with a no-op observer, and commit-to-run latency.

Throughput: N changes are committed first (each sets one notification), then 1 or 2 worker
processes are started and timed until ``wait_until_quiescent`` returns; notifications/s =
N / that time (process start-up excluded: workers are started and warmed on a separate
table first). Latency: at low load (one change every --interval seconds) a latency observer
records, in its own transaction, how long after the feeder's commit it ran; p50/p99 reported.

    python3 bench/bench_observers.py [--changes 2000] [--repeats 3] [--latency-samples 100]

Needs the local runtime (``caffeine up``: HBase, both Thrift servers, the oracle).
"""

from __future__ import annotations

import argparse
import csv
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from caffeine.config import load_settings  # noqa: E402
from caffeine.percolator import Application, Observer, connect  # noqa: E402
from caffeine.percolator.engine_status import wait_until_quiescent  # noqa: E402

APP = Path(__file__).resolve()


def noop_app() -> Application:
    table = os.environ["BENCH_OBSERVER_TABLE"]
    return Application("bench-noop", [Observer("noop", table, "v", lambda txn, row, column: None)])


def latency_app() -> Application:
    table = os.environ["BENCH_OBSERVER_TABLE"]

    def record(txn, row, column):
        committed_at = float(txn.get(table, row, "committed_at") or 0)
        txn.set(table, row, "latency_ms", "%.3f" % ((time.time() - committed_at) * 1000))

    return Application("bench-latency", [Observer("latency", table, "v", record)])


def start_workers(n: int, app: str, table: str, prefix: str, threads: int) -> list[subprocess.Popen]:
    env = dict(os.environ, BENCH_OBSERVER_TABLE=table, CAFFEINE_TABLE_PREFIX=prefix)
    return [
        subprocess.Popen(
            [sys.executable, "-m", "caffeine.commands", "worker", "--app", f"{APP}:{app}", "--threads", str(threads)],
            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for _ in range(n)
    ]


def stop(workers) -> None:
    for w in workers:
        w.send_signal(signal.SIGTERM)
    for w in workers:
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()


def feed(cluster, table: str, n: int, batch: int = 50) -> None:
    rows = [b"n%07d" % i for i in range(n)]
    for i in range(0, n, batch):
        with cluster.begin() as txn:
            for row in rows[i:i + batch]:
                txn.set(table, row, "v", b"x")


def throughput(cluster, prefix: str, processes: int, changes: int, threads: int) -> float:
    table = "bench_obs_" + uuid.uuid4().hex[:6]
    os.environ["BENCH_OBSERVER_TABLE"] = table
    app = noop_app()
    app.install(cluster)
    workers = start_workers(processes, "noop_app", table, prefix, threads)
    try:
        feed(cluster, table, 20)  # warm-up: workers are up and scanning once these are done
        wait_until_quiescent(cluster, [table], timeout_s=300, poll_s=0.05)
        # The observed table gets the changes while the workers watch: time from the first
        # commit to quiescence, minus nothing (feeding overlaps processing, as in a crawl).
        t0 = time.monotonic()
        feed(cluster, table, changes)
        wait_until_quiescent(cluster, [table], timeout_s=900, poll_s=0.05)
        return changes / (time.monotonic() - t0)
    finally:
        stop(workers)


def latency(cluster, prefix: str, samples: int, interval: float, threads: int) -> list[float]:
    table = "bench_lat_" + uuid.uuid4().hex[:6]
    os.environ["BENCH_OBSERVER_TABLE"] = table
    app = latency_app()
    app.install(cluster)
    workers = start_workers(1, "latency_app", table, prefix, threads)
    try:
        time.sleep(3)
        for i in range(samples):
            with cluster.begin() as txn:
                txn.set(table, b"l%05d" % i, "v", b"x")
                txn.set(table, b"l%05d" % i, "committed_at", "%.6f" % time.time())
            time.sleep(interval)
        wait_until_quiescent(cluster, [table], timeout_s=300, poll_s=0.05)
        with cluster.begin() as txn:
            return [float(cols["latency_ms"]) for _, cols in txn.scan(table, columns=["latency_ms"])]
    finally:
        stop(workers)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=8, help="observer threads per worker process")
    parser.add_argument("--latency-samples", type=int, default=100)
    parser.add_argument("--interval", type=float, default=0.1, help="seconds between latency probes")
    args = parser.parse_args()
    prefix = "bench_"
    settings = load_settings(table_prefix=prefix)
    rows = []
    with connect(settings) as cluster:
        for processes in (1, 2):
            rates = []
            for r in range(args.repeats):
                rate = throughput(cluster, prefix, processes, args.changes, args.threads)
                print(f"  {processes} worker process(es), run {r + 1}: {rate:,.0f} notifications/s", file=sys.stderr)
                rates.append(rate)
            rows.append((processes, statistics.median(rates), min(rates), max(rates)))
        lat = sorted(latency(cluster, prefix, args.latency_samples, args.interval, args.threads))
        for table in cluster.store.list_tables():
            if table.startswith(("bench_obs_", "bench_lat_")):
                cluster.store.drop_table(table)
    p50 = statistics.median(lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print("| worker processes | notifications/s (median) | min–max |")
    print("|---:|---:|---:|")
    for processes, med, lo, hi in rows:
        print(f"| {processes} | {med:,.0f} | {lo:,.0f}–{hi:,.0f} |")
    print()
    print(f"commit → observer run latency at low load ({len(lat)} samples, one change every {args.interval}s): "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")
    print(f"\nreproduce: python3 bench/bench_observers.py --changes {args.changes} --repeats {args.repeats} "
          f"--threads {args.threads} --latency-samples {args.latency_samples} --interval {args.interval}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "observers.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["worker_processes", "median_per_s", "min_per_s", "max_per_s", "latency_p50_ms", "latency_p99_ms"])
        for processes, med, lo, hi in rows:
            w.writerow([processes, round(med), round(lo), round(hi), round(p50, 2), round(p99, 2)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
