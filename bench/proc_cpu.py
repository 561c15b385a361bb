"""CPU time of this machine's processes, for the benchmarks' "where the time went" lines.

Linux only (``/proc``). The local runtime's pieces are found by the pid files ``caffeine up``
writes; a piece that is not running locally (a remote cluster) is simply left out.
"""

from __future__ import annotations

import os
from pathlib import Path

RUNTIME_PIECES = ("hbase", "thrift1", "thrift2", "oracle")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU time so far of a process and its living children (a server that
    forks workers, such as ``caffeine serve --workers N``)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return cpu_seconds(pid) + sum(tree_cpu_seconds(int(child)) for child in children)


def runtime_cpu_s(settings) -> dict[str, float]:
    """CPU seconds used so far by each local runtime process, by piece name."""
    from caffeine.runtime.home import Layout

    layout = Layout.from_settings(settings)
    out = {}
    for piece in RUNTIME_PIECES:
        try:
            out[piece] = cpu_seconds(int(layout.pid_file(piece).read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            continue
    return out
