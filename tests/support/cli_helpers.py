"""Run the ``caffeine`` command line as a user does: a child process, its exit code and output.

Layer: test support. The child imports this checkout (``PYTHONPATH``) and inherits the test
process's ``CAFFEINE_*`` environment, plus whatever a test adds. Also: the ``caffeine ...``
examples of a help text (``example_commands``) and a fixture's cluster handed to a command run
in-process (``KeepOpen``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from support import ROOT


# What a stack trace looks like in a user's terminal: Python's header and frames, Java's frames.
TRACE_MARKERS = ("Traceback (most recent call last)", '  File "', "\tat org.", "\tat java.", "Caused by: ")


def cli_env(**settings) -> dict[str, str]:
    """Our environment with this checkout first on the path and ``CAFFEINE_<NAME>`` overrides."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    for name, value in settings.items():
        env[f"CAFFEINE_{name.upper()}"] = str(value)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """``caffeine ARGS...`` in a child process; text output captured."""
    return subprocess.run(
        [sys.executable, "-m", "caffeine.commands", *args], cwd=ROOT, env=env or cli_env(),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )


def assert_no_stack_trace(text: str) -> None:
    for marker in TRACE_MARKERS:
        assert marker not in text, f"a stack trace reached the user ({marker!r}):\n{text}"


def example_commands(epilog: str) -> list[list[str]]:
    """The ``caffeine ...`` invocations in an epilog, split into argv (comments, pipes and
    ``&&``/``||``/``&`` chains cut apart)."""
    found = []
    for line in epilog.splitlines():
        line = line.split("  #", 1)[0]
        for part in re.split(r"&&|\|\||;|\||&\s*$", line):
            words = shlex.split(part)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
                words = words[1:]  # VAR=value caffeine ...
            if words[:1] == ["caffeine"]:
                found.append(words[1:])
    return found


class KeepOpen:
    """The fixture's cluster, handed to the command, which closes what it connects."""

    def __init__(self, cluster):
        self._cluster = cluster

    def __getattr__(self, name):
        return getattr(self._cluster, name)

    def close(self):
        pass
