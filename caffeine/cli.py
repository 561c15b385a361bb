"""The ``caffeine`` command-line program.

Layer: top. Each area registers its own sub-commands through a ``register(subparsers)``
function, so this module only assembles them and turns every error into a message that says
what failed, what to try and where the log is, with a non-zero exit code instead of a stack
trace (``caffeine.failures``; ``--debug`` or ``CAFFEINE_DEBUG=1`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from caffeine import failures, preflight
from caffeine.config import load_settings

# Modules that contribute sub-commands, in the order they appear in ``caffeine --help``.
COMMAND_MODULES = (
    "caffeine.runtime.commands",
    "caffeine.percolator.commands",
    "caffeine.ops.commands",
    "caffeine.oracle.commands",
    "caffeine.observers.commands",
    "caffeine.demo",
    "crawler.commands",
    "api.commands",
    "spark.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="caffeine",
        description="Incremental web indexing on Percolator transactions over HBase.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of a failure (also: {failures.DEBUG_ENV}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = failures.debug_requested(args.debug)
    log_path = failures.setup_logging(verbose=args.verbose, debug=debug, command=args.command)
    try:
        # Servers that do not answer are named within seconds, not after a minute of retries.
        preflight.check(args.command, load_settings())
        return int(args.func(args) or 0)
    except BrokenPipeError:
        # The reader went away (`caffeine status | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"caffeine {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if debug:
            raise
        failures.report_failure(args.command, exc, log_path)
        return 1


if __name__ == "__main__":
    sys.exit(main())
