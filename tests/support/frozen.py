"""A process frozen with SIGSTOP for a ``with`` block: a GC pause or a VM stall, on purpose.

Layer: test support. ``Frozen(pid)`` stops the process on entering and continues it on leaving;
``all_threads_stopped(pid)`` reads every thread's state from ``/proc``.
"""

from __future__ import annotations

import os
import signal
import time


def thread_states(pid: int) -> list[str]:
    """The scheduler state letter of each thread of ``pid`` (``T`` or ``t`` once stopped)."""
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        except FileNotFoundError:  # the thread ended meanwhile
            continue
    return states


def all_threads_stopped(pid: int) -> bool:
    return all(state in "Tt" for state in thread_states(pid))


class Frozen:
    """A process stopped with SIGSTOP for the ``with`` block, continued after it.

    Entering returns only once every thread of the process is stopped: ``kill`` returns when
    the signal is queued, and the kernel then stops the threads one by one as each is
    scheduled, which on a loaded machine takes milliseconds during which the process still
    answers. Raises ``TimeoutError`` (after continuing the process) if it is not stopped
    within ``timeout_s``.
    """

    def __init__(self, pid: int, timeout_s: float = 10.0) -> None:
        self.pid, self.timeout_s = pid, timeout_s

    def __enter__(self) -> "Frozen":
        os.kill(self.pid, signal.SIGSTOP)
        deadline = time.monotonic() + self.timeout_s
        while not all_threads_stopped(self.pid):
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGCONT)
                raise TimeoutError(f"process {self.pid} not stopped {self.timeout_s:g}s after SIGSTOP: "
                                   f"thread states {sorted(thread_states(self.pid))}")
            time.sleep(0.0005)
        self.at = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        os.kill(self.pid, signal.SIGCONT)
