#!/usr/bin/env python3
"""Where a JVM's CPU went, by thread group, from /proc: GC, JIT and native time included.

JFR's execution samples (``jfr_hot.py``) see Java threads running Java code only: the
collector's threads, the JIT compilers and time inside system calls (a WAL sync's write)
are invisible there. The kernel's per-thread counters see all of it. This reads
``/proc/<pid>/task/*/{comm,stat}`` twice and prints each thread group's share of the CPU the
process used in between (names with their numbers folded, as the JVM names its native
threads: ``GC Thread#N``, ``G1 Conc#N``, ``C2 CompilerThreN``, ``RpcServer.defaN``).

    python3 bench/jvm_threads.py <pid> [--seconds 60]

Contract: ``snapshot(pid)`` returns {tid: (group, cpu_seconds)}; ``by_group(before, after)``
the CPU seconds per group between two snapshots (threads born in between count from zero,
threads that died in between are lost: a few short-lived ones at most).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections import Counter
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def group_of(comm: str) -> str:
    """A thread's name with its digits folded, so one pool is one line."""
    return re.sub(r"\d+", "N", comm.strip()) or "?"


def snapshot(pid: int) -> dict[int, tuple[str, float]]:
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            comm = (task / "comm").read_text()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # exited while we looked
        out[int(task.name)] = (group_of(comm), (int(fields[11]) + int(fields[12])) / _TICK)
    return out


def by_group(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> Counter:
    used: Counter = Counter()
    for tid, (group, cpu) in after.items():
        used[group] += cpu - before.get(tid, (group, 0.0))[1]
    return used


def report(used: Counter, top: int = 20) -> str:
    total = sum(used.values()) or 1.0
    lines = [f"{total:.1f} CPU s in all"]
    for group, cpu in used.most_common(top):
        lines.append(f"  {100 * cpu / total:5.1f}%  {cpu:7.1f} s  {group}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pid", type=int)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    before = snapshot(args.pid)
    time.sleep(args.seconds)
    print(report(by_group(before, snapshot(args.pid)), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
