"""The oracle process's command line: its options, and serving with them in the foreground.

Layer: oracle. The one definition of what ``python -m caffeine.oracle`` (what ``caffeine up``
and the Docker image run) and ``caffeine oracle`` accept: ``--host``/``--port``/``--block-ms``
override ``CAFFEINE_ORACLE_HOST``/``_PORT``/``_BLOCK_MS``, the rest of ``Settings`` comes from
the ``CAFFEINE_*`` environment; ``--standby`` makes it wait for a lease another oracle holds
instead of refusing to start (``caffeine.oracle.server``). ``run(args)`` serves until
SIGTERM/SIGINT and returns 0; a startup failure (HBase unreachable) or, without
``--standby``, a second oracle detected at run time (``OracleConflict``) raises a
``CaffeineError`` for the caller to print as one line.
"""

from __future__ import annotations

import argparse

from caffeine.config import load_settings

DESCRIPTION = (
    "Serve Percolator timestamps over TCP until SIGTERM/SIGINT. Persists a high-water "
    "mark in the HBase table <prefix>oracle before handing out timestamps beyond it, so a "
    "restart never repeats or goes below one issued before. One oracle serves a "
    "deployment (table prefix) at a time; others started with --standby wait and take over "
    "when it stops or dies."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", metavar="ADDR", help="address to bind (default: CAFFEINE_ORACLE_HOST, 127.0.0.1)")
    parser.add_argument("--port", type=int, metavar="PORT",
                        help="port to bind, 0 for any free one (default: CAFFEINE_ORACLE_PORT, 9099)")
    parser.add_argument("--block-ms", type=int, metavar="MS",
                        help="wall-clock ms each persisted high-water mark reaches ahead "
                        "(default: CAFFEINE_ORACLE_BLOCK_MS, 3000)")
    parser.add_argument("--standby", action="store_true",
                        help="if another oracle serves this deployment, wait as its standby (refusing "
                        "requests) and take over when it stops or its lease runs out, instead of refusing "
                        "to start")


def run(args: argparse.Namespace) -> int:
    # Imported here so that parsing options (and `caffeine --help`) does not load the storage layer.
    from caffeine.oracle.server import serve

    settings = load_settings(oracle_host=args.host, oracle_port=args.port, oracle_block_ms=args.block_ms)
    serve(settings, standby=args.standby)
    return 0
