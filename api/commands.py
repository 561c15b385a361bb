"""``caffeine serve``: run the search API and page with uvicorn.

Layer: api. Command line, registered by the entry point ``80-api`` of the group
``caffeine.commands`` (``pyproject.toml``). Where HBase and the oracle are comes from the
usual ``CAFFEINE_*`` settings (``--prefix`` overrides one; ``--table-prefix`` is its
deprecated old spelling); the service's own knobs from ``CAFFEINE_API_*``
(``caffeine.search.settings``).
"""

from __future__ import annotations

import argparse
import os
import sys


# Examples shown under each command's --help.
EXAMPLES = {
    "serve": "examples:\n  caffeine serve                             # http://127.0.0.1:8000/\n  caffeine serve --host 0.0.0.0 --workers 2 --prefix demo2_\n  curl 'http://127.0.0.1:8000/search?q=espresso'; curl http://127.0.0.1:8000/metrics\n",
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", epilog=EXAMPLES["serve"],
        help="run the search API and search page (uvicorn)",
        description="Serve /search, /documents, /dups, /stats, /healthz, the OpenAPI docs at /docs "
        "and the search page at / over the index the CAFFEINE_* settings point at. Read-only.",
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for every address)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--prefix", help="HBase table-name prefix of the index (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    # The old spelling, from before every command said --prefix: still works, with a warning.
    p.add_argument("--table-prefix", dest="table_prefix", help=argparse.SUPPRESS)
    p.add_argument("--workers", type=int, default=1,
                   help="uvicorn worker processes (each keeps its own statistics cache; default 1)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--no-access-log", action="store_true", help="do not log every request")
    p.set_defaults(func=run)


def run(args) -> int:
    import uvicorn

    prefix = args.prefix
    if args.table_prefix:
        print("caffeine serve: --table-prefix is deprecated; say --prefix", file=sys.stderr)
        prefix = prefix or args.table_prefix
    if prefix:
        # The app is built by uvicorn (in each worker), from the environment.
        os.environ["CAFFEINE_TABLE_PREFIX"] = prefix
    uvicorn.run(
        "api.main:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        log_level=args.log_level,
        access_log=not args.no_access_log,
    )
    return 0
