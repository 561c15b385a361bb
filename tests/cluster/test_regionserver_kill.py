"""A region server SIGKILLed under running clients, on the cluster of ``conftest.py``.

The master notices the dead server when its ZooKeeper session expires, splits its write-ahead
log and reopens its regions on the others, replaying what was acknowledged but not flushed.
Nobody helps the clients: the Thrift servers' HBase clients find the regions' new homes, and
Caffeine's storage layer retries (or settles unknown outcomes) meanwhile.

- **The bank**: three transfer processes and an observer worker over a bank and a ledger,
  both split over the three servers; the server holding the bank's middle accounts is killed.
  Then ``support.ledger_audit``: every acknowledged transfer is present at its commit_ts, the
  total holds, every marker was observed exactly once, no lock is left once read.
- **Indexing**: a crawl of a generated web and two ``caffeine worker`` processes, under a
  table prefix of their own; the server holding the most of the run's regions is killed
  mid-crawl. The crawl ends by itself with every page stored, the workers index everything,
  ``caffeine verify`` finds the batch recomputation equal to the incremental index, and no
  lock is left once read.

Each prints what the clients saw: the longest stall (bank: the longest wait between two
commits of one client; indexing: the longest time without a new document indexed) and the
recovery time (kill -> every region of the run's tables open on a live server and answering).
The killed server is started again afterwards (it gets regions back when the balancer runs).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
import uuid
from collections import Counter

import pytest

from caffeine.errors import CaffeineError
from caffeine.index.schema import DOCSTATS, POSTINGS, REPOSITORY
from caffeine.percolator.layout import LOCK
from caffeine.storage import ReadSpec
from caffeine.storage.hbase import HBaseStore
from support.bank import ACCOUNTS, account, open_bank
from support.child_helpers import FAST
from support.cli_helpers import ROOT
from support.ledger_audit import audit, run_through
from support.local_cluster import cluster_env, regionserver_name
from testweb import TestWeb

# Tables of the indexing run whose regions are watched, and whose locks are checked.
PERCOLATOR_TABLES = (REPOSITORY, "inlinks", "dups", "frontier")
PAGES = 240


def regions_back(store, tables, dead: str, timeout_s: float = 240.0) -> float:
    """Seconds until no region of ``tables`` is on the ``dead`` server and each answers a read."""
    t0 = time.monotonic()
    while True:
        try:
            regions = {t: store.regions(t) for t in tables}
            if all(r.server != dead for rs in regions.values() for r in rs):
                for t, rs in regions.items():  # a row of each region (any family: serving tables have no lock)
                    store.read_rows(t, [r.start or b"\0" for r in rs], ReadSpec())
                return time.monotonic() - t0
        except CaffeineError:
            pass
        if time.monotonic() - t0 > timeout_s:
            raise AssertionError(f"the regions of {dead} were not back on the other servers within {timeout_s:.0f}s")
        time.sleep(0.5)


def kill_regionserver(local, name: str, say) -> float:
    """SIGKILL region server ``name``; the wall time of the kill."""
    pids = local.kill(name)
    assert pids, f"{name} was not running"
    killed_at = time.time()
    say(f"SIGKILLed {name} (pid {pids[0]})")
    return killed_at


def locks_left_once_read(settings, tables) -> dict[str, list]:
    """Read every locked cell of ``tables`` through a transaction (which rolls the lock's
    transaction forward or back), then the locks still there: (row, column) per table."""
    from caffeine.percolator import connect
    from caffeine.percolator.layout import column_name

    def locked():
        return {t: [(r.key, column_name(c.qualifier)) for r in cluster.store.scan(t, spec=ReadSpec(families=(LOCK,)))
                    for c in r.newest_cells()] for t in tables}

    with connect(settings) as cluster:
        for table, cells in locked().items():
            with cluster.begin() as txn:
                for row, column in cells:
                    txn.get(table, row, column)
        return {t: cells for t, cells in locked().items() if cells}


# -- the bank ------------------------------------------------------------------------------------


@pytest.mark.hbase
@pytest.mark.timeout(900)
@pytest.mark.exclusive  # SIGKILLs a region server of five JVMs' cluster, with deadlines on the recovery
def test_acknowledged_transfers_survive_a_sigkilled_region_server(running_cluster, cluster_client, children, workers,
                                                                   say):
    local, settings, _ = running_cluster
    cluster = cluster_client
    store = cluster.store
    table, ledger_table = "bank_" + uuid.uuid4().hex[:8], "ledger_" + uuid.uuid4().hex[:8]
    # Six regions each (HBase spreads a new table's regions round-robin over the servers).
    cluster.create_table(table, split_policy=lambda t, n: [account(ACCOUNTS * i // 6) for i in range(1, 6)])
    open_bank(cluster, table)
    cluster.create_table(ledger_table, split_policy=lambda t, n: [b"c0-5", b"c1", b"c1-5", b"c2", b"c2-5"])
    regions = store.regions(table)
    assert len({r.server for r in regions}) >= 2, regions
    victim_server = next(r.server for r in regions if r.start <= account(ACCOUNTS // 2) < (r.end or b"\xff"))
    say(f"bank regions per server {dict(Counter(r.server for r in regions))}; ledger's "
        f"{dict(Counter(r.server for r in store.regions(ledger_table)))}; killing {victim_server}")
    victim = regionserver_name(settings, victim_server)
    env = cluster_env(settings, **FAST)
    worker = workers("ledger_observer.py:audit", {**env, "CAFFEINE_TEST_LEDGER_TABLE": ledger_table}, threads=2)
    times = {}

    def outage(check) -> float:
        times["killed"] = kill_regionserver(local, victim, say)
        recovered = regions_back(store, (table, ledger_table), victim_server)
        healthy_at = time.time()
        say(f"every region of the bank and the ledger answers from a live server {recovered:.1f}s after the kill")
        return healthy_at

    print()
    try:
        run = run_through(outage, cluster=cluster, table=table, ledger_table=ledger_table, env=env,
                          children=children, worker=worker, say=say, resume_timeout_s=180.0)
    finally:
        local.restart(victim)
    audit(run, cluster=cluster, store=store, table=table, ledger_table=ledger_table, worker=worker, say=say)
    stalls = run.stalls()
    recovery = run.healthy_at - times["killed"]
    print(f"region server {victim} SIGKILLed: regions back after {recovery:.1f}s; longest stall per client: "
          + ", ".join(f"{name} {s:.1f}s" for name, s in sorted(stalls.items())))
    assert all(s == s for s in stalls.values()), f"a client never committed after the kill: {stalls}"


# -- indexing ---------------------------------------------------------------------------------


class Progress:
    """Samples, twice a second, how many documents are indexed (rows of ``docstats``)."""

    def __init__(self, store, interval_s: float = 0.5) -> None:
        self.store, self.interval_s = store, interval_s
        self.samples: list[tuple[float, int]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.wait(self.interval_s):
            try:
                n = sum(1 for _ in self.store.scan(DOCSTATS, key_only=True))
            except CaffeineError:
                continue  # a region in transit: the next sample
            self.samples.append((time.time(), n))

    def count(self) -> int:
        return self.samples[-1][1] if self.samples else 0

    def longest_stall(self, after: float, until_count: int) -> float:
        """The longest time without a new document indexed, from ``after`` until ``until_count``."""
        last_change, last_n, longest = after, None, 0.0
        for t, n in self.samples:
            if t < after:
                last_n = n
                continue
            if n != last_n:
                longest = max(longest, t - last_change)
                last_change, last_n = t, n
            if n >= until_count:
                break
        return longest


@pytest.mark.hbase
@pytest.mark.timeout(900)
@pytest.mark.exclusive  # SIGKILLs a region server of five JVMs' cluster, with deadlines on the recovery
def test_an_indexing_run_rides_out_a_sigkilled_region_server(running_cluster, workers, say, tmp_path):
    local, settings, _ = running_cluster
    prefix = "ix" + uuid.uuid4().hex[:6] + "_"
    run_settings = settings.model_copy(update={"table_prefix": prefix})
    env = cluster_env(run_settings)
    print()
    web = TestWeb(pages=PAGES, seed=5, include_bad=False)
    with HBaseStore(run_settings) as store, web as base:
        expected = web.expected_pages()
        indexers = [workers(None, env, threads=4) for _ in range(2)]
        crawl_log = tmp_path / "crawl.log"
        with crawl_log.open("w") as log:
            crawl = subprocess.Popen(
                [sys.executable, "-m", "caffeine.commands", "crawl", f"{base}/", "--depth", "50", "--delay", "0",
                 "--workers", "4", "--no-progress"], cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT)
        progress = Progress(store)
        try:
            deadline = time.monotonic() + 240
            while progress.count() < len(expected) // 4:
                for w in indexers:
                    w.alive_or_fail("an indexing worker")
                assert time.monotonic() < deadline, f"only {progress.count()} documents indexed in 240 s"
                time.sleep(0.5)
            tables = [t for t in (*PERCOLATOR_TABLES, POSTINGS, DOCSTATS) if store.table_exists(t)]
            spread = Counter(r.server for t in tables for r in store.regions(t))
            victim_server = spread.most_common(1)[0][0]
            victim = regionserver_name(settings, victim_server)
            indexed_before = progress.count()
            say(f"{indexed_before} of {len(expected)} documents indexed; regions of the run per server: "
                f"{dict(spread)}")
            killed_at = kill_regionserver(local, victim, say)
            try:
                recovered = regions_back(store, tables, victim_server)
                say(f"every region of the run answers from a live server {recovered:.1f}s after the kill")
                assert crawl.wait(timeout=400) == 0, f"the crawl failed:\n{crawl_log.read_text()}"
                say("the crawl ended by itself")
                for w in indexers:
                    w.alive_or_fail("an indexing worker")
                verify = subprocess.run([sys.executable, "-m", "caffeine.commands", "verify", "--timeout", "400"],
                                        cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                        timeout=700)
                assert verify.returncode == 0, f"verify failed:\n{verify.stdout}\n{verify.stderr[-4000:]}"
                say("caffeine verify: the batch recomputation equals the incremental index")
            finally:
                local.restart(victim)
        finally:
            progress.stop.set()
            progress.thread.join(5)
            if crawl.poll() is None:
                crawl.kill()
                crawl.wait()

        stored = {r.key.decode() for r in store.scan(REPOSITORY, key_only=True)}
        missing = sorted(set(expected) - stored)
        assert not missing, f"{len(missing)} pages of the web never reached the repository: {missing[:5]}"
        stall = progress.longest_stall(killed_at, progress.count())
        locks = locks_left_once_read(run_settings, [t for t in PERCOLATOR_TABLES if store.table_exists(t)])
        assert not locks, f"locks left once read: {locks}"
        st = local.status(probe_timeout_s=5)
        served = {p.name: (p.metrics.get("regions"), p.metrics.get("requests")) for p in st.pieces
                  if p.piece.role == "regionserver"}
        say("regions and requests per region server at the end (the restarted one has none until the balancer "
            "runs): " + ", ".join(f"{name} {regions} regions, {requests} requests"
                                  for name, (regions, requests) in sorted(served.items())))
        print(f"indexing run: region server {victim} SIGKILLed with {indexed_before} of {len(expected)} documents "
              f"indexed; regions back after {recovered:.1f}s; longest time without a new document indexed "
              f"{stall:.1f}s; all {len(expected)} pages stored, {progress.count()} documents indexed")
