"""End-to-end indexing of a real documentation site, an earlier checkout against this one.

The site is a directory of HTML nobody here wrote (default: Debian's python3.11-doc,
``/usr/share/doc/python3.11/html``), served by ``caffeine testweb``'s directory server twice,
under ``/a/`` and ``/b/`` (a mirror: every page of ``/b/`` is a duplicate of one in ``/a/``).
Each configuration crawls both copies from their index pages (in one crawl, or ``--copies
in-turn`` one after the other, for the same work in every run: ``COPIES``) with its own crawler process
and ``--workers`` worker processes, all started from the configuration's checkout, and is
timed from the first fetch until no notification is left (fetched, parsed, clustered,
exported). Configurations, alternated per repeat (A B C, C B A, ...) so each sees the same
machine:

- ``baseline``: the checkout given by ``--baseline`` (e.g. a ``git worktree`` of the
  previous release), with its own defaults; ``PATH,VAR=VALUE,...`` runs it with those
  settings on top, e.g. its own ``CAFFEINE_HOME`` and ports when it needs a runtime of its own
  (an older coprocessor wire protocol), which must be up;
- this checkout with each commit backend of ``--committers``.

Reports per configuration the median pages/s (HTML pages fetched / seconds), the documents
indexed (the same in every configuration, or the comparison is void), the CPU per page of
each process (crawler, workers, HBase and its Thrift servers, oracle), and the ratio of each
configuration's median to the first's (the baseline's when given). Beside them, per page,
what the work was, to tell a change in cost from a change in work (or noise): observer runs
by observer and the conflicts among them, the workers' storage calls (scraped from each
worker's Prometheus endpoint, ``caffeine worker --metrics-port``, just before it stops), and
the cells of the ``impacts`` table (live and tombstones: every one a counted write), and the
canonical moves (a page becoming or ceasing to be its cluster's canonical, each an export or
an unexport: ``canonical_moves``).

    git -C /path/to/repo worktree add /tmp/caffeine-before <commit>
    python3 bench/bench_realdocs.py --baseline /tmp/caffeine-before [--repeats 3] [--workers 2]
    python3 bench/bench_realdocs.py --baseline /tmp/caffeine-before,CAFFEINE_HOME=/tmp/caffeine-before/var,CAFFEINE_ORACLE_PORT=9399,...

Needs the local runtime (``caffeine up``); every configuration uses its own table prefix
and drops its tables afterwards.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from caffeine.config import load_settings  # noqa: E402
from caffeine.index.schema import CLUSTER_STATE, IMPACTS, REPOSITORY, is_canonical  # noqa: E402
from caffeine.observers.app import application  # noqa: E402
from caffeine.percolator import connect  # noqa: E402
from caffeine.percolator.engine_status import wait_until_quiescent  # noqa: E402
from caffeine.percolator.layout import DATA, WRITE  # noqa: E402
from caffeine.runtime.home import Layout  # noqa: E402
from caffeine.storage import ReadSpec, open_store  # noqa: E402
from testweb import TestWeb  # noqa: E402
from bench_pipeline import committed_writes, fetch_to_searchable_ms  # noqa: E402  (bench/, this script's directory)
from proc_cpu import cpu_seconds, runtime_cpu_s  # noqa: E402
from compare_checkouts import parse_checkout  # noqa: E402

# Run in the configuration's checkout: its own code creates its tables (an older checkout's
# schema and commit backend are its own).
INSTALL = ("from caffeine.config import load_settings; from caffeine.observers.app import application; "
           "from caffeine.percolator import connect\n"
           "with connect(load_settings()) as cluster: application.install(cluster)")

DEFAULT_DIR = "/usr/share/doc/python3.11/html"


# How the two copies are crawled. ``together``: one crawl from both index pages, as a crawler
# meets a mirror; the order the copies' pages arrive in then varies from run to run, and with
# it how often a cluster's canonical moves (a copy's inlinks counted ahead of the other's makes
# it canonical until the other catches up): 0.8-0.9 or 1.7-2.1 moves per page, and the export
# work with them, so runs of one code differ by up to 1.6x in time. ``in-turn``: ``/a/`` crawled
# to its end, then ``/b/``: each ``/a/`` page is its cluster's canonical from the start and
# stays so (its copy's inlinks only ever catch up, and the tie goes to ``/a/``), so every run
# does the same work and a comparison of two codes compares their cost.
COPIES = ("together", "in-turn")


def mirrored_site(directory: Path) -> tempfile.TemporaryDirectory:
    """A temporary directory holding ``a`` and ``b``, both links to ``directory``."""
    tmp = tempfile.TemporaryDirectory(prefix="caffeine-realdocs-")
    for name in ("a", "b"):
        os.symlink(directory, Path(tmp.name) / name)
    return tmp


@contextmanager
def environment(extra: dict[str, str]):
    """``os.environ`` with ``extra`` on top for the block (settings are read from it)."""
    saved = {k: os.environ.get(k) for k in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run_config(checkout: Path, committer: str | None, site: Path, workers: int, threads: int,
               crawl_workers: int, extra_env: dict[str, str] | None = None, copies: str = "together") -> dict:
    """One timed crawl-and-index of the mirrored site with code from ``checkout``, with
    ``extra_env`` on top of this process's settings (its processes' and this one's reads);
    ``copies``: ``together`` (one crawl of both) or ``in-turn`` (see ``COPIES``)."""
    with environment(extra_env or {}):
        return _run_config(checkout, committer, site, workers, threads, crawl_workers, copies)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def worker_work(ports: list[int]) -> dict:
    """What the workers behind ``ports`` did so far, summed from their Prometheus endpoints:
    observer runs by observer (every outcome), conflicts, storage calls (Thrift1 + Thrift2)."""
    runs: Counter = Counter()
    conflicts = calls = 0.0
    for port in ports:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == "caffeine_observer_transaction_seconds_count":
                    runs[sample.labels["observer"]] += sample.value
                elif sample.name == "caffeine_observer_conflicts_total":
                    conflicts += sample.value
                elif sample.name in ("caffeine_storage_thrift1_calls_total", "caffeine_storage_thrift2_calls_total"):
                    calls += sample.value
    return {"runs": dict(runs), "conflicts": conflicts, "calls": calls}


def impacts_cells(store) -> tuple[int, int]:
    """The ``impacts`` table's newest cells: (live, tombstones)."""
    live = dead = 0
    for row in store.scan(IMPACTS, spec=ReadSpec(), batch_size=64):
        for cell in row.newest_cells():
            if cell.value:
                live += 1
            else:
                dead += 1
    return live, dead


