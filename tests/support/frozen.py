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
    """A process stopped with SIGSTOP for the ``with`` block, continued after it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> "Frozen":
        os.kill(self.pid, signal.SIGSTOP)
        self.at = time.monotonic()
        return self

    def __exit__(self, *exc) -> None:
        os.kill(self.pid, signal.SIGCONT)
