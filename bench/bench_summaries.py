"""Summary reads packed in one cell against one cell each (``caffeine.storage.summaries``),
alternated call by call on one runtime, over a kept bench index: the head reads of the cold
path (``read_prefix`` of 1 and 3 impacts rows, 64 to 8,192 cells deep) and its lookups by
URL (``read_cells`` of 100 to 1,000 named postings in 1 and 3 rows), and whole posting lists
(``read_latest`` of 1 and 3 rows: what the postings cache reads). Printed per read:
the median wall and client-CPU milliseconds of each form over ``--repeats`` calls, and the
ratio of the medians (packed / per cell).

    python3 bench/bench_summaries.py PREFIX [--rows lopani,mipa,momi] [--repeats 15]

PREFIX: an index kept by ``bench_search.py --direct --keep`` or ``bench_cold.py --keep``;
``--rows``: three of its common words (the defaults are seed 1's). Needs the local runtime.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from caffeine.index.schema import posting_column  # noqa: E402
from caffeine.oracle.timestamps import compose  # noqa: E402
from caffeine.percolator import connect  # noqa: E402

from caffeine.search import IndexReader  # noqa: E402
from caffeine.search import SearchSettings  # noqa: E402


def timed(fn) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - wall) * 1000, (time.process_time() - cpu) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("prefix")
    parser.add_argument("--rows", default="lopani,mipa,momi")
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    cluster = connect(table_prefix=args.prefix)
    reader = IndexReader(cluster, SearchSettings(stats_refresh_s=3600, postings_refresh_ahead=False))
    reader.refresh()
    postings, impacts = reader.searcher.postings, reader.searcher.cold.impacts
    store = impacts.store
    urls = list(reader.corpus.weights.norms)
    rows = [r.encode() for r in args.rows.split(",")]
    since = compose(int(time.time() * 1000))   # no recent cells: the heads alone
    rng = random.Random(1)
    reads = []
    for width in (64, 2048, 8192):
        for k in (1, 3):
            reads.append((f"read_prefix {k} row(s) x {width}", lambda k=k, w=width: impacts.read_prefix(rows[:k], w, since)))
    for n in (100, 1000):
        for k in (1, 3):
            def lookups(k=k, n=n):
                postings.get_cells({r: [posting_column(u) for u in rng.sample(urls, n)] for r in rows[:k]})
            reads.append((f"read_cells {k} row(s) x {n}", lookups))
    for k in (1, 3):
        reads.append((f"read_latest {k} whole row(s)", lambda k=k: postings.get_many(rows[:k])))
    print("| read | packed wall ms | per-cell wall ms | wall ratio | packed CPU ms | per-cell CPU ms |")
    print("|---|--:|--:|--:|--:|--:|")
    for name, read in reads:
        got = {True: [], False: []}
        for i in range(args.repeats + 2):
            for packed in ((True, False) if i % 2 else (False, True)):   # alternated: noise hits both
                store._packing = packed
                sample = timed(read)
                if i >= 2:   # the first two rounds warm the connection and the region server's caches
                    got[packed].append(sample)
        store._packing = True
        med = {p: (statistics.median(w for w, _ in s), statistics.median(c for _, c in s)) for p, s in got.items()}
        print(f"| {name} | {med[True][0]:.1f} | {med[False][0]:.1f} | {med[True][0] / med[False][0]:.2f} "
              f"| {med[True][1]:.1f} | {med[False][1]:.1f} |", flush=True)
    reader.close()
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
