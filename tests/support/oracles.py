"""Timestamp oracle processes for tests: ``caffeine oracle`` in a subprocess, its stderr
followed line by line, stopped with real signals.

Layer: test support. Each test gives its oracles a table prefix of its own (inside the
session's, so the session's clean-up drops the tables) and ports of their own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

BLOCK_MS = 1000  # short blocks, so a take-over after SIGKILL waits only ~1.5 s for the lease


class OracleProcess:
    """``caffeine oracle`` in a subprocess; stderr collected line by line."""

    def __init__(self, prefix: str, port: int, block_ms: int = BLOCK_MS, standby: bool = False):
        self.port = port
        env = dict(os.environ, CAFFEINE_TABLE_PREFIX=prefix)
        args = ["oracle", "--port", str(port), "--block-ms", str(block_ms)] + (["--standby"] if standby else [])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "caffeine.commands", *args],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env, text=True,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, timeout: float = 60.0) -> "OracleProcess":
        """Until a line of its stderr contains ``text``; fails if it exits or times out first."""
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            if self.proc.poll() is not None:
                self._reader.join(5)
                if any(text in line for line in self.lines):
                    break
                raise AssertionError(f"oracle exited with {self.proc.returncode}:\n{self.output}")
            if time.monotonic() > deadline:
                raise AssertionError(f"oracle did not say {text!r} in {timeout} s:\n{self.output}")
            time.sleep(0.02)
        return self

    def wait_listening(self, timeout: float = 60.0) -> "OracleProcess":
        """Until it serves (the line with its first timestamp)."""
        return self.wait_for("first timestamp", timeout)

    def signal(self, sig) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(30)
        self._reader.join(5)
        return code

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)
