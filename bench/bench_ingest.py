"""Ingest throughput: WARC records into ``repository`` per second, against a crawl of the same pages.

In one run: serve a generated web of N pages (``TestWeb``, no bad-input pages) and crawl it
once with ``--warc`` (not measured: it makes the archive and warms HBase's and the Thrift
servers' JVMs). Then, ``--repeats`` times, in an order that rotates per repeat so no side
always runs first, each into tables of its own (a fresh table prefix):

- ``crawl``: a crawl of the web, ``--workers`` fetch threads, no politeness delay;
- ``crawl --warc``: the same, archiving every exchange;
- ``ingest``: ``caffeine ingest`` of the archive made above, ``--workers`` write threads.

Each side's rate is repository rows written per second of wall clock (the crawl's recorded
outcomes; the ingest's written pages, which include the archive's robots.txt), without the
observer chain running: the rate at which each feeds the index. The tables are created
before the clock starts. Reports the median over the
repeats and each side's ratio to the plain crawl, taken per repeat (the same load) and then
the median of those ratios.

    python3 bench/bench_ingest.py [--pages 2000] [--workers 2] [--repeats 3]

Needs the local runtime (``caffeine up``). Writes ``bench/results/ingest.csv``; drops its
``bench_ing_``-prefixed tables.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from caffeine.config import load_settings  # noqa: E402
from caffeine.percolator import connect  # noqa: E402
from caffeine.storage import open_store  # noqa: E402
from crawler.crawl import crawl  # noqa: E402
from crawler.ingest import STATE_TABLE, ingest  # noqa: E402
from crawler.record import install_repository  # noqa: E402
from testweb import TestWeb  # noqa: E402

SIDES = ("crawl", "crawl --warc", "ingest")


def in_fresh_tables(fn):
    """Run ``fn(cluster)`` in tables of a new ``bench_ing_`` prefix, then drop them."""
    prefix = f"bench_ing_{uuid.uuid4().hex[:6]}_"
    settings = load_settings(table_prefix=prefix)
    try:
        with connect(settings) as cluster:
            return fn(cluster)
    finally:
        with open_store(settings) as store:
            for table in store.list_tables():
                store.drop_table(table)


def run_side(side: str, base: str, archive: str, scratch: Path, pages: int, workers: int) -> tuple[int, float]:
    """(rows written, seconds) of one side."""

    def go(cluster):
        # Tables first, outside the timing: creating them takes seconds and is no side's work.
        install_repository(cluster)
        for table in ("frontier", STATE_TABLE):
            cluster.create_table(table)
        t0 = time.monotonic()
        if side == "ingest":
            report = ingest(cluster, [archive], workers=workers)
            rows = report.pages
        else:
            warc = str(scratch / f"{uuid.uuid4().hex[:6]}.warc.gz") if side == "crawl --warc" else None
            report = crawl(cluster, [base + "/"], depth=100, max_pages=pages * 3, delay=0.0, timeout=10.0,
                           workers=workers, warc=warc)
            rows = sum(1 for o in report.outcomes.values() if o.recorded)
            if warc:
                Path(warc).unlink()
        return rows, time.monotonic() - t0

    return in_fresh_tables(go)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--workers", type=int, default=2, help="crawl fetch threads and ingest write threads")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    results: dict[str, list[tuple[int, float]]] = {side: [] for side in SIDES}
    with tempfile.TemporaryDirectory(prefix="caffeine-bench-ingest-") as tmp, \
            TestWeb(pages=args.pages, seed=args.seed, include_bad=False) as base:
        scratch = Path(tmp)
        archive = str(scratch / "web.warc.gz")
        print(f"== archive (not measured): crawl --warc of {args.pages} pages", file=sys.stderr)
        made = in_fresh_tables(lambda c: crawl(c, [base + "/"], depth=100, max_pages=args.pages * 3, delay=0.0,
                                               timeout=10.0, workers=args.workers, warc=archive))
        size = Path(archive).stat().st_size
        print(f"   {len(made.outcomes)} URLs, {size / 2**20:.1f} MiB archive", file=sys.stderr)
        for r in range(args.repeats):
            order = SIDES[r % len(SIDES):] + SIDES[: r % len(SIDES)]
            for side in order:
                rows, seconds = run_side(side, base, archive, scratch, args.pages, args.workers)
                results[side].append((rows, seconds))
                print(f"   repeat {r + 1}, {side}: {rows} rows in {seconds:.1f}s = {rows / seconds:.1f} rows/s",
                      file=sys.stderr)

    rates = {side: [rows / s for rows, s in results[side]] for side in SIDES}
    ratios = {side: [a / b for a, b in zip(rates[side], rates["crawl"])] for side in SIDES}
    print(f"\n{args.pages}-page generated web, {args.workers} workers, {args.repeats} repeats "
          f"(archive {size / 2**20:.1f} MiB)\n")
    print("| side | rows written | pages/s (median) | min–max | × crawl (median of per-repeat ratios) |")
    print("|---|---:|---:|---:|---:|")
    for side in SIDES:
        rs = rates[side]
        print(f"| {side} | {results[side][0][0]} | {statistics.median(rs):.1f} | {min(rs):.1f}–{max(rs):.1f} | "
              f"{statistics.median(ratios[side]):.2f} |")
    print(f"\nreproduce: python3 bench/bench_ingest.py --pages {args.pages} --seed {args.seed} "
          f"--workers {args.workers} --repeats {args.repeats}")
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "ingest.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["side", "repeat", "rows", "seconds", "rows_per_s", "ratio_to_crawl"])
        for side in SIDES:
            for r, ((rows, s), ratio) in enumerate(zip(results[side], ratios[side])):
                w.writerow([side, r + 1, rows, round(s, 3), round(rows / s, 2), round(ratio, 3)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
