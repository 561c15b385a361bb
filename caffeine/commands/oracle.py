"""``caffeine oracle``: run the timestamp oracle in the foreground.

Layer: commands. ``register(subparsers)`` adds the sub-command; its options and
what it does are ``caffeine.oracle.foreground``'s, shared with ``python -m caffeine.oracle``.
Serves until SIGTERM/SIGINT, exit code 0. A startup failure (HBase unreachable) or, without
``--standby``, a second oracle detected at run time (``OracleConflict``) is a
``CaffeineError``: one line on stderr, exit code 1.
"""

from __future__ import annotations

import argparse

from caffeine.oracle.foreground import DESCRIPTION, add_arguments, run

# Examples shown under each command's --help.
EXAMPLES = {
    "oracle": "examples:\n  caffeine oracle                                  # the one oracle of this deployment\n  CAFFEINE_ORACLE_HOST=0.0.0.0 caffeine oracle --port 9099   # for clients on other machines\n  caffeine oracle --standby --port 9098            # takes over when the active one dies\n",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    oracle = subparsers.add_parser(
        "oracle", epilog=EXAMPLES["oracle"],
        help="run the timestamp oracle in the foreground (strictly increasing timestamps)",
        description=DESCRIPTION,
    )
    add_arguments(oracle)
    oracle.set_defaults(func=run)
