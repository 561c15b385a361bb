"""Sub-commands ``caffeine crawl``, ``caffeine ingest`` and ``caffeine migrate-urls``.

Layer: crawler. Its commands, registered by the entry point ``70-crawler`` of the group
``caffeine.commands`` (``pyproject.toml``).
Output is for people: the crawl's progress goes to stderr (``\\r`` updates when stderr is a
terminal), its summary to stdout; errors are CaffeineErrors with one-line messages.
"""

from __future__ import annotations

import argparse
import sys

from caffeine.arguments import parse_size
from caffeine.errors import CaffeineError
from crawler.traps import FLAGS, TrapLimits


# Examples shown under each command's --help.
EXAMPLES = {
    "crawl": "examples:\n  caffeine crawl http://127.0.0.1:8800/ --depth 10 --max-pages 2000\n  caffeine crawl --file seeds.txt --depth 2 --delay 1\n"
             "  caffeine crawl https://example.org/ --depth 50 --max-host-pages 5000 --max-links-per-page 300\n"
             "  caffeine crawl http://intranet.example/ --any-host --allow-private-addresses\n",
    "ingest": "examples:\n  caffeine ingest crawl.warc.gz                    # then `caffeine worker` indexes it\n  caffeine ingest --resume part-*.warc.gz --workers 8\n",
    "migrate-urls": "examples:\n  caffeine migrate-urls --dry-run   # count the rows whose key changes\n  caffeine migrate-urls\n",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "crawl", epilog=EXAMPLES["crawl"], help="fetch URLs (and optionally the pages they link to) into the repository table",
        description="Fetch URLs politely (robots.txt, per-host delay) and record each outcome in "
                    "`repository` in one transaction; the frontier is kept in the `frontier` table, "
                    "so an interrupted crawl continues with --resume.")
    p.add_argument("urls", nargs="*", metavar="URL", help="seed URLs")
    p.add_argument("--file", action="append", default=[], help="read seed URLs from this file (one per line, # comments)")
    p.add_argument("--depth", type=int, default=None,
                   help="follow links this many hops from the seeds (default 0: only the seeds; "
                        "--resume keeps the run's depth unless given)")
    p.add_argument("--max-pages", type=int, default=None, help="stop after this many fetches (the rest stays queued)")
    p.add_argument("--delay", type=float, default=0.2,
                   help="seconds between requests to one host (default 0.2; 0 = parallel, for local test webs)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to connect and between bytes (default 10)")
    p.add_argument("--max-bytes", type=parse_size, default=2 * 1024 * 1024, help="body size cap, e.g. 2M, 512K (default 2M)")
    p.add_argument("--max-redirects", type=int, default=5, help="redirect hops followed (default 5)")
    p.add_argument("--workers", type=int, default=4, help="fetch threads (default 4)")
    p.add_argument("--any-host", action="store_true", default=None,
                   help="follow links, redirects and sitemaps to other sites too (default: stay on the "
                        "seeds' sites: their host and port, over http or https)")
    p.add_argument("--allow-private-addresses", action="store_true", default=None,
                   help="let the crawl connect to loopback, private (RFC 1918/4193), link-local, carrier-grade "
                        "NAT, cloud metadata and other non-global addresses (default: refused, checked on the "
                        "address connected to, but for the seeds' own IP addresses: seeds given as IP literals, "
                        "on any port, and localhost; --resume keeps the run's choice unless given)")
    traps = p.add_argument_group("crawler-trap limits (0: no limit; a site that hits one is named in the "
                                 "progress line and the summary, with what was cut; --resume keeps the "
                                 "run's limits unless given)")
    defaults = TrapLimits()  # standard library only: cheap to import with the CLI
    traps.add_argument("--max-url-length", type=int, default=None, metavar="N",
                       help=f"do not follow URLs longer than N characters (default {defaults.max_url_length})")
    traps.add_argument("--max-path-depth", type=int, default=None, metavar="N",
                       help=f"do not follow URLs whose path has more than N segments (default {defaults.max_path_depth})")
    traps.add_argument("--max-path-repeats", type=int, default=None, metavar="N",
                       help="do not follow URLs whose path repeats a run of segments back to back more than N "
                            f"times, as in /a/b/a/b/a/b/ (default {defaults.max_path_repeats})")
    traps.add_argument("--max-query-params", type=int, default=None, metavar="N",
                       help=f"do not follow URLs with more than N query parameters (default {defaults.max_query_params})")
    traps.add_argument("--max-links-per-page", type=int, default=None, metavar="N",
                       help="follow at most the first N distinct links of a page "
                            f"(default {defaults.max_links_per_page})")
    traps.add_argument("--max-host-pages", type=int, default=None, metavar="N",
                       help=f"queue at most N URLs per site (host and port) in a crawl run (default {defaults.max_host_pages})")
    p.add_argument("--resume", action="store_true", help="continue the last crawl run from its frontier")
    p.add_argument("--warc", metavar="OUT.warc.gz",
                   help="archive every fetch (request and response records) into this WARC file "
                        "(gzip per record when the name ends in .gz); `caffeine ingest` replays it")
    p.add_argument("--sitemaps", action="store_true",
                   help="also seed the page URLs of the sitemaps listed in the seeds' robots.txt (Sitemap: lines)")
    p.add_argument("--repository-table", default="repository", help="table of fetched pages (default repository)")
    p.add_argument("--frontier-table", default="frontier", help="table of the crawl frontier (default frontier)")
    p.add_argument("--freshness-target", type=float, metavar="SECONDS",
                   help="slow down when the observer workers' backlog would hold a page longer than this "
                        "(default: CAFFEINE_FRESHNESS_TARGET_S, 5; 0: never); the progress line says when it does")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show progress on stderr (default: when stderr is a terminal)")
    p.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    p.set_defaults(func=cmd_crawl)

    p = subparsers.add_parser(
        "ingest", epilog=EXAMPLES["ingest"], help="read WARC archives (.warc, .warc.gz) into the repository table, as a crawl would",
        description="A URL's last response record (files in the order given, records in file order) "
                    "becomes the repository row a crawl's fetch of that URL writes; its earlier ones are "
                    "counted as superseded (same outcomes: 2xx HTML, redirects followed within the archives, "
                    "404/410, non-HTML, truncated); revisit records are resolved, request/metadata records "
                    "skipped. Damaged "
                    "records get one outcome each in the ingest table and never stop the ingest. Progress "
                    "is checkpointed in the ingest table: --resume continues after the last committed record.")
    p.add_argument("files", nargs="+", metavar="FILE", help="WARC files (plain, per-record gzip or whole-file gzip; WARC 1.0 or 1.1)")
    p.add_argument("--resume", action="store_true", help="skip finished files, continue the others after their last committed record")
    p.add_argument("--workers", type=int, default=4, help="writer threads (default 4)")
    p.add_argument("--max-bytes", type=parse_size, default=2 * 1024 * 1024, help="body size cap, as for crawl (default 2M)")
    p.add_argument("--max-redirects", type=int, default=5, help="redirect hops followed within the archives (default 5)")
    p.add_argument("--repository-table", default="repository", help="table of fetched pages (default repository)")
    p.add_argument("--state-table", default="ingest", help="table of checkpoints and damaged-record outcomes (default ingest)")
    p.add_argument("--freshness-target", type=float, metavar="SECONDS",
                   help="slow down when the observer workers' backlog would hold a page longer than this "
                        "(default: CAFFEINE_FRESHNESS_TARGET_S, 5; 0: never); the progress line says when it does")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar on stderr (default: when stderr is a terminal)")
    p.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    p.set_defaults(func=cmd_ingest)

    p = subparsers.add_parser(
        "migrate-urls", epilog=EXAMPLES["migrate-urls"], help="re-key repository and frontier rows written under earlier URL normalization rules",
        description="URLs are normalized by UTS46/IDNA2008 with escaped unreserved characters decoded "
                    "(%7E is ~) and session-id parameters dropped (PHPSESSID, jsessionid, ...). Rows keyed "
                    "under the earlier rules are moved to their new key (the old "
                    "row is recorded as moved, status 410, so its document leaves the index), and pages whose "
                    "links changed spelling are re-derived by the document observer. Safe to run again.")
    p.add_argument("--dry-run", action="store_true", help="count what would change, write nothing")
    p.add_argument("--repository-table", default="repository", help="table of fetched pages (default repository)")
    p.add_argument("--frontier-table", default="frontier", help="table of the crawl frontier (default frontier)")
    p.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    p.set_defaults(func=cmd_migrate_urls)


