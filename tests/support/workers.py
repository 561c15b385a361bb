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

from support.child_helpers import LoggedProcess

APPS = "tests/support"  # where the applications are, relative to the checkout (the workers' cwd)


class WorkerProcess(LoggedProcess):
    """One ``caffeine worker`` process running an application of ``tests/support``."""

    def __init__(self, app: str | None, env: dict[str, str], threads: int = 4) -> None:
        """``app``: ``<module>.py:<attribute>`` of ``tests/support``; None: the indexing application."""
        chosen = ["--app", f"{APPS}/{app}"] if app else []
        super().__init__(
            [sys.executable, "-m", "caffeine.commands", "worker", *chosen, "--threads", str(threads)],
            env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        )

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
