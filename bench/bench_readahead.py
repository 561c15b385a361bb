"""Warm /search with the posting lists read ahead of queries and without
(``CAFFEINE_API_POSTINGS_REFRESH_AHEAD``), alternated on one runtime: each service is fully
warmed first (two passes over every query of ``bench_search``'s mix), then 16 closed-loop
clients run for 20 s (``bench_search.load``).

    python3 bench/bench_readahead.py PREFIX [ROUNDS]   # an index kept by bench_search --keep

Needs the local runtime and an index built with ``bench_search.py --keep`` (seed 1).
"""
import os
import sys
import urllib.parse
import urllib.request
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parent.parent)]
from bench_search import free_port, load, queries, search_cache, start_server  # noqa: E402

prefix = sys.argv[1]
qs = queries(500, 1)
rows = []
for rnd in range(int(sys.argv[2]) if len(sys.argv) > 2 else 2):
    for ahead in ("true", "false"):
        os.environ["CAFFEINE_API_POSTINGS_REFRESH_AHEAD"] = ahead
        port = free_port()
        server = start_server(prefix, port)
        try:
            for _ in range(2):
                for q in qs:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/search?" + urllib.parse.urlencode({"q": q})).read()
            before = search_cache(port)
            r = load(port, 16, 20, qs, 2.0, server.pid)
            after = search_cache(port)
            d = {k: after[k] - before[k] for k in ("hits", "change_reads", "whole_reads")}
            r["from_memory_pct"] = 100 * d["hits"] / max(1, sum(d.values()))
            rows.append((ahead, r))
            print(f"ahead={ahead} rps={r['rps']:.1f} p50={r['p50_ms']:.1f} p90={r['p90_ms']:.1f} p99={r['p99_ms']:.1f} "
                  f"server_ms={r['server_ms']:.1f} cpu_ms={r['server_cpu_ms']:.1f} from_memory={r['from_memory_pct']:.0f}% "
                  f"load={os.getloadavg()[0]:.1f}", flush=True)
        finally:
            server.terminate(); server.wait(timeout=30)
