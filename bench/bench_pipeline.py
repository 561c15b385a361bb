"""End-to-end indexing benchmark: crawl a generated web with the observer chain running.

For 1 and 2 worker processes and each commit backend (``--committers``), in one run: serve a generated web of N pages (``TestWeb``),
start the workers, crawl everything, wait until quiescent. Reports

- documents/s from the first fetch to quiescence (fetch -> parsed -> clustered -> exported);
- fetch-to-searchable latency per canonical page, p50 and p99: from the commit of its
  ``page:meta`` (the crawler's transaction: the write record's commit_ts) to the commit of the
  first export that saw that fetch (its index writes follow the commit), both oracle
  timestamps whose physical part is wall-clock milliseconds; and the p99 to its last export
  (re-exported as anchor text from pages crawled later reaches it); where that time goes,
  stage by stage (waiting for and running the parse, cluster and export observers); and the
  pages exported only once a later election made them their cluster's canonical, with the
  p99 of the others;
- storage round trips per document, counted in every process (crawler and workers), and the
  share of worker CPU spent parsing (profiled separately below);
- the workers' notification listings per page: scan passes, the notify cells they walked and
  of those the ones still settling (``Worker.metrics``).

    python3 bench/bench_pipeline.py [--pages 2000] [--workers 1,2] [--threads 8] [--warmup-pages 2000]

A warm-up crawl of ``--warmup-pages`` (another seed, not measured) runs first: HBase's and the
Thrift servers' JVMs spend minutes of CPU compiling their hot paths after a start (``jstat
-compiler`` showed 115 s of compile time in HBase's JVM after its first two 3,000-page runs),
which would otherwise be charged to whichever configuration runs first.

The issue's configuration is ``--pages 20000``; the default is smaller so a run takes minutes.
Needs the local runtime (``caffeine up``).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from caffeine.commands import DEFAULT_WORKER_THREADS  # noqa: E402
from caffeine.config import load_settings  # noqa: E402
from caffeine.oracle.timestamps import physical_ms  # noqa: E402
from caffeine.observers.app import application  # noqa: E402
from caffeine.index.schema import CLUSTER_STATE, DOC_PARSED, DOCSTATS, DOCSTATS_FAMILY, EXPORT_STATE, PAGE_META, REPOSITORY, S_DONE, S_LENGTH, is_canonical  # noqa: E402
from caffeine.percolator import connect  # noqa: E402
from caffeine.percolator.layout import DATA, WRITE  # noqa: E402
from caffeine.percolator.records import Write  # noqa: E402
from caffeine.percolator.engine_status import wait_until_quiescent  # noqa: E402
from caffeine.storage import ReadSpec  # noqa: E402
from crawler.crawl import crawl  # noqa: E402
from testweb import TestWeb  # noqa: E402
from proc_cpu import cpu_seconds, runtime_cpu_s  # noqa: E402  (bench/, this script's directory)


def worker_stats_dump(path: Path) -> str:
    """A sitecustomize-free way to get each worker's storage counters: a wrapper script."""
    return (
        "import atexit, json, sys, signal\n"
        f"sys.path.insert(0, {str(ROOT)!r})  # this checkout, whatever is installed\n"
        "from caffeine.commands.cli import main\n"
        "import caffeine.storage.base as b\n"
        "stores = []\n"
        "orig = b.Store.__init__\n"
        "def init(self, *a, **k):\n"
        "    orig(self, *a, **k); stores.append(self)\n"
        "b.Store.__init__ = init\n"
        f"sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "import collections, threading, caffeine.storage.pool as pool\n"
        "from call_paths import caller_path\n"
        "paths = collections.Counter()\n"
        "orig_call = pool.ConnectionPool.call\n"
        "SKIP = {'call', '_guarded_call', 'counted', '_read', '<lambda>', 'run', '_bootstrap_inner', '_bootstrap', '_worker'}\n"
        "def counted(self, fn, *a, **k):\n"
        "    if threading.current_thread().name != 'caffeine-heartbeat':\n"
        "        paths[self.name + ':' + caller_path(SKIP, depth=3)] += 1\n"
        "    return orig_call(self, fn, *a, **k)\n"
        "pool.ConnectionPool.call = counted\n"
        "import caffeine.percolator.worker as wk\n"
        "runs = collections.Counter()\n"
        "orig_ended = wk.Metrics.run_ended\n"
        "def ended(self, observer, outcome, seconds):\n"
        "    runs[observer + ' ' + outcome] += 1\n"
        "    return orig_ended(self, observer, outcome, seconds)\n"
        "wk.Metrics.run_ended = ended\n"
        "# The worker CPU of each observer's runs: the thread's CPU time over Worker._run (a\n"
        "# batched call's leader does its gang's serializing, spread evenly over a wave's runs).\n"
        "import time\n"
        "run_cpu = collections.Counter()\n"
        "orig_run = wk.Worker._run\n"
        "def timed_run(self, observer, *a, **k):\n"
        "    began = time.thread_time()\n"
        "    try:\n"
        "        return orig_run(self, observer, *a, **k)\n"
        "    finally:\n"
        "        run_cpu[observer.name] += time.thread_time() - began\n"
        "wk.Worker._run = timed_run\n"
        "metrics = []\n"
        "orig_metrics = wk.Metrics.__init__\n"
        "def metrics_init(self, *a, **k):\n"
        "    orig_metrics(self, *a, **k); metrics.append(self)\n"
        "wk.Metrics.__init__ = metrics_init\n"
        "def dump():\n"
        "    import resource\n"
        "    ru = resource.getrusage(resource.RUSAGE_SELF)\n"
        "    counters = {id(s.stats): s.stats.as_dict() for s in stores}  # a batching store shares its inner one's\n"
        f"    out = {{'batching': {{k: sum(c.get(k, 0) for c in counters.values()) for k in ('batched_calls', 'batched_requests', 'batched_rows', 'combined_calls')}}, 'paths': dict(paths), 'runs': dict(runs), 'run_cpu_s': dict(run_cpu), 'listing': {{k: sum(getattr(m, k, 0) for m in metrics) for k in ('passes', 'listed', 'listed_settling')}}, 'calls': sum(c.get('thrift1_calls', 0) + c.get('thrift2_calls', 0) for c in counters.values()), 'cpu_s': ru.ru_utime + ru.ru_stime}}\n"
        f"    open({str(path)!r} + '.' + str(__import__('os').getpid()), 'w').write(json.dumps(out))\n"
        "atexit.register(dump)\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )


def run_once(pages: int, seed: int, processes: int, threads: int, crawl_workers: int, committer: str = "auto",
             freshness_target_s: float | None = None) -> dict:
    """One measured crawl. ``freshness_target_s``: the crawler's back-pressure target (None:
    the deployment's setting, CAFFEINE_FRESHNESS_TARGET_S; 0: off, the crawl runs flat out)."""
    prefix = f"bench_e2e_{uuid.uuid4().hex[:6]}_"
    settings = load_settings(table_prefix=prefix, committer=committer)
    if freshness_target_s is None:
        freshness_target_s = settings.freshness_target_s
    stats_base = Path(f"/tmp/caffeine-bench-{uuid.uuid4().hex[:6]}")
    wrapper = stats_base.with_suffix(".py")
    wrapper.write_text(worker_stats_dump(stats_base))
    env = dict(os.environ, CAFFEINE_TABLE_PREFIX=prefix, CAFFEINE_COMMITTER=committer)
    with connect(settings) as cluster:
        application.install(cluster)
        worker_log = stats_base.with_suffix(".log")
        with open(worker_log, "ab") as log_file:
            workers = [
                subprocess.Popen([sys.executable, str(wrapper), "worker", "--threads", str(threads)], cwd=ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=log_file)
                for _ in range(processes)
            ]

        def check_workers(_pending=None) -> None:
            """A worker that exited would leave the wait below to its two-hour timeout."""
            dead = [w for w in workers if w.poll() is not None]
            if dead:
                tail = worker_log.read_text(errors="replace")[-3000:]
                raise SystemExit(f"{len(dead)} worker process(es) exited (code {dead[0].returncode}); "
                                 f"their log {worker_log} ends:\n{tail}")
        try:
            time.sleep(2.0)
            check_workers()
            with TestWeb(pages=pages, seed=seed, include_bad=False) as base_url:
                before = cluster.stats.as_dict()
                runtime_before = runtime_cpu_s(settings)
                # This process's CPU: the crawler and the test web server run in it.
                self_before = cpu_seconds(os.getpid())
                t0 = time.monotonic()
                report = crawl(cluster, [base_url + "/"], depth=100, max_pages=pages * 3, delay=0.0,
                               timeout=10.0, workers=crawl_workers, progress=sys.stderr,
                               freshness_target_s=freshness_target_s)
                crawled = time.monotonic() - t0
                wait_until_quiescent(cluster, application.observed_tables, timeout_s=7200, poll_s=0.2,
                                     progress=check_workers)
                elapsed = time.monotonic() - t0
                after = cluster.stats.as_dict()
                runtime_after = runtime_cpu_s(settings)
                self_cpu = cpu_seconds(os.getpid()) - self_before
        finally:
            for w in workers:
                w.send_signal(signal.SIGTERM)
            for w in workers:
                try:
                    w.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    w.kill()
        crawler_calls = (after.get("thrift1_calls", 0) + after.get("thrift2_calls", 0)
                         - before.get("thrift1_calls", 0) - before.get("thrift2_calls", 0))
        worker_calls, worker_cpu = 0, 0.0
        call_paths: Counter = Counter()
        runs: Counter = Counter()
        run_cpu: Counter = Counter()  # worker CPU seconds in each observer's runs
        batching: Counter = Counter()
        listing: Counter = Counter()  # the workers' notify listings (zeros where a worker does not count them)
        for f in stats_base.parent.glob(stats_base.name + ".*"):
            if f.suffix in (".py", ".log"):
                continue
            data = json.loads(f.read_text())
            worker_calls += data["calls"]
            call_paths.update(data.get("paths", {}))
            runs.update(data.get("runs", {}))
            run_cpu.update(data.get("run_cpu_s", {}))
            batching.update(data.get("batching", {}))
            listing.update(data.get("listing", {}))
            worker_cpu += data["cpu_s"]
            f.unlink()
        wrapper.unlink()
        worker_log.unlink(missing_ok=True)
        runs_of: Counter = Counter()  # runs by observer, whatever their outcome ("<observer> <outcome>")
        for key, n in runs.items():
            runs_of[key.rsplit(" ", 1)[0]] += n
        latencies, settled, stages, elected_later, at_once = fetch_to_searchable_ms(cluster)
        fetched = sum(report.counts().values()) if hasattr(report, "counts") else pages
        docs = len(latencies)
    from caffeine.storage import open_store

    with open_store(settings) as store:  # after the client (and its heartbeat) stopped
        for table in store.list_tables():
            store.drop_table(table)
    return {
        "processes": processes, "committer": committer, "freshness_target_s": freshness_target_s, "pages_fetched": fetched, "indexed": docs, "crawl_s": crawled, "total_s": elapsed,
        # Pages fetched per second until every one was indexed (the figure this benchmark has
        # always reported, the baseline included), and indexed documents per second
        # (fetches that are no document, redirects, errors and the like, are not indexed).
        "docs_per_s": fetched / elapsed, "indexed_per_s": docs / elapsed, "p50_ms": statistics.median(latencies) if latencies else None,
        "p99_ms": _p99(latencies),
        "last_export_p99_ms": _p99(settled),
        # Where a page's fetch→searchable time goes: p50 and p99 of each stage of the chain.
        "stage_ms": {name: (statistics.median(v), _p99(v), len(v))
                     for name, v in stages.items() if v and name != "inline"},
        # Of those pages, how many were clustered and exported inline, in the parse's transaction.
        "inline_chains": int(sum(stages["inline"])),
        # Pages exported only once an election made them canonical (see fetch_to_searchable_ms).
        "elected_later": len(elected_later),
        "elected_later_p50_ms": statistics.median(elected_later) if elected_later else None,
        "p99_canonical_at_once_ms": _p99(at_once),
        "round_trips_per_doc": (crawler_calls + worker_calls) / max(1, fetched),
        "worker_cpu_s_per_doc": worker_cpu / max(1, fetched),
        # CPU per fetched page by process: where the machine's two cores went.
        "cpu_ms_per_doc": {
            "workers": 1000 * worker_cpu / max(1, fetched),
            "crawler+testweb": 1000 * self_cpu / max(1, fetched),
            **{piece: 1000 * (runtime_after[piece] - runtime_before.get(piece, 0.0)) / max(1, fetched)
               for piece in runtime_after},
        },
        "worker_rts_by_path": {k: v / max(1, fetched) for k, v in call_paths.most_common()},
        "runs_by_observer": {k: v / max(1, fetched) for k, v in sorted(runs.items())},
        # Worker CPU per fetched page in each observer's runs, and per run; what is left of the
        # workers' CPU went to listing notifications, heartbeats and the process itself.
        "run_cpu_ms_per_doc": {k: 1000 * v / max(1, fetched) for k, v in sorted(run_cpu.items())},
        "run_cpu_ms_per_run": {name: 1000 * v / max(1, runs_of[name]) for name, v in sorted(run_cpu.items())},
        # The workers' combinable calls: how many callers' requests and rows each carried.
        "requests_per_batched_call": batching["batched_requests"] / max(1, batching["batched_calls"]),
        "rows_per_batched_call": batching["batched_rows"] / max(1, batching["batched_calls"]),
        "combined_share": batching["combined_calls"] / max(1, batching["batched_calls"]),
        "listing_per_doc": {k: v / max(1, fetched) for k, v in listing.items()},
        "elapsed_cpu_cores": (worker_cpu + self_cpu + sum(runtime_after.values()) - sum(runtime_before.values()))
        / elapsed,
    }


# The observer runs between a fetch and its first export, each split in two: waiting (from the
# commit before it to its own start_ts) and running (its start_ts to its commit_ts).
STAGES = ("parse wait", "parse run", "cluster wait", "cluster run", "export wait", "export run")


def fetch_to_searchable_ms(cluster) -> tuple[list[float], list[float], dict[str, list[float]], list[float], list[float]]:
    """Per indexed page: physical(commit_ts of the first export that saw its last fetch) -
    physical(commit_ts of that fetch's page:meta).

    The first export, not the last: a page is exported again whenever new anchor text reaches
    it (a page crawled later links to it), up to the end of the crawl, but it was searchable
    from the first export whose snapshot held the fetch. The export's commit_ts, not its
    start_ts: its index writes follow its commit. Also returned, per page: to the start of
    the last export (the index's ``s:done``), when its anchor text stopped changing; and the
    same latency split into ``STAGES`` at the start and commit timestamps of the first parse
    (``doc:parsed``), cluster run (``cluster:state``) and export that followed the fetch, each
    having started after the one before committed (the pages where that holds): where the
    time goes, waiting for each observer of the chain or running it. Last, the latencies
    (already among the first list's) of the pages whose first cluster run placed them as a
    duplicate that is not its cluster's canonical: not exported then (their content was
    searchable under the canonical's URL), they are exported when a later election (more
    inlinks, from pages crawled later, recounted after the inlinks observer's settle time)
    makes them canonical, so their latency is the crawl's order more than the chain's speed;
    and the latencies of every other page.
    """
    docstats = cluster.serving(DOCSTATS, [DOCSTATS_FAMILY])
    out, settled = [], []
    stages: dict[str, list[float]] = {name: [] for name in (*STAGES, "inline")}
    meta_q, export_q = PAGE_META.encode(), EXPORT_STATE.encode()
    parsed_q, cluster_q = DOC_PARSED.encode(), CLUSTER_STATE.encode()
    spec = ReadSpec(columns=((WRITE, meta_q), (WRITE, export_q), (WRITE, parsed_q), (WRITE, cluster_q),
                             (DATA, cluster_q)), versions=1000)
    elected_later: list[float] = []
    at_once: list[float] = []
    for url, cells in docstats.scan(columns=[S_DONE, S_LENGTH]):
        if S_LENGTH not in cells:
            continue
        seq = int(cells[S_DONE])
        row = cluster.store.read_row(REPOSITORY, url, spec)
        # The newest page:meta commit at or below the last export's snapshot is the fetch the
        # index holds.
        fetches = [c.ts for c in row.versions(WRITE, meta_q) if c.ts <= seq]
        if not fetches:
            continue
        fetched = max(fetches)

        export = _first_run_after(row, export_q, fetched)
        if export is None:
            continue
        latency = float(physical_ms(export[1]) - physical_ms(fetched))
        out.append(latency)
        settled.append(float(physical_ms(seq) - physical_ms(fetched)))
        parse = _first_run_after(row, parsed_q, fetched)
        clustering = None if parse is None else _first_run_from(row, cluster_q, parse)
        first_state = None if clustering is None else next(
            (c.value for c in row.versions(DATA, cluster_q) if c.ts == clustering[0]), None)
        (elected_later if first_state is not None and not is_canonical(first_state) else at_once).append(latency)
        if clustering is None or (export[0] != clustering[0] and export[0] <= clustering[1]):
            continue
        # A stage run inline, in the transaction of the stage before it, waits and runs 0 ms
        # of its own: its time is in that stage's run.
        previous, previous_run = fetched, None
        for name, run in zip(STAGES[::2], (parse, clustering, export)):
            same = previous_run is not None and run[0] == previous_run[0]
            stages[name].append(0.0 if same else float(physical_ms(run[0]) - physical_ms(previous)))
            stages[name.replace("wait", "run")].append(0.0 if same else float(physical_ms(run[1]) - physical_ms(run[0])))
            previous, previous_run = run[1], run
        stages["inline"].append(float(clustering[0] == parse[0] and export[0] == parse[0]))
    return out, settled, stages, elected_later, at_once


def committed_writes(row, qualifier: bytes) -> list[tuple[int, int]]:
    """``(commit_ts, start_ts)`` of each committed write of the column in ``row`` (a read of
    its write family's versions), oldest first: rollback records left out."""
    return sorted((c.ts, w.start_ts) for c in row.versions(WRITE, qualifier)
                  if not (w := Write.decode(c.value)).is_rollback)


def _first_run_from(row, qualifier: bytes, run: tuple[int, int]) -> tuple[int, int] | None:
    """(start_ts, commit_ts) of the first committed write of the column by the transaction
    ``run`` (start_ts, commit_ts) itself (an inline run) or by one that started after it
    committed."""
    return next(((start, commit) for commit, start in committed_writes(row, qualifier)
                 if start == run[0] or start > run[1]), None)


def _first_run_after(row, qualifier: bytes, ts: int) -> tuple[int, int] | None:
    """(start_ts, commit_ts) of the first committed write of the column by a transaction
    that started after ts."""
    return next(((start, commit) for commit, start in committed_writes(row, qualifier) if start > ts), None)


def _p99(values: list[float]) -> float | None:
    return sorted(values)[int(len(values) * 0.99)] if values else None


def parse_share(pages: int, seed: int) -> float:
    """Seconds per page spent in parse_html + tokenize + fingerprint, in this process."""
    from caffeine.index import document_record, fingerprint, outlinks_record, parse_html, postings, tokenize

    web = TestWeb(pages=min(pages, 300), seed=seed, include_bad=False)
    bodies = [body for body in web.expected_pages().values() if body][:300]
    t0 = time.process_time()
    for body in bodies:
        parsed = parse_html(body, "http://x/", "text/html")
        document_record(parsed)
        outlinks_record("http://x/", parsed)
        fingerprint(parsed.text)
        postings(tokenize(parsed.text))
    return (time.process_time() - t0) / max(1, len(bodies))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--workers", default="1,2", help="worker process counts to compare")
    parser.add_argument("--threads", type=int, default=DEFAULT_WORKER_THREADS,
                        help=f"observer threads per worker process (default: caffeine worker's, {DEFAULT_WORKER_THREADS})")
    parser.add_argument("--crawl-workers", type=int, default=8)
    parser.add_argument("--warmup-pages", type=int, default=2000, help="unmeasured crawl first (0: none)")
    parser.add_argument("--committers", default="thrift-cas,coprocessor",
                        help="commit backends to compare in this run (coprocessor: needs the jar loaded)")
    parser.add_argument("--freshness-targets", default="",
                        help="crawler back-pressure targets in seconds to compare in this run, e.g. 0,5 "
                             "(0: off, the crawl runs flat out; default: the deployment's setting, "
                             "CAFFEINE_FRESHNESS_TARGET_S)")
    args = parser.parse_args()
    committers = [c for c in args.committers.split(",") if c]
    targets = [float(t) for t in args.freshness_targets.split(",") if t] or [None]
    if args.warmup_pages:
        processes = max(int(x) for x in args.workers.split(","))
        print(f"\n== warm-up (not measured): {processes} worker process(es), {args.warmup_pages} pages",
              file=sys.stderr)
        run_once(args.warmup_pages, args.seed + 1000, processes, args.threads, args.crawl_workers, committers[0],
                 targets[0])
    rows = []
    for processes in [int(x) for x in args.workers.split(",")]:
        for committer in committers:
            for target in targets:
                print(f"\n== {processes} worker process(es), committer {committer}, {args.pages} pages, "
                      f"freshness target {'default' if target is None else f'{target:g}s'}", file=sys.stderr)
                rows.append(run_once(args.pages, args.seed, processes, args.threads, args.crawl_workers, committer,
                                     target))
    parse_s = parse_share(args.pages, args.seed)
    print("| worker processes | committer | freshness target s | pages fetched | indexed docs | pages/s (fetched, until all indexed) | indexed docs/s | fetch→searchable p50 ms | p99 ms | fetch→last re-export p99 ms | storage round trips/doc | worker CPU s/doc |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['processes']} | {r['committer']} | {r['freshness_target_s']:g} | {r['pages_fetched']} | {r['indexed']} | {r['docs_per_s']:.1f} | {r['indexed_per_s']:.1f} | "
              f"{r['p50_ms']:.0f} | {r['p99_ms']:.0f} | {r['last_export_p99_ms']:.0f} | {r['round_trips_per_doc']:.1f} | {r['worker_cpu_s_per_doc']:.4f} |")
    print("\nCPU per fetched page by process (ms), and the cores in use on average:")
    for r in rows:
        parts = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["cpu_ms_per_doc"].items(), key=lambda kv: -kv[1]))
        print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s: {parts}; total "
              f"{sum(r['cpu_ms_per_doc'].values()):.1f} ms/page, {r['elapsed_cpu_cores']:.2f} cores busy")
    print("\nfetch→searchable by stage of the observer chain, p50 / p99 ms: waiting for each observer (from the "
          "commit before it to its start) and running it (start to commit), for the pages whose first parse, "
          "cluster run and export each started after the one before committed or ran inline in its transaction "
          "(an inline stage waits and runs 0 ms of its own):")
    for r in rows:
        parts = "; ".join(f"{name} {p50:.0f} / {p99:.0f}" for name, (p50, p99, _) in r["stage_ms"].items())
        n = min((c for _, _, c in r["stage_ms"].values()), default=0)
        print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s: "
              f"{parts} ({n} pages, {r['inline_chains']} of them clustered and exported inline)")
    print("\nPages first placed as a duplicate that was not its cluster's canonical, exported once a later "
          "election made them canonical (their content was searchable under the canonical's URL meanwhile), "
          "and fetch→searchable p99 without them:")
    for r in rows:
        later = "-" if r["elected_later_p50_ms"] is None else f"{r['elected_later_p50_ms']:.0f}"
        at_once = "-" if r["p99_canonical_at_once_ms"] is None else f"{r['p99_canonical_at_once_ms']:.0f}"
        print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s: "
              f"{r['elected_later']} of {r['indexed']} pages, their p50 {later} ms; p99 of the others {at_once} ms")
    print("\nWorkers' storage round trips per fetched page, by call path (pool:store method<caller<caller):")
    for r in rows:
        print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s:")
        for path, n in list(r["worker_rts_by_path"].items())[:15]:
            print(f"    {n:6.2f}  {path}")
    print("\nObserver runs per fetched page, by observer and outcome (done: committed or nothing to do; "
          "conflict: lost to a concurrent run and retried):")
    for r in rows:
        parts = ", ".join(f"{k} {v:.2f}" for k, v in r["runs_by_observer"].items())
        print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s: {parts}")
    if any(r["run_cpu_ms_per_doc"] for r in rows):
        print("\nWorkers' CPU in observer runs, by observer: ms per fetched page (ms per run); the rest "
              "of the workers' CPU is their listings, heartbeats and the process itself:")
        for r in rows:
            parts = ", ".join(f"{k} {v:.1f} ({r['run_cpu_ms_per_run'][k]:.2f})" for k, v in r["run_cpu_ms_per_doc"].items())
            rest = r["cpu_ms_per_doc"]["workers"] - sum(r["run_cpu_ms_per_doc"].values())
            print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s: "
                  f"{parts}; outside runs {rest:.1f}")
    print("\nWorkers' combinable calls (caffeine.storage.batching): callers' requests and rows per call, "
          "and the share of calls that carried several callers' requests:")
    for r in rows:
        print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s: "
              f"{r['requests_per_batched_call']:.2f} requests, {r['rows_per_batched_call']:.2f} rows per call; "
              f"{100 * r['combined_share']:.0f}% combined")
    if any(r["listing_per_doc"].get("passes") for r in rows):
        print("\nWorkers' notification listings per fetched page: scan passes, notify cells they walked, "
              "and of those the ones still settling:")
        for r in rows:
            n = r["listing_per_doc"]
            print(f"- {r['processes']} worker process(es), {r['committer']}, target {r['freshness_target_s']:g}s: "
                  f"{n.get('passes', 0):.2f} passes, {n.get('listed', 0):.1f} cells, "
                  f"{n.get('listed_settling', 0):.1f} settling")
    cpu = rows[0]["worker_cpu_s_per_doc"]
    print(f"\nparsing (parse_html + tokenize + fingerprint + postings): {parse_s * 1000:.1f} ms CPU per page, "
          f"{100 * parse_s / cpu:.0f}% of the workers' CPU per document with {rows[0]['processes']} process(es); "
          "the rest is transactions and storage calls (client side)")
    print(f"\nreproduce: python3 bench/bench_pipeline.py --pages {args.pages} --seed {args.seed} "
          f"--workers {args.workers} --threads {args.threads} --crawl-workers {args.crawl_workers} "
          f"--warmup-pages {args.warmup_pages} --committers {args.committers}"
          + (f" --freshness-targets {args.freshness_targets}" if args.freshness_targets else ""))
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "pipeline.csv", "w", newline="") as f:
        flat = [{**{k: v for k, v in r.items() if k not in ("cpu_ms_per_doc", "worker_rts_by_path", "runs_by_observer", "run_cpu_ms_per_doc", "run_cpu_ms_per_run", "stage_ms")},
                 **{f"cpu_ms_per_doc_{k}": round(v, 2) for k, v in r["cpu_ms_per_doc"].items()},
                 **{f"run_cpu_ms_per_doc_{k}": round(v, 2) for k, v in r["run_cpu_ms_per_doc"].items()},
                 **{f"stage_{name}_{q}_ms": round(v, 1)
                    for name, (p50, p99, _) in r["stage_ms"].items() for q, v in (("p50", p50), ("p99", p99))}}
                for r in rows]
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in flat for k in r)))
        w.writeheader()
        w.writerows(flat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