def canonical_moves(store) -> int:
    """How many times a page became or stopped being its cluster's canonical, over the crawl:
    the changes of the canonical flag between consecutive committed ``cluster:state`` writes
    of each repository row (its first state counts as a move when it is canonical). Each move
    has the export observer index the page or tombstone its cells: on a mirrored site the
    two copies of a page can take the canonical from each other while both gain links."""
    q = CLUSTER_STATE.encode()
    spec = ReadSpec(columns=((WRITE, q), (DATA, q)), versions=1000)
    moves = 0
    for row in store.scan(REPOSITORY, spec=spec, batch_size=64):
        data = {c.ts: c.value for c in row.versions(DATA, q)}
        canonical = False
        for _, start_ts in committed_writes(row, q):
            now = is_canonical(data.get(start_ts))
            moves += now != canonical
            canonical = now
    return moves


def _run_config(checkout: Path, committer: str | None, site: Path, workers: int, threads: int,
                crawl_workers: int, copies: str) -> dict:
    prefix = f"bench_docs_{uuid.uuid4().hex[:6]}_"
    env = dict(os.environ, PYTHONPATH=str(checkout), CAFFEINE_TABLE_PREFIX=prefix)
    if committer is not None:
        env["CAFFEINE_COMMITTER"] = committer
    else:
        env.pop("CAFFEINE_COMMITTER", None)
    # This process only reads (quiescence, what was indexed): it needs no commit backend, and
    # a baseline's runtime may speak an older coprocessor protocol than this checkout.
    settings = load_settings(table_prefix=prefix, committer="thrift-cas")
    cli = [sys.executable, "-m", "caffeine.commands"]
    log = open(Path(tempfile.gettempdir()) / f"{prefix}workers.log", "ab")
    procs = []
    web = TestWeb(directory=site)
    base = web.start()
    try:
        with connect(settings) as cluster:
            # The tables exist before the workers scan them.
            subprocess.run([sys.executable, "-c", INSTALL], cwd=checkout, env=env, check=True)
            ports = [_free_port() for _ in range(workers)]
            procs = [subprocess.Popen([*cli, "worker", "--threads", str(threads), "--metrics-port", str(port),
                                       "--metrics-host", "127.0.0.1"], cwd=checkout, env=env,
                                      stdout=subprocess.DEVNULL, stderr=log) for port in ports]
            time.sleep(2.0)
            dead = [p for p in procs if p.poll() is not None]
            if dead:
                raise SystemExit(f"a worker exited at start (code {dead[0].returncode}); see {log.name}")
            runtime_before = runtime_cpu_s(settings)
            if "hbase" not in runtime_before:
                print(f"warning: no local HBase found through {Layout.from_settings(settings).pid_file('hbase')} "
                      "(CAFFEINE_HOME of the runtime these processes use?): its CPU is left out of this run",
                      file=sys.stderr)
            workers_before = sum(cpu_seconds(p.pid) for p in procs)
            t0 = time.monotonic()
            seeds = [f"{base.rstrip('/')}/{copy}/index.html" for copy in ("a", "b")]
            for group in ([seeds] if copies == "together" else [[seed] for seed in seeds]):
                crawl = subprocess.run(
                    [*cli, "crawl", *group, "--depth", "100",
                     "--max-pages", "20000", "--delay", "0", "--workers", str(crawl_workers), "--no-progress"],
                    cwd=checkout, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                )
                if crawl.returncode != 0:
                    raise SystemExit(f"crawl failed ({crawl.returncode}): {crawl.stderr[-2000:]}")
            crawl_s = time.monotonic() - t0
            crawl_cpu = _children_cpu()
            wait_until_quiescent(cluster, application.observed_tables, timeout_s=7200, poll_s=0.2)
            elapsed = time.monotonic() - t0
            workers_cpu = sum(cpu_seconds(p.pid) for p in procs) - workers_before
            runtime_after = runtime_cpu_s(settings)
            work = worker_work(ports)
            indexed = len(fetch_to_searchable_ms(cluster)[0])
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
        log.close()
        web.stop()
    fetched = sum(1 for path in web.requests if path.endswith(".html") or path.endswith("/"))
    with open_store(settings) as store:
        work["impacts_live"], work["impacts_tombstones"] = impacts_cells(store)
        work["canonical_moves"] = canonical_moves(store)
        for table in store.list_tables():
            store.drop_table(table)
    return {"elapsed_s": elapsed, "crawl_s": crawl_s, "indexed": indexed, "crawl_cpu_s": crawl_cpu, "workers_cpu_s": workers_cpu,
            "runtime_cpu_s": {k: runtime_after[k] - runtime_before.get(k, 0.0) for k in runtime_after},
            "fetched": fetched, "work": work}


