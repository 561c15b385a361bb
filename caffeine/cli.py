"""The ``caffeine`` command-line program.

Layer: top. Each area registers its own sub-commands through a ``register(subparsers)``
function, so this module only assembles them and turns known errors into a one-line message
and a non-zero exit code instead of a stack trace.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from caffeine.errors import CaffeineError

# Modules that contribute sub-commands, in the order they appear in ``caffeine --help``.
COMMAND_MODULES = (
    "caffeine.runtime.commands",
    "caffeine.percolator.commands",
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
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return int(args.func(args) or 0)
    except CaffeineError as exc:
        print(f"caffeine {args.command}: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`caffeine status | head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print(f"caffeine {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
