"""``caffeine ingest``: WARC archives into ``repository``, exactly as a crawl's fetches land there.

Layer: crawler. Imports ``caffeine.index``, ``crawler.replay`` for records as fetch results,
``crawler.record`` for the write path, ``crawler.warcframe`` for framing; the public
``caffeine.percolator`` API through the cluster it is given. This module runs an ingest:
the two passes, the writes, the damage outcomes, the checkpoints; ``crawler.replay`` turns
one record into a fetch result by the rules below.

Each ``response`` record (a URL's last one: below) becomes the ``FetchResult`` the crawler
would have produced for that URL, and ``crawler.record.record_fetch`` writes it in a
transaction of its own, the crawl's write path: same ``page:meta`` fields, same
``page:content``/``page:error`` rule, same notification for the observers. The outcome
rules are the crawler's (``crawler.fetch``):

* 2xx with an HTML Content-Type: the payload (chunked transfer and Content-Encoding undone
  by warcio) is the content, cut at ``max_bytes`` with ``truncated`` set; a record marked
  ``WARC-Truncated: length`` (the archiver cut the body, as ``crawl --warc`` does at its
  cap) is a truncated page too; ``time``/``disconnect``/other truncation is a body cut
  short: ``protocol error``, no content (the crawler records the same for a short body);
* 2xx of another type: metadata only;
* 3xx with a Location: followed through the archives' other records, with the crawler's
  limit, loop and unusable-location rules; a target the archives do not hold ends the
  chain with the 3xx status and an error, as an unreachable target does in a crawl;
  every response record is a row of its own, so the hops of a chain (which a crawl
  follows without recording) get rows too, each resolved from where it stands;
* 404/410 and other statuses: the status, no content, no error;
* an HTTP block that does not parse: status 0, ``protocol error`` (a crawl records the
  same for a server that does not speak HTTP).

What an archive cannot hold, an ingest cannot reproduce: fetches that got no response
(connection refused, timeouts before the headers, a server that does not speak HTTP) and
URLs robots.txt kept the crawler from requesting have no response record, so no row; a
body cut short is recorded with the archive's reason rather than the network error's text.
None of these is a document, so the index is the same.

``revisit`` records are resolved to the record they refer to (``WARC-Refers-To``, else the
payload digest, else ``WARC-Refers-To-Target-URI``): its payload, with the revisit's own HTTP
headers unless those say 304. ``request``, ``metadata``, ``warcinfo``, ``resource`` and
``conversion`` records are skipped. Two passes: the first indexes every record's URL, id
and digest (redirects and revisits can point forward, and into other files of the same
ingest), the second writes.

A URL's last response: of the ``response`` and ``revisit`` records whose
``WARC-Target-URI`` normalizes to the same URL, only the last one in the ingest's order
(the files in the order given, each file's records in file order; not ``WARC-Date``) is
written. The first pass finds it (``RecordIndex.by_url``); the others are ``superseded``:
counted, not written. Writes run on a pool of workers, so writing every record would let
whichever transaction commits last decide the row, and an older response could win;
with one write per URL no order between writes matters, and a resumed or repeated ingest
writes the same cells. ``crawl --resume --warc`` appends to the archive of the run it
continues, where a URL is fetched again when its earlier fetch was never recorded (or as
a redirect hop): its last record is the newest response the crawl saw. Consequences:

* the row is what the last record alone produces: when that is an outcome a crawl keeps
  in ``page:error`` (5xx, a redirect that cannot be followed, an HTTP block that does not
  parse) no earlier response of the same ingest fills ``page:meta`` (rows that earlier
  ingests or crawls wrote stay, as ``crawler.record`` keeps them);
* a superseded record is still read where others refer to it (the source of a revisit;
  a redirect target is always a URL's last record) and still replayed, so an HTTP block
  that does not parse gets its damage outcome;
* a damaged stretch (``crawler.warcframe``) is no record: the last intact record of the
  URL is written;
* ``--resume`` must be given the same files in the same order, so that the same records
  are last; a superseded record counts as committed for the checkpoint.

Damage (``crawler.warcframe``: truncated gzip members, garbage, wrong Content-Length) and
records that cannot be turned into a row get one outcome each in the state table
(``ingest``, row ``bad:<file>:<outer>:<inner>``, columns ``error`` and ``url``), and the
ingest goes on with the next record.

Resuming: the state table keeps, per file (row ``file:<absolute path>``), ``last``: the
position of the last record such that it and every record before it are committed, and
``done`` once the file is finished. It is written at most every ``checkpoint_s`` seconds and
at the end; ``resume=True`` skips finished files and starts the others after ``last``. A
record committed after the last checkpoint is written again on resume, with the same cells
(writes are idempotent: same URL, same values).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, TextIO

from caffeine.errors import CaffeineError
from caffeine.index import normalize_url
from caffeine.index.schema import REPOSITORY
from crawler.fetch import FetchResult
from crawler.record import install_repository, record_fetch
from crawler.replay import RecordIndex, RecordRef, Replayer, Unparsable, warc_headers, warc_time
from crawler.report import Outcome
from crawler.warcframe import Archive, Damage, Position, Record
from crawler.writes import ThreadWrites
from crawler.backpressure import DEFAULT_TARGET_S, BackPressure

__all__ = ["Ingester", "IngestReport", "ingest", "IngestError", "STATE_TABLE"]

log = logging.getLogger(__name__)

STATE_TABLE = "ingest"
MIB = 1024 * 1024
_SKIPPED_TYPES = ("request", "metadata", "warcinfo", "resource", "conversion", "continuation")


class IngestError(CaffeineError):
    """An ingest could not start (a file that cannot be read)."""


@dataclass
class IngestReport:
    files: list[str] = field(default_factory=list)
    counts: Counter = field(default_factory=Counter)   # outcome label -> records
    damaged: list[tuple[str, Position, str]] = field(default_factory=list)
    pages: int = 0            # repository rows written
    stopped: bool = False     # stop() or Ctrl-C: the rest waits for --resume
    not_recorded: int = 0     # transactions that failed (the checkpoint stays before them)
    skipped_files: list[str] = field(default_factory=list)  # finished earlier (--resume)
    elapsed_s: float = 0.0
    paced_s: float = 0.0      # time spent waiting for the observers (back-pressure)

    @property
    def pages_per_s(self) -> float:
        return self.pages / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self, max_errors: int = 50) -> str:
        lines = [f"ingest: {self.pages} pages from {len(self.files)} file(s) in {self.elapsed_s:.1f}s "
                 f"({self.pages_per_s:.1f} pages/s)"]
        for label, n in sorted(self.counts.items()):
            lines.append(f"  {label:>18}: {n}")
        if self.paced_s >= 0.05:
            lines.append(f"  paced {self.paced_s:.1f}s so the observers' backlog stayed fresh")
        for name in self.skipped_files:
            lines.append(f"  already ingested, skipped: {name}")
        if self.damaged:
            lines.append("damaged records (recorded in the ingest table):")
            for name, pos, error in self.damaged[:max_errors]:
                lines.append(f"  {name} @{pos[0]}:{pos[1]}: {error}")
            if len(self.damaged) > max_errors:
                lines.append(f"  ... and {len(self.damaged) - max_errors} more")
        if self.stopped:
            lines.append("stopped: continue with `caffeine ingest --resume` and the same files")
        if self.not_recorded:
            lines.append(f"{self.not_recorded} records could not be written; `caffeine ingest --resume` retries them")
        return "\n".join(lines)




class Ingester:
    """One ingest run over ``paths``; see the module docstring."""

    def __init__(self, cluster, *, repository: str = REPOSITORY, state_table: str = STATE_TABLE,
                 workers: int = 4, max_bytes: int = 2 * MIB, max_redirects: int = 5,
                 progress: TextIO | None = None, checkpoint_s: float = 1.0,
                 writes: Callable[[int], ThreadWrites] | None = None,
                 freshness_target_s: float = DEFAULT_TARGET_S) -> None:
        """``writes(workers)``: where the record writes run (default ``ThreadWrites`` with
        ``workers`` threads and four times as many writes in flight).
        ``freshness_target_s``: pace the writes when the observers' backlog would hold a page
        longer than this (``crawler.backpressure``; 0: never)."""
        self.cluster = cluster
        self.freshness_target_s = freshness_target_s
        self._pressure: BackPressure | None = None
        self.repository = repository
        self.state_table = state_table
        self.workers = max(1, workers)
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.progress = progress
        self.checkpoint_s = checkpoint_s
        self._writes = writes or (lambda n: ThreadWrites(n, n * 4))
        self._archives: list[Archive] = []
        self._names: list[str] = []
        self._index = RecordIndex()
        self._replayer: Replayer | None = None   # once the archives are open and indexed
        self._lock = threading.Lock()
        self._last_progress = 0.0
        self._stop = threading.Event()

    def stop(self) -> None:
        """Finish the writes in flight, checkpoint, and return (``--resume`` goes on)."""
        self._stop.set()

    # -- running -------------------------------------------------------------------------------
    def run(self, paths: Iterable[str], *, resume: bool = False) -> IngestReport:
        started = time.monotonic()
        report = IngestReport()
        names = [os.path.abspath(p) for p in paths]
        if not names:
            raise IngestError("give WARC files to ingest")
        for name in names:
            if not os.path.isfile(name) or not os.access(name, os.R_OK):
                raise IngestError(f"cannot read {name}")
        install_repository(self.cluster, self.repository)
        self.cluster.create_table(self.state_table)
        try:
            self._archives = [Archive(name) for name in names]
            self._names = names
            report.files = names
            self._build_index()
            self._replayer = Replayer(self._archives, self._index, max_bytes=self.max_bytes,
                                      max_redirects=self.max_redirects)
            states = self._states(names) if resume else {}
            pool = self._writes(self.workers)
            self._pressure = BackPressure(self.cluster, self.repository, target_s=self.freshness_target_s).start()
            try:
                for i, name in enumerate(names):
                    state = states.get(name, {})
                    if state.get("done"):
                        report.skipped_files.append(name)
                        continue
                    if self._stop.is_set():
                        break
                    self._ingest_file(i, pool, report, state.get("last"), started)
            finally:
                pool.close()
                self._pressure.stop()
                report.paced_s = self._pressure.paced_s
        finally:
            for archive in self._archives:
                archive.close()
        report.stopped = self._stop.is_set()
        report.elapsed_s = time.monotonic() - started
        self._show_progress(report, started, None, final=True)
        return report

    def _build_index(self) -> None:
        for i, archive in enumerate(self._archives):
            for item in archive.frame():
                if isinstance(item, Record):
                    self._index.add(RecordRef(i, item.position), warc_headers(item.data))

    def _states(self, names: list[str]) -> dict[str, dict]:
        out = {}
        with self.cluster.begin() as txn:
            rows = txn.get_rows(self.state_table, [f"file:{n}" for n in names], ["last", "done"])
        for name in names:
            cols = rows[f"file:{name}".encode()]
            last = tuple(int(x) for x in cols["last"].decode().split(":")) if cols["last"] else None
            out[name] = {"last": last, "done": cols["done"] == b"1"}
        return out

    def _ingest_file(self, i: int, pool: ThreadWrites, report: IngestReport, last: Position | None,
                     started: float) -> None:
        """Pass 2 over one file: submit each record's write; checkpoint the committed prefix."""
        name = self._names[i]
        archive = self._archives[i]
        pending: list[list] = []      # [position, future or None], in file order
        checkpoint = {"at": time.monotonic(), "last": last}

        def settle(final: bool) -> None:
            # The contiguous prefix of finished writes moves the checkpoint, up to the first
            # failed one (resume must redo it); every failure is counted, and every write is
            # still awaited below.
            while pending and (pending[0][1] is None or pending[0][1].done()):
                position, future = pending.pop(0)
                if future is not None and not future.result():
                    report.not_recorded += 1
                    checkpoint["blocked"] = True
                if not checkpoint.get("blocked"):
                    checkpoint["last"] = position
            if final or time.monotonic() - checkpoint["at"] >= self.checkpoint_s:
                self._write_state(name, checkpoint["last"], done=final and not checkpoint.get("blocked"))
                checkpoint["at"] = time.monotonic()

        finished = True
        for item in archive.frame(last):
            if self._stop.is_set():
                finished = False
                break
            if last is not None and item.position <= last:
                continue
            work = self._work_for(i, item, report)
            if work is None:
                pending.append([item.position, None])
            else:
                self._pressure.wait()
                pending.append([item.position, pool.submit(self._write, work, report)])
            settle(False)
            self._show_progress(report, started, archive.progress(item.position))
        for entry in pending:
            if entry[1] is not None:
                entry[1].result()
        settle(finished)

    def _write(self, works, report: IngestReport) -> bool:
        try:
            for kind, payload in works:
                if kind == "page":
                    self.cluster.run(lambda txn: record_fetch(txn, self.repository, payload))
                    with self._lock:
                        report.pages += 1
                else:
                    row, cells = payload
                    self.cluster.run(lambda txn: [txn.set(self.state_table, row, c, v) for c, v in cells.items()])
            return True
        except Exception as exc:  # storage down, conflicts beyond retries: resume redoes it
            log.warning("could not write an ingest outcome: %s", exc)
            return False

    def _write_state(self, name: str, last: Position | None, done: bool) -> None:
        def write(txn):
            row = f"file:{name}"
            if last is not None:
                txn.set(self.state_table, row, "last", f"{last[0]}:{last[1]}")
            else:
                txn.delete(self.state_table, row, "last")
            txn.set(self.state_table, row, "done", "1" if done else "0")
        try:
            self.cluster.run(write)
        except Exception as exc:
            log.warning("could not write the ingest checkpoint of %s: %s", name, exc)

    # -- one record --------------------------------------------------------------------------------
    def _work_for(self, i: int, item: Record | Damage, report: IngestReport):
        """The writes of one record: [("page", FetchResult)] and/or [("bad", (row, cells))];
        None when it is skipped. A response or revisit that is not its URL's last record
        writes no page (module docstring: a URL's last response), only its damage outcome."""
        name = self._names[i]
        if isinstance(item, Damage):
            return self._bad(report, name, item.position, item.error, None)
        headers = warc_headers(item.data)
        kind = headers.get("warc-type", "")
        if kind in _SKIPPED_TYPES:
            with self._lock:
                report.counts[f"skipped {kind}"] += 1
            return None
        if kind not in ("response", "revisit"):
            return self._bad(report, name, item.position, f"unknown record type {kind!r} skipped", None)
        raw_uri = headers.get("warc-target-uri", "").strip("<>")
        url = normalize_url(raw_uri)
        if url is None:
            return self._bad(report, name, item.position, f"not an http(s) URL: {raw_uri!r}", raw_uri)
        last = self._is_last(url, i, item.position)
        try:
            result = self._replayer.result(url, i, item.data)
        except Unparsable as exc:
            fetched_at = warc_time(headers.get("warc-date"))
            result = FetchResult(url, 0, None, url, f"protocol error: {exc}", False, None, fetched_at)
            # Both: the URL's row says what a crawl would say, the state table why.
            bad = self._bad(report, name, item.position, str(exc), url)
            return [("page", result), *bad] if last else bad
        if not last:
            with self._lock:
                report.counts["superseded"] += 1
            return None
        outcome = Outcome(url, result.status, result.error, truncated=result.truncated,
                          content_type=result.content_type)
        with self._lock:
            report.counts[outcome.label] += 1
        return [("page", result)]

    def _is_last(self, url: str, i: int, position: Position) -> bool:
        """Whether the response/revisit record of ``url`` at ``position`` of file ``i`` is the
        URL's last one in the ingest's order (pass 1 left it in ``RecordIndex.by_url``: it
        indexes the same records, in the same order, under the same normalized URL)."""
        return self._index.by_url.get(url) == RecordRef(i, position)

    def _bad(self, report: IngestReport, name: str, position: Position, error: str, url: str | None):
        with self._lock:
            report.damaged.append((name, position, error))
            report.counts["damaged"] += 1
        row = f"bad:{name}:{position[0]}:{position[1]}"
        cells = {"error": error}
        if url:
            cells["url"] = url
        return [("bad", (row, cells))]

    def _show_progress(self, report: IngestReport, started: float, fraction: float | None,
                       final: bool = False) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if not final and now - self._last_progress < 0.5:
            return
        self._last_progress = now
        rate = report.pages / max(now - started, 1e-6)
        if fraction is None:
            fraction = 1.0
        width = 30
        filled = int(round(fraction * width))
        bar = "#" * filled + "-" * (width - filled)
        pressure = self._pressure.describe() if self._pressure is not None else ""
        line = (f"\ringest [{bar}] {fraction * 100:5.1f}%  {report.pages} pages, "
                f"{report.counts['damaged']} damaged, {rate:.1f} pages/s " + (f"| {pressure} " if pressure else ""))
        self.progress.write(line + ("\n" if final else ""))
        self.progress.flush()


def ingest(cluster, paths: Iterable[str], *, resume: bool = False, **options) -> IngestReport:
    """Run one ingest (see ``Ingester`` for the options) and return its report."""
    return Ingester(cluster, **options).run(paths, resume=resume)
