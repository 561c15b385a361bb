"""Sub-command ``caffeine testweb``: serve the generated local web for crawls.

Layer: testweb. Its command, registered by the entry point ``75-testweb`` of the group
``caffeine.commands`` (``pyproject.toml``), like every area's.
"""

from __future__ import annotations

from caffeine.arguments import parse_size
from caffeine.errors import CaffeineError
from testweb.web import TestWeb, serve

EXAMPLES = {
    "testweb": "examples:\n  caffeine testweb --pages 2000 &          # http://127.0.0.1:8800/\n  caffeine testweb --pages 2000 --list     # its URLs, without serving\n",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "testweb", epilog=EXAMPLES["testweb"], help="serve a generated (or a directory's) test web on 127.0.0.1 for crawls",
        description="A local web server for crawl tests: a seeded generated web with duplicates, mirrors, "
                    "robots.txt, versions and bad-input pages under /bad/, or the HTML files of a directory.")
    p.add_argument("--port", type=int, default=8800, help="port on 127.0.0.1 (default 8800; 0 = any free one)")
    p.add_argument("--pages", type=int, default=200, help="generated pages (default 200)")
    p.add_argument("--seed", type=int, default=0, help="generator seed (default 0)")
    p.add_argument("--version", type=int, default=0,
                   help="start at this version (changed and vanished pages; POST /_mutate?version=V changes it live)")
    p.add_argument("--dir", help="serve this directory instead, e.g. /usr/share/doc/python3.11/html")
    p.add_argument("--no-bad", action="store_true", help="leave out the /bad/ pages")
    p.add_argument("--huge-bytes", type=parse_size, default=3 * 1024 * 1024, help="size of /bad/huge.html (default 3M)")
    p.add_argument("--slow", type=float, default=5.0, help="seconds /bad/slow.html waits (default 5)")
    p.add_argument("--list", action="store_true", help="print every expected URL with its status and exit")
    p.set_defaults(func=cmd_testweb)


def cmd_testweb(args) -> int:
    web = TestWeb(args.pages, args.seed, directory=args.dir, port=args.port, version=args.version,
                  include_bad=not args.no_bad, huge_bytes=args.huge_bytes, slow_s=args.slow)
    if args.list:
        if web.directory is not None:
            for url in web.expected_pages():
                print(f"200 {url}")
            return 0
        for url, status in sorted(web.expected_statuses().items()):
            print(f"{status} {url}")
        for url in web.disallowed_urls():
            print(f"robots {url}")
        for name, url in web.special_urls().items():
            print(f"special:{name} {url}")
        return 0
    try:
        serve(web)
    except OSError as exc:
        raise CaffeineError(f"cannot serve on 127.0.0.1:{args.port}: {exc.strerror or exc}") from exc
    return 0
