"""``caffeine serve``: run the search API and page with uvicorn.

Layer: api (command line). Registered in ``caffeine.cli.COMMAND_MODULES``. Where HBase and
the oracle are comes from the usual ``CAFFEINE_*`` settings (``--table-prefix`` overrides
one); the service's own knobs from ``CAFFEINE_API_*`` (``api.settings``).
"""

from __future__ import annotations

import os


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the search API and search page (uvicorn)",
        description="Serve /search, /documents, /dups, /stats, /healthz, the OpenAPI docs at /docs "
        "and the search page at / over the index the CAFFEINE_* settings point at. Read-only.",
    )
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1, this machine only; 0.0.0.0 for every address)")
    p.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    p.add_argument("--table-prefix", help="HBase table prefix of the index (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    p.add_argument("--workers", type=int, default=1,
                   help="uvicorn worker processes (each keeps its own statistics cache; default 1)")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])
    p.add_argument("--no-access-log", action="store_true", help="do not log every request")
    p.set_defaults(func=run)


def run(args) -> int:
    import uvicorn

    if args.table_prefix:
        # The app is built by uvicorn (in each worker), from the environment.
        os.environ["CAFFEINE_TABLE_PREFIX"] = args.table_prefix
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
