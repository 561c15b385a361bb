"""Observer worker processes: ``caffeine worker --app tests/support/<app> --threads N``.

Layer: test support. ``tests/faults/conftest.py``'s ``workers`` fixture starts them
(``workers("fault_apps.py:tally", env)``) and stops every one still running at teardown. A
worker prints nothing a test reads; its stderr goes to a file (under faults a worker logs a
warning per failed call, enough to fill a pipe nobody reads and stall it), kept for failure
messages.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

from support import ROOT

APPS = "tests/support"  # where the applications are, relative to the checkout (the workers' cwd)


class WorkerProcess:
    """One ``caffeine worker`` process running an application of ``tests/support``."""

    def __init__(self, app: str, env: dict[str, str], threads: int = 4) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "caffeine.commands", "worker", "--app", f"{APPS}/{app}", "--threads", str(threads)],
            cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def stderr_text(self, limit: int = 4000) -> str:
        self._stderr.seek(0)
        return self._stderr.read().decode("utf-8", "replace")[-limit:]

    def close(self) -> None:
        self._stderr.close()

    def alive_or_fail(self, what: str = "") -> None:
        """Fail, with its stderr, if the worker has exited."""
        if self.proc.poll() is not None:
            raise AssertionError(f"{what or f'worker {self.pid}'} exited with code {self.proc.returncode}:\n"
                                 f"{self.stderr_text()}")


def stop_workers(workers: list[WorkerProcess], timeout_s: float = 30.0) -> None:
    """SIGTERM to every running worker (they finish their runs and deregister), then wait;
    SIGKILL one that has not stopped after ``timeout_s``."""
    for worker in workers:
        if worker.proc.poll() is None:
            worker.proc.terminate()
    for worker in workers:
        try:
            worker.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            worker.proc.kill()
            worker.proc.wait()
