"""Cold-query benchmark: the latency of a query whose terms' posting lists are not in memory,
answered from impact-ordered heads (``caffeine.search.cold``) against reading the whole lists, as the
corpus grows.

For each ``--docs`` size, an index is written straight into the serving tables with the export
observer's own pure planning (``plan_export``: the same postings, impacts and docstats cells
the observer writes, at one sequence number per document), over generated documents: a
Zipf vocabulary of 8,000 words (as ``bench_search``), bodies of 80-400 words, 3-word titles,
anchor text from a few linking sites. Feeding that many pages through the transactional
chain would take hours on two cores; what is measured here is the read side, for which the
two are the same tables.

Then, in this process, one ``IndexReader`` per mode (``cold_width`` 2048, and 0: whole lists)
answers the same seeded mix of 1-3 word queries (``bench_search``'s generator). Before each
query the reader forgets every posting list it holds, so every query is cold; after it, the
background read of the whole lists is awaited, so it does not overlap the next query. The
two modes alternate query by query, so load on the shared machine hits both alike. The
process runs under the service's garbage-collector policy (``caffeine.search.gc_policy``). Printed
per size and mode: p50, p90, p99 and max of ``IndexReader.rank`` (finding the best 10: what
the two modes do differently; ``/search`` adds the same few milliseconds of titles and
snippets to both, and HTTP), and how many queries the cold path answered or gave up on.

    python3 bench/bench_cold.py [--docs 20000,60000] [--queries 300]
    python3 bench/bench_cold.py --reuse PREFIX --docs 20000   # an index written earlier (--keep)
    python3 bench/bench_cold.py --reuse PREFIX --docs 20000 --seed 1   # bench_search --direct's index

``--seed`` must be the one the index was written with (this script's default 3;
``bench_search.py`` uses 1): queries are drawn from that seed's vocabulary, and with another
seed most of their words are not in the index, which measures nothing.

Needs the local runtime (``caffeine up``: HBase with the coprocessor, both Thrift servers).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_search import drop_tables, queries  # noqa: E402  (bench/, this script's directory)
from direct_index import write_index  # noqa: E402
from caffeine.percolator import connect  # noqa: E402

from caffeine.search import apply_service_policy, IndexReader, parse_query, SearchSettings  # noqa: E402


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run(cluster, docs: int, texts: list[str], widths: list[int]) -> dict:
    # No refresh ahead of queries: every query here is cold, and that thread's reads of the
    # lists warmed after the previous query would only run beside the one measured.
    readers = {mode: IndexReader(cluster, SearchSettings(stats_refresh_s=3600, cold_width=w, postings_refresh_ahead=False))
               for mode, w in [*((f"heads {w}" if len(widths) > 1 else "heads", w) for w in widths), ("whole", 0)]}
    for reader in readers.values():
        reader.refresh()
    # The service's collector policy, applied as its lifespan does once the first snapshot is
    # read: without it every full collection walks each reader's snapshot (one DocStats per
    # document), a pause of 80-120 ms that lands on whichever query is running.
    apply_service_policy()
    times: dict[str, list[float]] = {mode: [] for mode in readers}
    for i, text in enumerate(texts):
        query = parse_query(text)
        # Rotated query by query, so load on the shared machine hits every mode alike.
        order = list(readers)[i % len(readers):] + list(readers)[:i % len(readers)]
        for mode in order:
            reader = readers[mode]
            reader.drop_postings()
            started = time.perf_counter()
            reader.rank(query, 10)
            times[mode].append((time.perf_counter() - started) * 1000)
            reader.wait_for_background_reads()
    out = {}
    for mode, reader in readers.items():
        ms = times[mode]
        out[mode] = {"p50": statistics.median(ms), "p90": percentile(ms, 90), "p99": percentile(ms, 99),
                     "max": max(ms), **reader.cold_counts}
        reader.close()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", default="20000,60000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--width", default="2048", help="head widths to compare, comma-separated (default 2048)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the tables (prints their prefix)")
    parser.add_argument("--reuse", help="a prefix written earlier with --keep (one size)")
    args = parser.parse_args()
    texts = queries(args.queries, args.seed)  # the seed of the vocabulary documents() drew from
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    print("| documents | mode | p50 ms | p90 ms | p99 ms | max ms | cold answered | given up | deeper reads |")
    print("|--:|---|--:|--:|--:|--:|--:|--:|--:|")
    for docs in [int(d) for d in args.docs.split(",")]:
        prefix = args.reuse or f"benchcold{uuid.uuid4().hex[:6]}_{docs}_"
        cluster = connect(table_prefix=prefix)
        try:
            if not args.reuse:
                log(f"writing {docs} documents under prefix {prefix}")
                log(f"  {write_index(cluster, docs, args.seed):.0f}s")
            for mode, row in run(cluster, docs, texts, [int(w) for w in args.width.split(",")]).items():
                print(f"| {docs:,} | {mode} | {row['p50']:.1f} | {row['p90']:.1f} | {row['p99']:.1f} | {row['max']:.1f} "
                      f"| {row['answered']} | {row['given_up']} | {row['deeper']} |", flush=True)
        finally:
            cluster.close()
            if not (args.keep or args.reuse):
                drop_tables(prefix)
            elif not args.reuse:
                log(f"kept: --reuse {prefix}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
