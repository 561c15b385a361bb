"""Conventions every ``caffeine`` command keeps: an example in its --help that actually parses,
``--prefix`` as the one spelling of the table prefix, ``--version``, a preflight class."""

from __future__ import annotations

import argparse
import re

import pytest

from caffeine import preflight
from caffeine.commands.cli import build_parser, subcommands
from support.cli_helpers import example_commands, run_cli

PARSER = build_parser()
COMMANDS = dict(subcommands(PARSER))
# Commands that do not name a deployment's tables: the runtime's own (its Spark cluster too), the oracle (one per
# HBase, its table under CAFFEINE_RUNTIME_TABLE_PREFIX), the test web, and the `tables`
# group itself (its actions take --prefix).
NO_TABLE_PREFIX = {("up",), ("down",), ("status",), ("oracle",), ("testweb",), ("tables",),
                   ("spark", "up"), ("spark", "down"), ("spark", "status")}


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_every_command_has_examples_that_parse(path):
    parser = COMMANDS[path]
    assert parser.epilog and parser.epilog.startswith("examples:"), f"caffeine {' '.join(path)} --help has no examples"
    examples = example_commands(parser.epilog)
    assert examples, parser.epilog
    for argv in examples:
        try:
            PARSER.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(f"example `caffeine {' '.join(argv)}` does not parse (exit {exc.code})")
    help_text = parser.format_help()
    assert "examples:\n  caffeine" in help_text or "examples:\n  CAFFEINE_" in help_text, help_text


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=" ".join)
def test_the_table_prefix_is_spelled_prefix_everywhere(path):
    options = {o for a in COMMANDS[path]._actions if a.help is not argparse.SUPPRESS for o in a.option_strings}
    assert "--table-prefix" not in options
    has_subcommands = any(isinstance(a, argparse._SubParsersAction) for a in COMMANDS[path]._actions)
    if path not in NO_TABLE_PREFIX and not has_subcommands:
        assert "--prefix" in options, f"caffeine {' '.join(path)} takes no --prefix"


def test_every_command_says_which_servers_it_needs():
    assert {path[0] for path in COMMANDS} == set(preflight.COMMAND_NEEDS)


def test_serve_still_takes_the_old_spelling_with_a_warning(monkeypatch, capsys):
    import uvicorn

    from api import commands

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda *a, **kw: seen.setdefault("prefix", __import__("os").environ["CAFFEINE_TABLE_PREFIX"]))
    monkeypatch.setenv("CAFFEINE_TABLE_PREFIX", "before_")
    args = PARSER.parse_args(["serve", "--table-prefix", "old_"])
    assert commands.run(args) == 0
    assert seen["prefix"] == "old_"
    assert "--table-prefix is deprecated; say --prefix" in capsys.readouterr().err
    seen.clear()
    args = PARSER.parse_args(["serve", "--prefix", "new_"])
    commands.run(args)
    assert seen["prefix"] == "new_"


def test_version():
    done = run_cli("--version")
    assert done.returncode == 0
    assert re.fullmatch(r"caffeine \S+\n", done.stdout), done.stdout
