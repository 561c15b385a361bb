"""The crawler: fetch URLs politely and record each outcome in ``repository``, transactionally.

Layer: crawler (imports the public ``caffeine.percolator`` API, ``caffeine.index`` for
link extraction, and ``crawler.fetch/robots/frontier/schedule``).

Per URL, one transaction writes (docs/INDEXING.md):

* ``repository[url] page:meta``: the ``FetchResult.meta()`` JSON (every URL tried gets one,
  errors included: ``status`` 0 when no HTTP response came, ``error`` says why);
* ``repository[url] page:content``: the body when one was stored (2xx HTML), otherwise the
  column is deleted, so content never outlives the fetch that ``page:meta`` describes (a
  page that now answers 404/410 keeps no stale body);
* ``frontier[url] state`` = done/failed, and the newly found links queued
  (``crawler.frontier``), so recording a page and advancing the frontier are one fact.

``page:meta`` is an observed column (it triggers the document observer): the crawler marks
it observed on its cluster (``crawler.record.install_repository``), so its writes set the
notify cell in the same transaction even before the indexing application's first install;
the other observed columns its cluster learns from the deployment's observer registry.

Link following: links of 2xx HTML pages at depth < ``depth`` are queued at depth + 1 if
they stay on the seeds' origins (``any_host`` lifts that). Depths are fetched level by level
(``crawler.schedule``), so every URL is queued at its shortest depth. Links are extracted with
``caffeine.index.parse_html`` against ``final_url``, the same parser the document observer
uses, so the crawler follows exactly the links the index will know. Robots.txt (RFC 9309,
``crawler.robots``) is checked before every request, redirect hops included, and its
Crawl-delay spaces the requests to the origin (until an origin's robots.txt is read, its
fetches go one at a time). With ``sitemaps=True`` the page URLs of the sitemaps listed in
the seeds' robots.txt files are seeds too (``crawler.sitemaps``). With ``warc=PATH`` every
HTTP exchange is archived as WARC request/response records (``crawler.archive``), so
``caffeine ingest PATH`` rebuilds the same repository rows. Nothing a server sends stops the crawl: every
failure is a recorded outcome; a failed transaction leaves the URL queued for ``--resume``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, TextIO

from caffeine.errors import CaffeineError
from caffeine.index import normalize_url, parse_html
from caffeine.index.schema import REPOSITORY
from crawler.archive import WarcArchive
from crawler.backpressure import DEFAULT_TARGET_S, BackPressure
from crawler.fetch import FetchResult, Fetcher
from crawler.frontier import DONE, FAILED, Frontier
from crawler.record import install_repository, record_fetch
from crawler.robots import ROBOTS_DISALLOWED, RobotsCache, origin_of
from crawler.schedule import HostQueues
from crawler.sitemaps import sitemap_urls

__all__ = ["Crawler", "CrawlReport", "Outcome", "CrawlError", "crawl"]

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_UNKNOWN_DELAY_S = 1e-6


class CrawlError(CaffeineError):
    """A crawl could not start (nothing to resume, no valid seed)."""


@dataclass(frozen=True)
class Outcome:
    url: str
    status: int
    error: str | None
    recorded: bool = True        # False: the transaction failed; the URL stays queued
    truncated: bool = False
    content_type: str | None = None

    @property
    def label(self) -> str:
        if not self.recorded:
            return "not recorded"
        if self.error is not None and self.error.startswith(ROBOTS_DISALLOWED):
            return "robots.txt"
        if self.error is not None:
            return "error" if self.status == 0 else f"{self.status} (error)"
        return str(self.status)


@dataclass
class CrawlReport:
    run: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    invalid_seeds: list[str] = field(default_factory=list)
    queued_left: int = 0
    stopped: str | None = None   # "max-pages", "interrupted" or None (frontier exhausted)
    elapsed_s: float = 0.0
    paced_s: float = 0.0         # fetch threads' time spent waiting for the observers (back-pressure)

    def counts(self) -> Counter:
        return Counter(o.label for o in self.outcomes.values())

    def errors(self) -> list[Outcome]:
        return sorted((o for o in self.outcomes.values() if o.error is not None or not o.recorded), key=lambda o: o.url)

    def summary(self, max_errors: int = 100) -> str:
        lines = [f"crawl run {self.run}: {len(self.outcomes)} URLs in {self.elapsed_s:.1f}s"]
        if self.paced_s >= 0.05:
            lines.append(f"  paced {self.paced_s:.1f} thread-seconds so the observers' backlog stayed fresh")
        for label, n in sorted(self.counts().items()):
            lines.append(f"  {label:>14}: {n}")
        truncated = sum(o.truncated for o in self.outcomes.values())
        if truncated:
            lines.append(f"  {'truncated':>14}: {truncated} (body cut at --max-bytes)")
        errors = self.errors()
        if errors:
            lines.append("errors:")
            for o in errors[:max_errors]:
                lines.append(f"  {o.url}  [{o.label}] {o.error}")
            if len(errors) > max_errors:
                lines.append(f"  ... and {len(errors) - max_errors} more")
        for seed in self.invalid_seeds:
            lines.append(f"  not an http(s) URL, skipped: {seed!r}")
        if self.stopped:
            lines.append(f"stopped ({self.stopped}); {self.queued_left} URLs still queued: "
                         "continue with `caffeine crawl --resume`")
        return "\n".join(lines)


class Crawler:
    """One crawl process. ``depth``/``any_host`` left None come from the resumed run's
    config (or default to 0/False for a new run)."""

    def __init__(
        self,
        cluster,
        *,
        depth: int | None = None,
        max_pages: int | None = None,
        delay: float = 0.2,
        timeout: float = 10.0,
        max_bytes: int = 2 * MIB,
        max_redirects: int = 5,
        workers: int = 4,
        any_host: bool | None = None,
        repository: str = REPOSITORY,
        frontier: str = "frontier",
        progress: TextIO | None = None,
        sitemaps: bool = False,
        warc: str | None = None,
        freshness_target_s: float = DEFAULT_TARGET_S,
    ) -> None:
        """``freshness_target_s``: pace the fetches when the observers' backlog would hold a
        page longer than this (``crawler.backpressure``; 0: never)."""
        self.cluster = cluster
        self.freshness_target_s = freshness_target_s
        self._pressure: BackPressure | None = None
        self.sitemaps = sitemaps
        self.depth = depth
        self.max_pages = max_pages
        self.delay = delay
        self.workers = max(1, workers)
        self.any_host = any_host
        self.repository = repository
        self.frontier = Frontier(cluster, frontier)
        self.progress = progress
        self.archive = WarcArchive(warc) if warc else None
        self.fetcher = Fetcher(timeout=timeout, max_bytes=max_bytes, max_redirects=max_redirects,
                               pool_size=max(4, self.workers * 2), archive=self.archive)
        self.robots = RobotsCache(self.fetcher)
        self._queues: HostQueues | None = None
        self._seen: set[str] = set()
        self._seen_lock = threading.Lock()
        self._stop = threading.Event()
        self._report_lock = threading.Lock()
        self._errors = 0
        self._last_progress = 0.0

    # -- running ----------------------------------------------------------------------------
    def run(self, seeds: Iterable[str] = (), *, resume: bool = False) -> CrawlReport:
        """Crawl until the frontier is empty, ``max_pages`` fetches, ``stop()`` or Ctrl-C.

        A new run queues ``seeds``; ``resume=True`` continues the last run recorded in the
        frontier table (plus any ``seeds``). Raises CrawlError when there is nothing to do.
        """
        started = time.monotonic()
        valid, invalid = [], []
        for seed in seeds:
            url = normalize_url(seed)
            (valid if url else invalid).append(url or seed)
        if self.sitemaps:
            valid = list(dict.fromkeys(valid + self._sitemap_seeds(valid)))
        self._install()
        run, queued = self._open_run(valid, invalid, resume)
        report = CrawlReport(run=run, invalid_seeds=invalid)
        self._queues = HostQueues(self._delay_for, self.max_pages)
        for url, depth in queued:
            self._queues.add(url, depth)
        self._pressure = BackPressure(self.cluster, self.repository, target_s=self.freshness_target_s).start()
        try:
            self._drive(report, started)
        finally:
            self._pressure.stop()
        report.paced_s = self._pressure.paced_s
        if report.stopped is None and self._queues.limit_reached:
            report.stopped = "max-pages"
        if report.stopped is None and self._stop.is_set():
            report.stopped = "stopped"
        report.queued_left = len(self.frontier.rows(run)[0])
        report.elapsed_s = time.monotonic() - started
        return report

    def _install(self) -> None:
        # docs/INDEXING.md: page:meta is observed; our writes must leave its notification.
        install_repository(self.cluster, self.repository)
        self.frontier.create()

    def _open_run(self, valid: list[str], invalid: list[str], resume: bool) -> tuple[str, list[tuple[str, int]]]:
        """Start or resume a run; settle depth/host rules; return (run id, queued URLs)."""
        if resume:
            current = self.frontier.current_run()
            if current is None:
                raise CrawlError(f"nothing to resume: no crawl run recorded in table {self.frontier.table!r}")
            run, config = current
        elif not valid:
            raise CrawlError("no http(s) URL to crawl" + (f" (skipped {invalid})" if invalid else ""))
        else:
            run, config = None, {}
        self._max_depth = self.depth if self.depth is not None else int(config.get("depth", 0))
        self._any_host = self.any_host if self.any_host is not None else bool(config.get("any_host", False))
        self._origins = set(config.get("origins", [])) | {origin_of(u) for u in valid}
        new_config = {"depth": self._max_depth, "any_host": self._any_host, "origins": sorted(self._origins)}
        if run is None:
            run = self.frontier.start_run(new_config, valid)
        else:
            # Seeds given with --resume join the run, and their hosts its link-following rule.
            grown = dict(config, origins=new_config["origins"])
            self.frontier.add_seeds(run, valid, grown if grown != config else None)
        self._run = run
        queued, self._seen = self.frontier.rows(run)
        return run, queued

    def _drive(self, report: CrawlReport, started: float) -> None:
        threads = [threading.Thread(target=self._work, args=(report,), name=f"crawl-{i}", daemon=True)
                   for i in range(self.workers)]
        for t in threads:
            t.start()
        try:
            while any(t.is_alive() for t in threads):
                for t in threads:
                    t.join(0.25)
                self._show_progress(report, started)
        except KeyboardInterrupt:
            report.stopped = "interrupted"
            self.stop()
            for t in threads:  # in-flight fetches end within their timeouts
                t.join()
        self._show_progress(report, started, final=True)

    def stop(self) -> None:
        """Finish the fetches in flight and return; the rest stays queued for a resume."""
        self._stop.set()
        if self._queues is not None:
            self._queues.stop()

    def close(self) -> None:
        self.fetcher.close()
        if self.archive is not None:
            self.archive.close()

    def _sitemap_seeds(self, seeds: list[str]) -> list[str]:
        """The page URLs of the sitemaps that the seeds' origins list in robots.txt."""
        found: list[str] = []
        for origin in dict.fromkeys(origin_of(u) for u in seeds):
            found += sitemap_urls(self.fetcher, self.robots.sitemaps(origin), self.robots.check)
        return found

    def _delay_for(self, origin: str) -> float:
        if not self.robots.known(origin):
            # Its Crawl-delay is not known before its robots.txt is read (by the first fetch):
            # until then one fetch of the origin at a time, as for a polite one.
            return max(self.delay, _UNKNOWN_DELAY_S)
        return max(self.delay, self.robots.crawl_delay(origin) or 0.0)

    def _work(self, report: CrawlReport) -> None:
        while (item := self._queues.next()) is not None:
            url, depth = item
            try:
                self._pressure.wait()
                outcome = self._process(url, depth)
            except Exception as exc:  # a bug here must not end the crawl for the others
                log.exception("crawling %s failed", url)
                outcome = Outcome(url, 0, f"crawler error: {type(exc).__name__}: {exc}", recorded=False)
            finally:
                self._queues.done(url, depth)
            with self._report_lock:  # the progress line reads the outcomes concurrently
                report.outcomes[url] = outcome
                if outcome.error is not None:
                    self._errors += 1

    # -- one URL -----------------------------------------------------------------------------
    def _process(self, url: str, depth: int) -> Outcome:
        result = self.fetcher.fetch(url, self.robots.check)
        links = self._links(result) if depth < self._max_depth else []
        with self._seen_lock:
            links = [u for u in dict.fromkeys(links) if u not in self._seen]
        state = DONE if result.ok else FAILED
        try:
            added = self.cluster.run(lambda txn: self._record(txn, result, state, links, depth + 1))
        except Exception as exc:  # conflicts beyond retries, storage down: retried on resume
            log.warning("could not record %s: %s", url, exc)
            return Outcome(url, result.status, f"not recorded ({type(exc).__name__}: {exc}); still queued",
                           recorded=False, truncated=result.truncated, content_type=result.content_type)
        with self._seen_lock:
            self._seen.update(added)
        for target in added:
            self._queues.add(target, depth + 1)
        return Outcome(url, result.status, result.error, truncated=result.truncated, content_type=result.content_type)

    def _links(self, result: FetchResult) -> list[str]:
        if not result.ok or result.content is None:
            return []
        parsed = parse_html(result.content, result.final_url, result.content_type)
        return [t for t, _ in parsed.links if self._any_host or origin_of(t) in self._origins]

    def _record(self, txn, result: FetchResult, state: str, links: list[str], child_depth: int) -> list[str]:
        record_fetch(txn, self.repository, result)
        self.frontier.finish(txn, result.url, state, self._run)
        return self.frontier.queue_new(txn, links, child_depth, self._run)

    def _show_progress(self, report: CrawlReport, started: float, final: bool = False) -> None:
        if self.progress is None or self._queues is None:
            return
        now = time.monotonic()
        if not final and now - self._last_progress < 0.5:
            return
        self._last_progress = now
        with self._report_lock:
            done, errors = len(report.outcomes), self._errors
        rate = done / max(now - started, 1e-6)
        pressure = self._pressure.describe() if self._pressure is not None else ""
        line = (f"\rcrawl: {done} fetched, {errors} errors, {self._queues.queued} queued, "
                f"{self._queues.in_flight} in flight, {rate:.1f}/s " + (f"| {pressure} " if pressure else ""))
        self.progress.write(line + ("\n" if final else ""))
        self.progress.flush()


def crawl(cluster, seeds: Iterable[str] = (), *, resume: bool = False, **options) -> CrawlReport:
    """Run one crawl to its end (see ``Crawler`` for the options) and return its report."""
    crawler = Crawler(cluster, **options)
    try:
        return crawler.run(seeds, resume=resume)
    finally:
        crawler.close()
