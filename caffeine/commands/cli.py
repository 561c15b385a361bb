"""The ``caffeine`` command-line program.

Layer: commands. Each area registers its own sub-commands through a
``register(subparsers)`` function named by an entry point of the group ``caffeine.commands``
(``caffeine.commands.plugins``), so this module knows no area: it only assembles them and
turns every error into a message that says what failed, what to try and where the log is,
with a non-zero exit code instead of a stack trace (``caffeine.failures``; ``--debug`` or
``CAFFEINE_DEBUG=1`` shows the traceback). Installed as ``caffeine``;
``python3 -m caffeine.commands`` runs it too.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap

from caffeine import failures, preflight
from caffeine.commands import plugins
from caffeine.config import load_settings


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose, but keeps an epilog's examples as written: a line that starts with a
    space, or ends with a colon ("examples:"), stands on its own; blank lines separate
    paragraphs."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        out, paragraph = [], []

        def flush() -> None:
            if paragraph:
                out.append(textwrap.fill(" ".join(paragraph), width, initial_indent=indent, subsequent_indent=indent))
                paragraph.clear()

        for line in text.splitlines():
            if not line.strip():
                flush()
                out.append("")
            elif line.startswith((" ", "\t")) or line.rstrip().endswith(":"):
                flush()
                out.append(indent + line.rstrip())
            else:
                paragraph.append(line.strip())
        flush()
        return "\n".join(out)


class Parser(argparse.ArgumentParser):
    """Every (sub-)command's parser: ``HelpFormatter`` unless one is given. Sub-parsers are
    built with the parent's class, so this reaches ``caffeine tables list`` too."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version as installed_version

    try:
        return installed_version("caffeine")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """Every sub-command's (name path, parser), depth first: ``("tables", "list")``, ..."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from subcommands(sub, (*path, name))


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="caffeine",
        description="Incremental web indexing on Percolator transactions over HBase.",
        epilog="examples:\n  caffeine demo              # everything, on a generated local web\n"
               "  caffeine COMMAND --help    # each command's options and examples",
    )
    parser.add_argument("--version", action="version", version=f"caffeine {version()}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug detail")
    parser.add_argument("--debug", action="store_true",
                        help=f"show the traceback of a failure (also: {failures.DEBUG_ENV}=1)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    plugins.register_all(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
    except plugins.CommandsUnavailable as exc:
        if failures.debug_requested("--debug" in (sys.argv[1:] if argv is None else argv)):
            raise
        print(f"caffeine: {exc}\n  try: {exc.hint}", file=sys.stderr)
        return 1
    args = parser.parse_args(argv)
    debug = failures.debug_requested(args.debug)
    log_path = failures.setup_logging(verbose=args.verbose, debug=debug, command=args.command)
    try:
        # Servers that do not answer are named within seconds, not after a minute of retries.
        # A sub-command whose arguments need no server (``engine --map``) says so.
        if getattr(args, "needs_servers", lambda _args: True)(args):
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
