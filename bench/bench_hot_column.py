#!/usr/bin/env python3
"""Transactions on one busy column as its history grows: a commit's lock delete over every
version below it (as committed now) against an exact-version delete (as before).

Every transaction of a run reads one column of one row and writes it back (a counter, as
the inlinks observer keeps a popular page's), one after the other on one thread. Each
transaction writes a lock and its commit deletes it; HBase keeps deleted versions and their
markers until a major compaction, so with exact deletes every later check and snapshot read
of that column walks all of them, and behind a marker over every version at or below a
start_ts (``caffeine.percolator.steps.common.unlock_committed``) it skips them at once.

``column-wide``: the committer as it is. ``exact``: the same committer with
``unlock_committed`` swapped for an exact-version delete (``Delete``), in this process only.
Each mode has a row of its own; the modes alternate block by block (``--block``
transactions each) so both see the same machine, for ``--blocks`` blocks. Prints, per block:
the column's history so far (transactions committed to it), milliseconds per transaction,
and the region server's CPU microseconds per transaction (from /proc: the local runtime).

Usage (needs ``caffeine up``)::

    python3 bench/bench_hot_column.py [--block 250] [--blocks 8] [--committer coprocessor]

Tables live under a fresh ``bench_hot_<random>_`` prefix and are dropped at the end.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from caffeine.config import load_settings  # noqa: E402
from caffeine.percolator import connect  # noqa: E402
from caffeine.percolator.backends import cas  # noqa: E402
from caffeine.percolator.layout import LOCK  # noqa: E402
from caffeine.percolator.steps import server  # noqa: E402
from caffeine.storage import Delete  # noqa: E402
from caffeine.storage.hbase import HBaseStore  # noqa: E402
from proc_cpu import runtime_cpu_s  # noqa: E402

TABLE = "hot"
MODES = ("column-wide", "exact")
# The modules that call unlock_committed by name, each holding its own reference (the steps
# package's ``commit`` names the step function, so the module is taken from sys.modules).
_UNLOCKERS = (server, sys.modules["caffeine.percolator.steps.commit"], cas)


@contextmanager
def unlocking(mode: str):
    """Commits in this process delete locks as ``mode`` says, for the block's duration."""
    saved = [m.unlock_committed for m in _UNLOCKERS]
    if mode == "exact":
        for m in _UNLOCKERS:
            m.unlock_committed = lambda qual, start_ts: Delete(LOCK, qual, start_ts)
    try:
        yield
    finally:
        for m, original in zip(_UNLOCKERS, saved):
            m.unlock_committed = original


def block(cluster, row: bytes, n: int) -> float:
    """``n`` read-and-increment transactions on ``row``'s column; seconds taken."""
    started = time.perf_counter()
    for _ in range(n):
        with cluster.begin() as txn:
            value = txn.get(TABLE, row, "count")
            txn.set(TABLE, row, "count", str(int(value or b"0") + 1).encode())
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--block", type=int, default=250)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--committer", default="coprocessor", choices=("coprocessor", "thrift-cas"))
    args = parser.parse_args(argv)

    prefix = f"bench_hot_{uuid.uuid4().hex[:6]}_"
    settings = load_settings(table_prefix=prefix, committer=args.committer)
    rows = {mode: f"row-{mode}".encode() for mode in MODES}
    lines = []
    try:
        with connect(settings) as cluster:
            cluster.create_table(TABLE)
            with cluster.begin() as txn:  # connections, region, JIT: on a row of its own
                txn.set(TABLE, b"warm", "count", b"0")
            for b in range(args.blocks):
                for mode in (MODES if b % 2 == 0 else MODES[::-1]):
                    with unlocking(mode):
                        before = runtime_cpu_s(settings).get("hbase", 0.0)
                        seconds = block(cluster, rows[mode], args.block)
                        hbase_s = runtime_cpu_s(settings).get("hbase", 0.0) - before
                    lines.append((b, mode, (b + 1) * args.block, 1000 * seconds / args.block,
                                  1e6 * hbase_s / args.block))
                    print(f"block {b + 1}/{args.blocks} {mode}: {lines[-1][3]:.2f} ms/txn", file=sys.stderr)
    finally:
        store = HBaseStore(settings)
        for table in store.list_tables():  # this prefix's tables only
            store.drop_table(table)
        store.close()
    print("| block | transactions on the column | mode | ms per transaction | HBase CPU µs per transaction |")
    print("|--:|--:|---|--:|--:|")
    for b, mode, history, ms, hbase_us in lines:
        print(f"| {b + 1} | {history} | {mode} | {ms:.2f} | {hbase_us:.0f} |")
    last = {mode: [ms for b, m, _, ms, _ in lines if m == mode][-1] for mode in MODES}
    print(f"\nlast block, exact / column-wide: {last['exact'] / last['column-wide']:.2f}× the time per transaction")
    print("\nreproduce: python3 bench/bench_hot_column.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
