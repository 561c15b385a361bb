"""The durable crawl frontier: a Percolator table, so an interrupted crawl resumes.

Layer: crawler. Imports only the public ``caffeine.percolator`` API, through the
transactions it is handed.

Table ``frontier`` (name configurable), one row per normalized URL:

============  ==========================================================================
column        value
============  ==========================================================================
``state``     ``queued`` | ``done`` (fetched, 2xx) | ``failed`` (fetched or tried; error or
              non-2xx status; the outcome is in ``repository`` ``page:meta``)
``depth``     link distance from the run's seeds, decimal
``run``       id of the crawl run that queued the URL
============  ==========================================================================

and one bookkeeping row ``RUN_ROW`` ("!crawl", sorts before every http URL) with columns
``current-run`` (the run id) and ``config`` (JSON: ``depth``, ``any_host``, ``origins``,
``allow_private_addresses``; a config written before the last key existed reads as False).

Invariants:

* a URL's final state is written in the same transaction as its ``repository`` row, so
  "done/failed in the frontier" and "outcome recorded" are the same fact; a crash between
  fetch and commit leaves the URL ``queued`` and a resumed run fetches it again;
* a link is queued by the transaction of the page that found it, only if its row does not
  already belong to the current run: two pages that find the same new URL at once both try
  to write its row, and snapshot isolation lets only one commit (the other retries, sees
  the row, and skips it);
* a new run (not a resume) re-queues its seeds and, as they are found again, every page of
  earlier runs: a re-crawl fetches everything anew, which is how changed and vanished pages
  are noticed.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Iterable

from caffeine.percolator import Transaction

__all__ = ["Frontier", "RUN_ROW", "QUEUED", "DONE", "FAILED"]

RUN_ROW = "!crawl"
QUEUED, DONE, FAILED = "queued", "done", "failed"


class Frontier:
    def __init__(self, cluster, table: str = "frontier") -> None:
        self.cluster = cluster
        self.table = table

    def create(self) -> None:
        self.cluster.create_table(self.table)

    # -- runs ------------------------------------------------------------------------------
    def start_run(self, config: dict, seeds: Iterable[str]) -> str:
        """A new run queuing ``seeds`` at depth 0; returns its id."""
        run = f"{int(time.time())}-{uuid.uuid4().hex[:8]}"
        seeds = list(dict.fromkeys(seeds))

        def write(txn: Transaction) -> None:
            txn.set(self.table, RUN_ROW, "current-run", run)
            txn.set(self.table, RUN_ROW, "config", json.dumps(config, sort_keys=True))
            for url in seeds:
                self.queue(txn, url, 0, run)

        self.cluster.run(write)
        return run

    def current_run(self) -> tuple[str, dict] | None:
        with self.cluster.begin() as txn:
            row = txn.get_row(self.table, RUN_ROW, ["current-run", "config"])
        if row["current-run"] is None:
            return None
        return row["current-run"].decode(), json.loads(row["config"] or b"{}")

    def add_seeds(self, run: str, seeds: Iterable[str], config: dict | None = None) -> None:
        """Queue more seeds (depth 0) in an existing run (``crawl --resume URL``), and
        record the run's new ``config`` if given (their origins join the run's)."""
        seeds = list(dict.fromkeys(seeds))

        def write(txn: Transaction) -> None:
            if config is not None:
                txn.set(self.table, RUN_ROW, "config", json.dumps(config, sort_keys=True))
            for url in seeds:
                self.queue(txn, url, 0, run)

        if seeds or config is not None:
            self.cluster.run(write)

    def rows(self, run: str) -> tuple[list[tuple[str, int]], set[str]]:
        """(queued URLs with depths, every URL of the run in any state), by one scan."""
        queued, known = [], set()
        with self.cluster.begin() as txn:
            for key, cols in txn.scan(self.table, columns=["state", "depth", "run"]):
                if key == RUN_ROW.encode() or cols.get("run", b"").decode() != run:
                    continue
                url = key.decode("utf-8", errors="surrogateescape")
                known.add(url)
                if cols.get("state") == QUEUED.encode():
                    queued.append((url, int(cols.get("depth", b"0"))))
        queued.sort(key=lambda item: item[1])  # breadth first
        return queued, known

    # -- inside a page's transaction ------------------------------------------------------------
    def queue(self, txn: Transaction, url: str, depth: int, run: str) -> None:
        txn.set(self.table, url, "state", QUEUED)
        txn.set(self.table, url, "depth", str(depth))
        txn.set(self.table, url, "run", run)

    def queue_new(self, txn: Transaction, urls: Iterable[str], depth: int, run: str) -> list[str]:
        """Queue those of ``urls`` whose row is not in ``run`` yet; returns them.

        Their rows are read in one batched snapshot read: a page of a large site can link to
        thousands of URLs, and one read per link made such a page's transaction take
        seconds (and lose more conflicts while it did)."""
        urls = list(dict.fromkeys(urls))
        if not urls:
            return []
        run_bytes = run.encode()
        rows = txn.get_rows(self.table, urls, ["run"])
        added = []
        for url in urls:
            if rows[url.encode()]["run"] != run_bytes:
                self.queue(txn, url, depth, run)
                added.append(url)
        return added

    def finish(self, txn: Transaction, url: str, state: str, run: str) -> None:
        txn.set(self.table, url, "state", state)
        txn.set(self.table, url, "run", run)
