"""``caffeine demo``: the whole system on one machine, from nothing to search results.

Layer: commands. Uses the runtime, the public transaction API, the crawler, the
observers and the search API's index reader. Steps, each announced as it starts:

1. use the HBase Thrift servers and the oracle the settings name if they answer already (a
   running ``caffeine up``, or a cluster), else bring up the local ones (``caffeine up``;
   ``--no-start`` refuses to, and says what does not answer);
2. start observer worker processes (``caffeine worker``), logging to ``var/logs/demo-worker-N.log``;
3. serve a generated local web with duplicates and mirrors (``caffeine testweb``), in-process;
4. crawl it, with a progress line, into the ``repository`` table;
5. wait until quiescent (``caffeine wait``);
6. print index statistics, the largest duplicate clusters and a few search results;
7. say what to do next; the workers and the test web are stopped, HBase and the oracle keep
   running for further queries (``caffeine down`` stops them).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from caffeine.commands import DEFAULT_WORKER_THREADS
from caffeine.config import load_settings


# Examples shown under each command's --help.
EXAMPLES = {
    "demo": "examples:\n  caffeine demo                          # 400 pages, 2 workers\n  caffeine demo --pages 2000 --prefix demo2_\n",
}


def register(subparsers) -> None:
    p = subparsers.add_parser("demo", epilog=EXAMPLES["demo"], help="start everything, crawl a local test web, index it, show results")
    p.add_argument("--pages", type=int, default=400, help="pages in the generated web (default 400)")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated web (default 1)")
    p.add_argument("--workers", type=int, default=2, help="observer worker processes (default 2)")
    p.add_argument("--threads", type=int, default=DEFAULT_WORKER_THREADS, help=f"threads per worker (default {DEFAULT_WORKER_THREADS})")
    p.add_argument("--port", type=int, default=8800, help="port of the test web (default 8800; a free one if taken)")
    p.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    p.add_argument("--no-start", action="store_true",
                   help="never start the local runtime: use the running servers or fail, naming the silent ones")
    p.set_defaults(func=cmd_demo)


def step(n: int, text: str) -> None:
    print(f"\n[{n}/7] {text}", flush=True)


def start_workers(settings, count: int, threads: int) -> list[subprocess.Popen]:
    logs = settings.home / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, CAFFEINE_TABLE_PREFIX=settings.table_prefix)
    workers = []
    for i in range(count):
        log = open(logs / f"demo-worker-{i + 1}.log", "ab")
        workers.append(subprocess.Popen(
            [sys.executable, "-m", "caffeine.commands", "worker", "--threads", str(threads)],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        ))
        log.close()
    return workers


def stop_workers(workers: list[subprocess.Popen]) -> None:
    for w in workers:
        if w.poll() is None:
            w.terminate()
    for w in workers:
        try:
            w.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.kill()


def cmd_demo(args) -> int:
    from caffeine.search import IndexReader, load_search_settings, parse_query
    from caffeine.observers.app import application
    from caffeine.observers.dups import largest_clusters
    from caffeine.percolator import connect
    from caffeine.percolator.engine_status import pending_printer, wait_until_quiescent
    from caffeine.runtime.local import LocalHBase
    from caffeine.oracle.errors import describe_addresses
    from crawler.crawl import crawl
    from testweb import TestWeb

    from caffeine import preflight

    settings = load_settings(table_prefix=args.prefix)
    started = time.monotonic()
    silent = preflight.probe(settings, preflight.EVERYTHING, max(settings.preflight_timeout_s, 1.0))
    if not silent:
        step(1, f"HBase (Thrift1 {settings.thrift1_host}:{settings.thrift1_port}, Thrift2 "
                f"{settings.thrift2_host}:{settings.thrift2_port}) and the oracle "
                f"({describe_addresses(list(settings.oracle_endpoints))}) answer already: using them")
    elif args.no_start:
        raise preflight.Unreachable(silent, settings.preflight_timeout_s)
    else:
        step(1, "starting the local HBase, both Thrift servers and the timestamp oracle (first run downloads HBase)")
        print(LocalHBase(settings).up().render())

    with connect(settings) as cluster:
        application.install(cluster)
        step(2, f"starting {args.workers} observer worker processes (logs in {settings.home / 'logs'}/demo-worker-*.log)")
        workers = start_workers(settings, args.workers, args.threads)
        try:
            step(3, f"serving a generated web of {args.pages} pages (seed {args.seed}) with duplicates and mirrors")
            # A fixed port keeps the URLs stable, so running the demo again re-crawls the same
            # pages and the index is updated incrementally instead of growing a second copy.
            port = args.port if _port_free(args.port) else 0
            with TestWeb(pages=args.pages, seed=args.seed, slow_s=1.0, port=port) as base_url:
                print(f"  test web at {base_url}/")
                step(4, "crawling it into the repository table (each page: one transaction)")
                report = crawl(cluster, [base_url + "/"], depth=50, max_pages=args.pages * 3, delay=0.0,
                               timeout=3.0, workers=8, progress=sys.stderr)
                print(report.summary(max_errors=5))
                step(5, "waiting until the observer chain is quiescent")
                waited = wait_until_quiescent(cluster, application.observed_tables, timeout_s=1800,
                                              progress=pending_printer(sys.stdout))
                print(f"  quiescent after {waited:.1f}s")
        finally:
            print("  stopping the observer workers and the test web", flush=True)
            stop_workers(workers)

        step(6, "what the index holds")
        reader = IndexReader(cluster, load_search_settings())
        corpus = reader.refresh()
        with cluster.begin() as txn:
            top, clusters, members = largest_clusters(txn, 3)
        print(f"  documents in the index: {corpus.num_docs} (canonical pages), average length {corpus.avg_len:.0f} tokens")
        print(f"  crawled HTML pages: {members} in {clusters} duplicate clusters "
              f"({members - clusters} pages are duplicates of another)")
        for c in top:
            print(f"  cluster of {c['size']}: canonical {c['canonical']}")
        for text in _sample_queries(reader):
            result = reader.search(parse_query(text), 1, 3)
            print(f"\n  search {text!r}: {result['total']} hits in {result['took_ms']:.1f} ms")
            for hit in result["results"]:
                print(f"    {hit['rank']}. {hit['title'] or '(untitled)'}  {hit['url']}")
                print(f"       score {hit['score']:.3f}, {hit['inlinks']} inlinks, cluster of {hit['cluster_size']}")

    step(7, "done; HBase and the oracle keep running")
    print(f"""
  total time {time.monotonic() - started:.0f}s. Next:
    caffeine serve                      search page and API on http://127.0.0.1:8000/ (API docs at /docs)
    caffeine dups                       the largest duplicate clusters; --url URL for one page's cluster
    caffeine inspect repository URL     a row's data/lock/write/notify/ack cells
    caffeine worker & caffeine crawl URL ...   keep indexing (the index updates incrementally)
    caffeine batch && caffeine verify   the Spark baseline, and a check that it equals the index
    caffeine down                       stop HBase and the oracle (data is kept in {settings.home / 'data'})""")
    return 0


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        # As the test web's server does: a port its previous run left in TIME_WAIT is free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _sample_queries(reader) -> list[str]:
    """A few queries with answers: the most frequent terms of the generated vocabulary."""
    counts = []
    for term, cells in reader.postings.scan(batch_size=1024):
        counts.append((len(cells), term.decode()))
    counts.sort(reverse=True)
    picks = [t for _, t in counts if len(t) > 3][:20]
    return [picks[0], f"{picks[3]} {picks[7]}", picks[12]] if len(picks) > 12 else picks[:3]
