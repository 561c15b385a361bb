"""Client processes for crash and invariant tests: start, read their lines, SIGKILL them.

Layer: test support. Children are ``python3 tests/support/<script>.py`` processes configured
through ``CAFFEINE_*`` environment variables (the session's table prefix and fast
failure-detection settings), talking to the same HBase and the same real timestamp oracle as
the test process. ``tests/faults/conftest.py``'s ``children`` fixture starts them and kills
what is left at teardown; ``wait_started``, ``alive_or_fail``, ``run_for`` and
``stop_cleanly`` are the steps every long run takes with them.
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterable

import pytest

from support import ROOT

SCRIPTS = Path(__file__).resolve().parent

# Dead owners are detected within about 2 s: a lock's TTL, the owners' heartbeat and how
# long a silent owner is still presumed alive.
FAST = {"lock_ttl_ms": 1500, "owner_grace_ms": 2000, "heartbeat_interval_ms": 500}


def child_env(settings, **extra) -> dict[str, str]:
    """The environment of a child: ours, plus the session's prefix and fast detection."""
    env = dict(os.environ)
    env["CAFFEINE_TABLE_PREFIX"] = settings.table_prefix
    for name, value in {**FAST, **extra}.items():
        env[f"CAFFEINE_{name.upper()}"] = str(value)
    return env


def fast_settings(settings, **extra):
    """The test process's own settings, judging others' locks exactly as the children do."""
    return settings.model_copy(update={**FAST, "lock_wait_timeout_s": 30.0, **extra})


def require_oracle(settings) -> None:
    """Skip (fail under CI) when no timestamp oracle address (the oracle, its standby) accepts
    connections."""
    errors = []
    for host, port in settings.oracle_endpoints:
        try:
            socket.create_connection((host, port), timeout=2).close()
            return
        except OSError as exc:
            errors.append(f"{host}:{port}: {exc}")
    message = (f"no timestamp oracle is reachable ({'; '.join(errors)}); start it with `caffeine up` "
               "or `python3 -m caffeine.oracle`")
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


class LoggedProcess:
    """A process started in the checkout whose stderr goes to a temporary file, read back for
    failure messages (a pipe nobody reads would fill and stall it)."""

    def __init__(self, argv: list[str], env: dict[str, str], **popen) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stderr=self._stderr, **popen)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self, limit: int = 4000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-limit:]


class Child(LoggedProcess):
    """One child process; stdout is read line by line, stderr goes to a temporary file."""

    def __init__(self, script: str, args: list[str], env: dict[str, str], *, name: str = "") -> None:
        self.name = name or script
        super().__init__([sys.executable, str(SCRIPTS / script), *args], env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self.proc.stdout, selectors.EVENT_READ)
        self._buffer = b""

    def read_line(self, timeout_s: float) -> str | None:
        """The next stdout line (without newline); None at end of output. Raises on timeout."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.name} (pid {self.pid}) printed no line in {timeout_s:.0f}s; "
                                   f"stderr:\n{self.stderr_text()}")
            if not self._selector.select(left):
                continue
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                if self._buffer:
                    line, self._buffer = self._buffer, b""
                    return line.decode()
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def expect(self, word: str, timeout_s: float = 90.0) -> list[str]:
        """Wait for a line starting with ``word``; its remaining fields."""
        line = self.read_line(timeout_s)
        if line is None or not line.startswith(word):
            self.proc.wait(timeout=10)
            raise AssertionError(f"{self.name} (pid {self.pid}, exit {self.proc.returncode}) printed "
                                 f"{line!r}, expected {word}; stderr:\n{self.stderr_text()}")
        return line.split()[1:]

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode() + b"\n")
        self.proc.stdin.flush()

    def sigkill(self) -> None:
        """SIGKILL, then reap: when this returns the process is gone (no exit handler ran)."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)

    def close(self) -> None:
        """Kill if still running (test teardown) and release the pipes."""
        try:
            self.sigkill()
        finally:
            self._selector.close()
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            self._stderr.close()


def wait_started(child: Child, ready: threading.Event, timeout_s: float = 90.0) -> None:
    """Wait until ``ready`` is set (the child said READY); fail with its stderr otherwise."""
    if not ready.wait(timeout_s):
        raise AssertionError(f"{child.name} did not start; stderr:\n{child.stderr_text()}")


def alive_or_fail(children: Iterable[Child]) -> None:
    """Fail, with its stderr, if any of ``children`` has exited."""
    for child in children:
        code = child.proc.poll()
        if code is not None:
            raise AssertionError(f"{child.name} exited with code {code}:\n{child.stderr_text()}")


def run_for(seconds: float, check: Callable[[], None]) -> None:
    """Let a run go on for ``seconds``, calling ``check`` (which raises on trouble) every 0.2 s."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        check()
        time.sleep(0.2)


def stop_cleanly(children: Iterable[Child], within_s: float = 90.0) -> None:
    """A clean stop: end of input to every running child (it finishes the transfer in progress,
    closes its cluster and says DONE), then wait up to ``within_s`` for all of them. One that
    does not stop in time is left to the ``children`` fixture, which kills it at teardown."""
    children = list(children)
    for child in children:
        if child.proc.poll() is None:
            child.proc.stdin.close()
    stop_by = time.monotonic() + within_s
    for child in children:
        try:
            child.proc.wait(timeout=max(0.1, stop_by - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass


def follow_lines(child: "Child", on_line: Callable[[str, str], None], ready: threading.Event,
                 lock: threading.Lock) -> threading.Thread:
    """One reader thread for ``child``: ``on_line(kind, rest)`` under ``lock`` for each line it
    prints (``kind`` the first word), until it closes its output; sets ``ready`` at ``READY``."""
    def run():
        while True:
            try:
                line = child.read_line(timeout_s=600)
            except (TimeoutError, OSError, ValueError):
                return
            if line is None:
                return
            kind, _, rest = line.partition(" ")
            with lock:
                on_line(kind, rest)
            if kind == "READY":
                ready.set()

    thread = threading.Thread(target=run, name=f"follow-{child.name}", daemon=True)
    thread.start()
    return thread