def _children_cpu() -> float:
    """CPU seconds of this process's waited-for children so far (the crawl subprocesses)."""
    usage = os.times()
    return usage.children_user + usage.children_system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=DEFAULT_DIR, help=f"the site's HTML directory (default {DEFAULT_DIR})")
    parser.add_argument("--baseline", metavar="PATH[,VAR=VALUE...]",
                        help="a checkout of the code to compare against (measured first), with settings of its own")
    parser.add_argument("--committers", default="thrift-cas,coprocessor", help="this checkout's commit backends to run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--threads", type=int, default=8, help="threads per worker")
    parser.add_argument("--crawl-workers", type=int, default=8, help="fetch threads of the crawler")
    parser.add_argument("--copies", choices=COPIES, default="together",
                        help="crawl the two copies in one crawl (as a crawler meets a mirror) or one after the other "
                             "(the same work in every run: see COPIES in the source)")
    args = parser.parse_args()
    directory = Path(args.dir)
    if not directory.is_dir():
        raise SystemExit(f"{directory} is not a directory (Debian: apt-get install python3.11-doc)")
    configs: list[tuple[str, Path, str | None]] = []
    extra_env: dict[str, dict[str, str]] = {}
    if args.baseline:
        _, path, extra_env["baseline"] = parse_checkout(f"baseline={args.baseline}")
        configs.append(("baseline", path, None))
    configs += [(c, ROOT, c) for c in args.committers.split(",") if c]
    pages = sum(1 for _ in directory.rglob("*.html"))
    print(f"site {directory}: {pages} HTML files, served twice (/a/ and /b/); {args.workers} worker process(es) "
          f"x {args.threads} threads; copies crawled {args.copies}; configurations {', '.join(c[0] for c in configs)}; {args.repeats} repeats",
          file=sys.stderr)
    results: dict[str, list[dict]] = {name: [] for name, _, _ in configs}
    with mirrored_site(directory) as site:
        for rep in range(args.repeats):
            order = configs if rep % 2 == 0 else list(reversed(configs))
            for name, checkout, committer in order:
                children_before = _children_cpu()
                r = run_config(checkout, committer, Path(site), args.workers, args.threads, args.crawl_workers,
                               extra_env.get(name), args.copies)
                r["crawl_cpu_s"] -= children_before
                results[name].append(r)
                print(f"[rep {rep + 1}] {name:<11} {r['fetched']} pages fetched, {r['indexed']} docs indexed "
                      f"in {r['elapsed_s']:.1f}s (the crawl itself {r['crawl_s']:.1f}s); "
                      f"{r['work']['runs'].get('export', 0) / max(1, r['fetched']):.2f} export runs and "
                      f"{r['work']['canonical_moves'] / max(1, r['fetched']):.2f} canonical moves per page",
                      file=sys.stderr)
    print("| configuration | pages fetched | docs indexed | seconds (median) | pages/s (median, min–max) | vs first | CPU ms/page by process |")
    print("|---|--:|--:|--:|--:|--:|---|")
    base_rate = None
    for name, _, _ in configs:
        runs = results[name]
        rates = [r["fetched"] / r["elapsed_s"] for r in runs]
        rate = statistics.median(rates)
        base_rate = base_rate or rate  # the first configuration: the baseline when given
        docs = statistics.median(r["indexed"] for r in runs)
        cpu = {"crawler": statistics.median(r["crawl_cpu_s"] for r in runs),
               "workers": statistics.median(r["workers_cpu_s"] for r in runs)}
        for piece in runs[0]["runtime_cpu_s"]:
            cpu[piece] = statistics.median(r["runtime_cpu_s"].get(piece, 0.0) for r in runs)
        fetched = statistics.median(r["fetched"] for r in runs)
        parts = ", ".join(f"{k} {1000 * v / max(1, fetched):.1f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1]))
        print(f"| {name} | {fetched:.0f} | {docs:.0f} | {statistics.median(r['elapsed_s'] for r in runs):.1f} | "
              f"{rate:.1f} ({min(rates):.1f}–{max(rates):.1f}) | {rate / base_rate:.2f}× | {parts} |")
    print("\n| configuration | observer runs per page, by observer | conflicts per page | worker storage calls per page | impacts cells per page (live + tombstones) | canonical moves per page |")
    print("|---|---|--:|--:|--:|--:|")
    for name, _, _ in configs:
        runs = results[name]
        fetched = statistics.median(r["fetched"] for r in runs)
        work = [r["work"] for r in runs]
        observers = sorted({o for w in work for o in w["runs"]})
        by = ", ".join(f"{o} {statistics.median(w['runs'].get(o, 0) for w in work) / fetched:.2f}" for o in observers)
        per = lambda key: statistics.median(w[key] for w in work) / max(1, fetched)  # noqa: E731
        print(f"| {name} | {by} | {per('conflicts'):.2f} | {per('calls'):.1f} | "
              f"{per('impacts_live'):.0f} + {per('impacts_tombstones'):.0f} | {per('canonical_moves'):.2f} |")
    print(f"\nreproduce: python3 bench/bench_realdocs.py --dir {args.dir}"
          + (f" --baseline {args.baseline}" if args.baseline else "")
          + f" --committers {args.committers} --repeats {args.repeats} --workers {args.workers} "
            f"--threads {args.threads} --crawl-workers {args.crawl_workers} --copies {args.copies}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
