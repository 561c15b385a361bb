"""The crawler: fetch URLs politely and record each outcome in ``repository``, transactionally.

Layer: crawler. Imports the public ``caffeine.percolator`` API, ``caffeine.index`` for
link extraction, and ``crawler.fetch/robots/frontier/schedule/addresses/scope/traps/sitemaps/
archive/record/report/backpressure``.

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

Link following: links of 2xx HTML pages at depth < ``depth`` (none of a page that says
``nofollow`` in a robots meta tag or ``X-Robots-Tag`` header, and a meta refresh's target at
any depth, as a redirect's: ``caffeine.index.documents.crawl_links``) are queued at depth + 1 if the
crawl's scope (``crawler.scope``) admits them: they stay on the seeds' sites (``any_host``
lifts that) and within the crawler-trap limits (``crawler.traps``: URL length, path depth,
repeated path segments, query parameters); of one page at most ``max_links_per_page``
distinct links are kept, and of one site at most ``max_host_pages`` URLs per run. The same
scope decides which redirect hops are followed and which sitemaps are read. What the limits
cut is counted per site, named in the progress line and the summary. Every connection is
checked against the crawl's address policy (``crawler.addresses``): non-global addresses
(loopback, private, link-local, ...) are refused unless ``allow_private_addresses``, but for
the seeds' own IP addresses (IP literal seeds, ``localhost``), and cloud metadata endpoints
always are unless ``allow_private_addresses``; a refused URL is recorded with status 0 and an
``address refused`` error. Depths are fetched level by level
(``crawler.schedule``), so every URL is queued at its shortest depth. Links are extracted with
``caffeine.index.parse_links`` against ``final_url``: ``parse_html``'s decoding, tree and
walk without collecting the text, so the crawler follows exactly the links the index will
know (the document observer's ``parse_html``) for about half the parse. Robots.txt (RFC 9309,
``crawler.robots``) is checked before every request, redirect hops included, and its
Crawl-delay spaces the requests to the origin (until an origin's robots.txt is read, its
fetches go one at a time). With ``sitemaps=True`` the page URLs of the sitemaps listed in
the seeds' robots.txt files are seeds too (``crawler.sitemaps``). With ``warc=PATH`` every
HTTP exchange is archived as WARC request/response records (``crawler.archive``), so
``caffeine ingest PATH`` rebuilds the same repository rows. Nothing a server sends stops the crawl: every
failure is a recorded outcome; a failed transaction leaves the URL queued for ``--resume``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
import urllib.parse
from typing import Iterable, Mapping, TextIO

from caffeine.errors import CaffeineError
from caffeine.index import normalize_url, parse_links
from caffeine.index.documents import crawl_links
from caffeine.index.schema import REPOSITORY
from crawler.addresses import AddressPolicy
from crawler.archive import WarcArchive
from crawler.backpressure import DEFAULT_TARGET_S, BackPressure
from crawler.fetch import FetchResult, Fetcher
from crawler.frontier import DONE, FAILED, Frontier
from crawler.record import install_repository, record_fetch
from crawler.report import CrawlReport, Outcome
from crawler.robots import RobotsCache, origin_of
from crawler.schedule import HostQueues
from crawler.scope import Scope
from crawler.sitemaps import sitemap_urls
from crawler.traps import FLAGS, HostBudget, LimitCounts, TrapLimits, site_of

__all__ = ["Crawler", "CrawlReport", "Outcome", "CrawlError", "crawl"]

log = logging.getLogger(__name__)

MIB = 1024 * 1024
_UNKNOWN_DELAY_S = 1e-6


class CrawlError(CaffeineError):
    """A crawl could not start (nothing to resume, no valid seed)."""


class Crawler:
    """One crawl process. ``depth``/``any_host``/``allow_private_addresses`` left None come
    from the resumed run's config (or default to 0/False/False for a new run)."""

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
        allow_private_addresses: bool | None = None,
        limits: TrapLimits | Mapping[str, int] | None = None,
        resolver=None,
        connector=None,
    ) -> None:
        """``freshness_target_s``: pace the fetches when the observers' backlog would hold a
        page longer than this (``crawler.backpressure``; 0: never). ``allow_private_addresses``
        (None: the resumed run's, else False) lets the crawl connect to every address;
        ``limits`` are the crawler-trap limits: a ``TrapLimits`` is used as it is; None means
        the resumed run's limits (a new run: ``TrapLimits()``'s defaults); a mapping of
        ``TrapLimits`` field names replaces those fields of the resumed run's (or the default)
        limits. The run's limits are stored with it, so ``--resume`` keeps them; ``resolver`` and
        ``connector`` are the hooks of ``crawler.addresses.GuardedBackend`` (defaults: the
        system's resolver, a real connection)."""
        self.cluster = cluster
        self.freshness_target_s = freshness_target_s
        self._pressure: BackPressure | None = None
        self.sitemaps = sitemaps
        self.depth = depth
        self.max_pages = max_pages
        self.delay = delay
        self.workers = max(1, workers)
        self.any_host = any_host
        self.allow_private_addresses = allow_private_addresses
        self._limits_given = limits
        self.limits = limits if isinstance(limits, TrapLimits) else TrapLimits(**dict(limits or {}))  # settled in run()
        self._limit_counts = LimitCounts()
        self.repository = repository
        self.frontier = Frontier(cluster, frontier)
        self.progress = progress
        self.archive = WarcArchive(warc) if warc else None
        # Until the seeds settle the policy (run()), no non-global address may be connected to.
        self.fetcher = Fetcher(timeout=timeout, max_bytes=max_bytes, max_redirects=max_redirects,
                               pool_size=max(4, self.workers * 2), archive=self.archive,
                               address_policy=AddressPolicy(), resolver=resolver, connector=connector)
        # robots.txt redirect hops obey the crawl's scope too (settled with the seeds in run()).
        self.robots = RobotsCache(self.fetcher, follow=lambda url: self._scope.refusal(url))
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
        self._install()
        run, config = self._settle(valid, invalid, resume)
        if self.sitemaps:
            valid = list(dict.fromkeys(valid + self._sitemap_seeds(valid)))
        run, queued = self._open_run(run, config, valid)
        report = CrawlReport(run=run, invalid_seeds=invalid, addresses=self.fetcher.network.policy.describe())
        self._budget = HostBudget(self.limits.max_host_pages, self._limit_counts, self._seen)
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
        report.limits = self._limit_counts.counts()
        report.elapsed_s = time.monotonic() - started
        return report

    def _install(self) -> None:
        # docs/INDEXING.md: page:meta is observed; our writes must leave its notification.
        install_repository(self.cluster, self.repository)
        self.frontier.create()

    def _settle(self, valid: list[str], invalid: list[str], resume: bool) -> tuple[str | None, dict]:
        """The run to resume (or None) and its config; settle depth, scope and address rules."""
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
        self._allow_private = (self.allow_private_addresses if self.allow_private_addresses is not None
                               else bool(config.get("allow_private_addresses", False)))
        self.limits = self._settled_limits(config)
        self._origins = set(config.get("origins", [])) | {origin_of(u) for u in valid}
        self._scope = Scope(self._origins, any_host=self._any_host, limits=self.limits, counts=self._limit_counts)
        hosts = [p.hostname for p in map(urllib.parse.urlsplit, sorted(self._origins)) if p.hostname]
        self.fetcher.network.policy = AddressPolicy.for_seeds(hosts, allow_private=self._allow_private)
        return run, config

    def _settled_limits(self, config: dict) -> TrapLimits:
        if isinstance(self._limits_given, TrapLimits):
            return self._limits_given
        names = {f.name for f in dataclasses.fields(TrapLimits)}
        stored = {k: int(v) for k, v in (config.get("limits") or {}).items() if k in names}
        return TrapLimits(**{**stored, **dict(self._limits_given or {})})

    def _open_run(self, run: str | None, config: dict, valid: list[str]) -> tuple[str, list[tuple[str, int]]]:
        """Start or resume the run (seeds join it); return (run id, queued URLs)."""
        self._origins |= {origin_of(u) for u in valid}  # sitemap pages: on the seeds' sites
        new_config = {"depth": self._max_depth, "any_host": self._any_host, "origins": sorted(self._origins),
                      "allow_private_addresses": self._allow_private, "limits": dataclasses.asdict(self.limits)}
        if run is None:
            run = self.frontier.start_run(new_config, valid)
        else:
            # Seeds given with --resume join the run, and their hosts its link-following rule.
            grown = dict(config, origins=new_config["origins"], allow_private_addresses=self._allow_private,
                         limits=new_config["limits"])
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
            found += sitemap_urls(self.fetcher, self.robots.sitemaps(origin), self.robots.check, self._scope.refusal)
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
        result = self.fetcher.fetch(url, self.robots.check, follow=self._scope.refusal)
        links = self._links(result, depth < self._max_depth)
        with self._seen_lock:
            links = self._budget.take([u for u in links if u not in self._seen])
        state = DONE if result.ok else FAILED
        try:
            added = self.cluster.run(lambda txn: self._record(txn, result, state, links, depth + 1))
        except Exception as exc:  # conflicts beyond retries, storage down: retried on resume
            self._budget.give_back(links)
            log.warning("could not record %s: %s", url, exc)
            return Outcome(url, result.status, f"not recorded ({type(exc).__name__}: {exc}); still queued",
                           recorded=False, truncated=result.truncated, content_type=result.content_type)
        self._budget.give_back(set(links) - set(added))
        with self._seen_lock:
            self._seen.update(added)
        for target in added:
            self._queues.add(target, depth + 1)
        return Outcome(url, result.status, result.error, truncated=result.truncated, content_type=result.content_type)

    def _links(self, result: FetchResult, below_max_depth: bool) -> list[str]:
        """The URLs to queue from a fetch: its page's links (while below the crawl's depth,
        and unless it says nofollow) and its meta refresh's target (``crawl_links``)."""
        if not result.ok or result.content is None:
            return []
        parsed = parse_links(result.content, result.final_url, result.content_type)
        targets = crawl_links(result.url, result.meta(), parsed, links=below_max_depth)
        links = [t for t in targets if self._scope.refusal(t) is None]
        cap = self.limits.max_links_per_page
        if cap and len(links) > cap:
            self._limit_counts.hit(site_of(result.url), FLAGS["max_links_per_page"], len(links) - cap)
            links = links[:cap]
        return links

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
        trapped = self._limit_counts.sites()
        traps = ("limits hit: " + ", ".join(f"{site} ({self._limit_counts.most_cut_by(site)})" for site in trapped[:3])
                 + (f" +{len(trapped) - 3}" if len(trapped) > 3 else "") if trapped else "")
        line = (f"\rcrawl: {done} fetched, {errors} errors, {self._queues.queued} queued, "
                f"{self._queues.in_flight} in flight, {rate:.1f}/s " + (f"| {pressure} " if pressure else "")
                + (f"| {traps} " if traps else ""))
        self.progress.write(line + ("\n" if final else ""))
        self.progress.flush()


def crawl(cluster, seeds: Iterable[str] = (), *, resume: bool = False, **options) -> CrawlReport:
    """Run one crawl to its end (see ``Crawler`` for the options) and return its report."""
    crawler = Crawler(cluster, **options)
    try:
        return crawler.run(seeds, resume=resume)
    finally:
        crawler.close()
