"""Sub-commands as plugins: the command line registers the entry points of the group
``caffeine.commands`` in the order of their numbers, from the checkout's ``pyproject.toml``
or the installed metadata, another distribution can add its own, and a missing installation
or a broken entry is a message, not a traceback."""

from __future__ import annotations

import sys
import tomllib

import pytest

from caffeine.commands import plugins
from caffeine.commands.cli import build_parser, main, subcommands
from support.cli_helpers import ROOT

# `caffeine --help`'s list: the library's commands, the demo, then the applications'.
HELP_ORDER = [
    "up", "down", "status", "spark", "tables", "inspect", "worker", "wait", "engine", "gc", "notify", "scan",
    "oracle", "dups", "demo", "crawl", "ingest", "migrate-urls", "testweb", "serve", "batch", "verify",
    "bench",
]


def top_level(parser) -> list[str]:
    return [path[0] for path, _ in subcommands(parser) if len(path) == 1]


def fake_distribution(site, name: str, version: str, entries: dict[str, str], modules: dict[str, str] | None = None):
    """An installed distribution as importlib.metadata finds it: a .dist-info beside its modules."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{key} = {value}\n" for key, value in entries.items())
    (info / "entry_points.txt").write_text(f"[{plugins.GROUP}]\n{lines}")
    for module, source in (modules or {}).items():
        (site / f"{module}.py").write_text(source)
    return site


def test_caffeine_help_lists_the_commands_in_the_order_of_the_entry_points():
    assert top_level(build_parser()) == HELP_ORDER
    names = [e.name for e in plugins.entries()]
    assert names == sorted(names, key=lambda name: int(name.split("-")[0]))


def test_a_checkout_takes_its_own_commands_from_its_pyproject(monkeypatch):
    # Whatever is installed (nothing, an earlier install, another checkout's): this code's table.
    monkeypatch.setattr(plugins, "installed_entries", lambda: [])
    table = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][plugins.GROUP]
    found = plugins.entries()
    assert {(e.name, e.value) for e in found} == set(table.items())
    assert all(e.own and e.source == str(ROOT / "pyproject.toml") for e in found)
    assert top_level(build_parser()) == HELP_ORDER


def test_an_installed_copy_takes_its_commands_from_the_installed_metadata(tmp_path, monkeypatch):
    site = fake_distribution(tmp_path / "site", "caffeine", "9.9", {"10-runtime": "caffeine.commands.runtime:register"})
    monkeypatch.syspath_prepend(site)  # found before the real installation: it stands for it
    found = plugins.entries(root=tmp_path / "site-packages")  # no pyproject.toml beside the package
    assert [(e.name, e.value, e.source, e.own) for e in found] == [
        ("10-runtime", "caffeine.commands.runtime:register", "caffeine 9.9", True)]


def test_another_distribution_adds_its_commands_where_its_number_says(tmp_path, monkeypatch, capsys):
    hello = (
        "def register(subparsers):\n"
        "    p = subparsers.add_parser('hello', help='greet')\n"
        "    p.set_defaults(func=lambda args: print('hello from a plugin'), needs_servers=lambda args: False)\n"
    )
    site = fake_distribution(tmp_path, "caffeine-hello", "1.0", {"85-hello": "caffeine_hello_plugin:register"},
                             {"caffeine_hello_plugin": hello})
    monkeypatch.syspath_prepend(site)
    monkeypatch.delitem(sys.modules, "caffeine_hello_plugin", raising=False)
    order = top_level(build_parser())
    assert order[order.index("serve"):order.index("serve") + 3] == ["serve", "hello", "batch"]
    assert main(["hello"]) == 0
    assert capsys.readouterr().out == "hello from a plugin\n"


def test_an_entry_that_cannot_be_loaded_is_named_without_a_traceback(tmp_path, monkeypatch, capsys):
    site = fake_distribution(tmp_path, "caffeine-broken", "0.1", {"85-broken": "no_such_module_23:register"})
    monkeypatch.syspath_prepend(site)
    assert main(["status"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("caffeine: the sub-commands of the entry point 85-broken = no_such_module_23:register "
                          "(caffeine-broken 0.1) cannot be registered: ModuleNotFoundError"), err
    assert "\n  try: " in err and "Traceback" not in err
    with pytest.raises(plugins.CommandsUnavailable):
        main(["--debug", "status"])


def test_neither_installed_nor_a_checkout_says_to_install(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plugins, "PROJECT_ROOT", tmp_path)
    monkeypatch.setattr(plugins, "installed_entries", lambda: [])
    assert main(["status"]) == 1
    err = capsys.readouterr().err
    assert "no sub-commands: the caffeine distribution is not installed" in err and "pip install" in err, err
