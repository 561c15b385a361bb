"""The bank the crash and fault tests move money in, and what its transfer processes print.

Layer: test support. ``ACCOUNTS`` accounts (rows ``acct-0000``, ..., named as
``bank_child.py`` and ``ledger_child.py`` name them) hold ``START_BALANCE`` each in column
``COLUMN``; every transfer keeps the total at ``TOTAL``. ``open_bank`` creates and fills a
bank table; ``Ledger`` and ``follow`` gather the lines ``bank_child.py`` prints (``READY``,
``T <wall time>``, ``E <error>``, ``DONE <committed> <failed>``), one reader thread per child.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from support.child_helpers import Child, follow_lines

ACCOUNTS = 20
START_BALANCE = 100
TOTAL = ACCOUNTS * START_BALANCE
COLUMN = "balance"


def account(i: int) -> bytes:
    return b"acct-%04d" % i  # as bank_child.py and ledger_child.py name them


def open_bank(cluster, table: str) -> str:
    """Create ``table`` and give each of its ``ACCOUNTS`` accounts ``START_BALANCE``."""
    cluster.create_table(table)
    with cluster.begin() as txn:
        for i in range(ACCOUNTS):
            txn.set(table, account(i), COLUMN, str(START_BALANCE))
    return table


@dataclass
class Ledger:
    """What the children printed, gathered by one reader thread per child."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    commits: list[float] = field(default_factory=list)  # wall time of each committed transfer
    errors: list[str] = field(default_factory=list)
    done: list[tuple[int, int]] = field(default_factory=list)  # (committed, failed) per clean stop
    by_process: dict[str, int] = field(default_factory=dict)  # committed transfers per process

    def count(self, after: float = 0.0, before: float = float("inf")) -> int:
        with self.lock:
            return sum(1 for t in self.commits if after < t < before)


def follow(child: Child, ledger: Ledger, ready: threading.Event) -> threading.Thread:
    def on_line(kind: str, rest: str) -> None:
        if kind == "T":
            ledger.commits.append(float(rest))
            ledger.by_process[child.name] = ledger.by_process.get(child.name, 0) + 1
        elif kind == "E":
            ledger.errors.append(rest)
        elif kind == "DONE":
            committed, failed = rest.split()
            ledger.done.append((int(committed), int(failed)))

    return follow_lines(child, on_line, ready, ledger.lock)
