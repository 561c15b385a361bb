"""Sub-commands as plugins: the entry points of the group ``caffeine.commands``.

Layer: commands. Imports no application: every module that contributes sub-commands, this
package's own as well as the applications' (``crawler``, ``testweb``, ``api``, ``spark``) and
any other installed distribution's, is named by an entry point of the group
``caffeine.commands`` whose object is its ``register(subparsers)``. The command line loads
the entries it finds, so it knows none of them by name.

Order: an entry's name starts with its position, a number (``10-runtime``, ``70-crawler``):
``caffeine --help`` lists the sub-commands in the order of these numbers (then of the names;
a name without a number comes last). Caffeine's own use 10 to 90.

Where the entries come from: the installed distributions' metadata
(``importlib.metadata``), except that code run from a source checkout takes Caffeine's own
entries from the checkout's ``pyproject.toml``: a checkout that was never installed
(``python3 -m caffeine.commands``), or whose editable install predates a change of the table,
or that runs beside another checkout's install, still gets the commands its own code has.
Neither found: ``CommandsUnavailable`` says to install Caffeine.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

from caffeine.config import PROJECT_ROOT
from caffeine.errors import CaffeineError

GROUP = "caffeine.commands"
DISTRIBUTION = "caffeine"


class CommandsUnavailable(CaffeineError):
    """No sub-commands were found, or an entry point's could not be registered."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class Entry:
    """One entry point of the group, ``name = value``, and where it was found."""

    name: str  # "70-crawler": its position first
    value: str  # "crawler.commands:register"
    source: str  # the distribution that declares it ("caffeine 0.1.0"), or a pyproject.toml
    own: bool = False  # one of Caffeine's own

    def order(self) -> tuple:
        position = re.match(r"\d+", self.name)
        return (int(position[0]) if position else math.inf, self.name, self.source)

    def register(self, subparsers) -> None:
        try:
            EntryPoint(self.name, self.value, GROUP).load()(subparsers)
        except Exception as exc:
            raise CommandsUnavailable(
                f"the sub-commands of the entry point {self.name} = {self.value} ({self.source}) "
                f"cannot be registered: {type(exc).__name__}: {exc}",
                "install what it needs, or reinstall the distribution that declares it "
                "(a checkout: pip install -e .)",
            ) from exc


def _is_caffeine(distribution: str) -> bool:
    return re.sub(r"[-_.]+", "-", distribution).lower() == DISTRIBUTION


def checkout_entries(root: Path | None = None) -> list[Entry] | None:
    """Caffeine's own entries from the ``pyproject.toml`` of the checkout that holds the
    running code (``root``, by default the directory above the ``caffeine`` package); None
    when it runs from an installed copy (no such file beside it)."""
    path = (PROJECT_ROOT if root is None else root) / "pyproject.toml"
    if not path.is_file():
        return None
    project = tomllib.loads(path.read_text()).get("project", {})
    if not _is_caffeine(project.get("name", "")):
        return None
    table = project.get("entry-points", {}).get(GROUP, {})
    return [Entry(name, value, str(path), own=True) for name, value in table.items()]


def installed_entries() -> list[Entry]:
    """Every installed distribution's entries of the group."""
    found = []
    for ep in entry_points(group=GROUP):
        name = ep.dist.name if ep.dist is not None else "?"
        version = ep.dist.version if ep.dist is not None else "?"
        found.append(Entry(ep.name, ep.value, f"{name} {version}", own=_is_caffeine(name)))
    return found


def entries(root: Path | None = None) -> list[Entry]:
    """The entries to register, in order (see the module's docstring)."""
    installed = installed_entries()
    own = checkout_entries(root)
    if own is None:
        own = [e for e in installed if e.own]
    if not own:
        raise CommandsUnavailable(
            f"no sub-commands: the {DISTRIBUTION} distribution is not installed (no entry points "
            f"of the group {GROUP}), and this copy of it is not a source checkout",
            "install it: pip install caffeine, or pip install -e . in a checkout",
        )
    return sorted(own + [e for e in installed if not e.own], key=Entry.order)


def register_all(subparsers, root: Path | None = None) -> None:
    """Every entry's ``register(subparsers)``, in order."""
    for entry in entries(root):
        entry.register(subparsers)


__all__ = ["GROUP", "CommandsUnavailable", "Entry", "checkout_entries", "entries", "installed_entries", "register_all"]