def _seeds(args) -> list[str]:
    seeds = list(args.urls)
    for name in args.file:
        try:
            with open(name, encoding="utf-8") as f:
                seeds += [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]
        except OSError as exc:
            raise CaffeineError(f"cannot read {name}: {exc.strerror}") from exc
    return seeds


def _freshness_target(args, cluster) -> float:
    """--freshness-target, else the deployment's setting (CAFFEINE_FRESHNESS_TARGET_S)."""
    return args.freshness_target if args.freshness_target is not None else cluster.settings.freshness_target_s


def cmd_crawl(args) -> int:
    from caffeine.percolator import connect
    from crawler.crawl import Crawler

    seeds = _seeds(args)
    try:
        # Only the limits given: the others are the resumed run's (a new run's: the defaults).
        limits = {name: getattr(args, name) for name in FLAGS if getattr(args, name) is not None}
        TrapLimits(**limits)  # refuses negative values before anything connects
    except ValueError as exc:
        raise CaffeineError(str(exc)) from exc
    if not seeds and not args.resume:
        raise CaffeineError("give URLs, --file, or --resume")
    progress = sys.stderr if (args.progress if args.progress is not None else sys.stderr.isatty()) else None
    cluster = connect(table_prefix=args.prefix) if args.prefix else connect()
    try:
        crawler = Crawler(
            cluster, depth=args.depth, max_pages=args.max_pages, delay=args.delay, timeout=args.timeout,
            max_bytes=args.max_bytes, max_redirects=args.max_redirects, workers=args.workers,
            any_host=args.any_host, repository=args.repository_table, frontier=args.frontier_table,
            progress=progress, sitemaps=args.sitemaps, warc=args.warc,
            freshness_target_s=_freshness_target(args, cluster),
            allow_private_addresses=args.allow_private_addresses, limits=limits,
        )
        try:
            report = crawler.run(seeds, resume=args.resume)
        finally:
            crawler.close()
    finally:
        cluster.close()
    print(report.summary())
    return 130 if report.stopped == "interrupted" else 0


