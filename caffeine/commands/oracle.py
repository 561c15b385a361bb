"""``caffeine oracle``: run the timestamp oracle in the foreground.

Layer: oracle (CLI side). ``register(subparsers)`` adds the sub-command; it builds ``Settings``
from the ``CAFFEINE_*`` environment (``--host``/``--port``/``--block-ms`` override
``CAFFEINE_ORACLE_HOST``/``_PORT``/``_BLOCK_MS``) and serves until SIGTERM/SIGINT, exit code
0. A startup failure (HBase unreachable) or a second oracle detected at run time
(``OracleConflict``) is a ``CaffeineError``: one line on stderr, exit code 1.
"""

from __future__ import annotations

import argparse

from caffeine.config import load_settings


def cmd_oracle(args: argparse.Namespace) -> int:
    # Imported here so `caffeine --help` and other commands do not load the storage layer.
    from caffeine.oracle.server import serve

    settings = load_settings(oracle_host=args.host, oracle_port=args.port, oracle_block_ms=args.block_ms)
    serve(settings)
    return 0


# Examples shown under each command's --help.
EXAMPLES = {
    "oracle": "examples:\n  caffeine oracle                                  # the one oracle of this deployment\n  CAFFEINE_ORACLE_HOST=0.0.0.0 caffeine oracle --port 9099   # for clients on other machines\n",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    oracle = subparsers.add_parser(
        "oracle", epilog=EXAMPLES["oracle"],
        help="run the timestamp oracle in the foreground (strictly increasing timestamps)",
        description=(
            "Serve Percolator timestamps over TCP until SIGTERM/SIGINT. Persists a high-water "
            "mark in the HBase table <prefix>oracle before handing out timestamps beyond it, so a "
            "restart never repeats or goes below one issued before. Run exactly one per "
            "deployment (table prefix)."
        ),
    )
    oracle.add_argument("--host", metavar="ADDR", help="address to bind (default: CAFFEINE_ORACLE_HOST, 127.0.0.1)")
    oracle.add_argument("--port", type=int, metavar="PORT",
                        help="port to bind, 0 for any free one (default: CAFFEINE_ORACLE_PORT, 9099)")
    oracle.add_argument("--block-ms", type=int, metavar="MS",
                        help="wall-clock ms each persisted high-water mark reaches ahead "
                        "(default: CAFFEINE_ORACLE_BLOCK_MS, 3000)")
    oracle.set_defaults(func=cmd_oracle)
