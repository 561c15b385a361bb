"""Errors of the local-HBase runtime.

Layer: runtime. A leaf within it. Messages are written for a person at a terminal: they say
which piece failed, why if known, and where to look (log file, last log lines).
"""

from __future__ import annotations

from caffeine.errors import CaffeineError


class LocalHBaseError(CaffeineError):
    """The local HBase (or one of its Thrift servers) could not be set up, started or stopped."""


class PortInUse(LocalHBaseError):
    """A port the local HBase needs is already held by a process that is not ours.

    ``conflicts`` lists ``(label, port, holder)`` with ``holder`` a human description of the
    process (pid and command line) when it could be found.
    """

    def __init__(self, message: str, conflicts: list[tuple[str, int, str]]):
        super().__init__(message)
        self.conflicts = conflicts