def cmd_ingest(args) -> int:
    import signal
    import threading

    from caffeine.percolator import connect
    from crawler.ingest import Ingester

    progress = sys.stderr if (args.progress if args.progress is not None else sys.stderr.isatty()) else None
    cluster = connect(table_prefix=args.prefix) if args.prefix else connect()
    try:
        ingester = Ingester(cluster, repository=args.repository_table, state_table=args.state_table,
                            workers=args.workers, max_bytes=args.max_bytes, max_redirects=args.max_redirects,
                            progress=progress, freshness_target_s=_freshness_target(args, cluster))
        if threading.current_thread() is threading.main_thread():
            # Ctrl-C: finish the writes in flight and checkpoint, so --resume loses nothing.
            previous = signal.signal(signal.SIGINT, lambda *_: ingester.stop())
        else:
            previous = None
        try:
            report = ingester.run(args.files, resume=args.resume)
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
    finally:
        cluster.close()
    print(report.summary())
    return 130 if report.stopped else 0


def cmd_migrate_urls(args) -> int:
    from caffeine.percolator import connect
    from crawler.migrate import migrate_urls

    cluster = connect(table_prefix=args.prefix) if args.prefix else connect()
    try:
        report = migrate_urls(cluster, repository=args.repository_table, frontier=args.frontier_table,
                              dry_run=args.dry_run)
    finally:
        cluster.close()
    print(report.summary(args.dry_run))
    return 0
