"""A client process for crash tests: writes one multi-row transaction and stops at a chosen step.

Layer: test support (a script, run as ``python3 tests/support/txn_child.py ...``; uses only the
public ``caffeine.percolator`` API plus, where a step finer than the public ones is needed, the
transaction's own row-level step methods).

The process connects with ``connect()``, so every setting comes from ``CAFFEINE_*`` variables:
the test passes the session's ``CAFFEINE_TABLE_PREFIX`` and small ``CAFFEINE_LOCK_TTL_MS`` /
``CAFFEINE_OWNER_GRACE_MS`` / ``CAFFEINE_HEARTBEAT_INTERVAL_MS``. It reads every row (a real
read-modify-write), writes ``<value-prefix><row>`` to ``--column`` of each, the first row
being the primary, and runs the commit up to ``--stop``:

    mid-prewrite   the primary's row and the first secondary locked, the others not
    prewrite       every row locked (``testing.prewrite(txn)``)
    primary        ... and the primary committed: the commit point (``testing.commit_primary(txn)``)
    secondary      ... and exactly one secondary (the first) committed
    none           nothing: the whole commit is left to the ``commit`` command below

Then it prints ``READY <start_ts> <commit_ts or ->`` (flushed) and waits for a line on
stdin; the crash tests SIGKILL it there. On ``commit`` it finishes the commit and prints
``COMMITTED <commit_ts>`` or ``ROLLED_BACK <reason>``; on end of input it exits without
touching anything. ``--sleep-before-write S`` spends S seconds between the reads and the
writes (a slow but live transaction).
"""

from __future__ import annotations

import argparse
import sys
import time

from caffeine.percolator import testing as txn_steps
from caffeine.percolator import TransactionRolledBack, connect
from caffeine.percolator.testing import commit_row, prewrite_rows

STOPS = ("mid-prewrite", "prewrite", "primary", "secondary", "none")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", required=True)
    p.add_argument("--rows", required=True, help="comma-separated row keys; the first is the primary")
    p.add_argument("--column", default="v")
    p.add_argument("--value-prefix", default="new:")
    p.add_argument("--stop", choices=STOPS, required=True)
    p.add_argument("--sleep-before-write", type=float, default=0.0)
    args = p.parse_args(argv)
    rows = [r.encode() for r in args.rows.split(",")]
    if len(rows) < 2 and args.stop in ("mid-prewrite", "secondary"):
        p.error(f"--stop {args.stop} needs at least two rows")

    cluster = connect()
    txn = cluster.begin()
    for row in rows:
        txn.get(args.table, row, args.column)
    if args.sleep_before_write:
        time.sleep(args.sleep_before_write)
    for row in rows:
        txn.set(args.table, row, args.column, args.value_prefix.encode() + row)

    primary_key = (args.table, rows[0])
    first_secondary = (args.table, rows[1]) if len(rows) > 1 else None
    if args.stop == "mid-prewrite":
        # prewrite() locks the primary's row first, then the others in parallel; a crash
        # while they are in flight leaves any subset of them locked. Lock exactly one.
        prewrite_rows(txn, [primary_key])
        prewrite_rows(txn, [first_secondary])
    elif args.stop in ("prewrite", "primary", "secondary"):
        txn_steps.prewrite(txn)
    if args.stop in ("primary", "secondary"):
        txn_steps.commit_primary(txn)
    if args.stop == "secondary":
        # commit_secondaries() commits all the others in parallel; commit just one.
        commit_row(txn, first_secondary, txn.commit_ts)

    print(f"READY {txn.start_ts} {txn.commit_ts if txn.commit_ts is not None else '-'}", flush=True)
    command = sys.stdin.readline().strip()
    if command != "commit":
        return 0  # end of input: leave everything as it is (the test decides what happens)
    if args.stop == "mid-prewrite":
        raise SystemExit("commit after mid-prewrite is not supported")
    try:
        if txn.commit_ts is None:
            commit_ts = txn.commit()  # the remaining steps: prewrite (if needed), primary, secondaries
        else:
            txn_steps.commit_secondaries(txn)
            commit_ts = txn.commit_ts
    except TransactionRolledBack as exc:
        print(f"ROLLED_BACK {exc.reason}", flush=True)
        return 0
    print(f"COMMITTED {commit_ts}", flush=True)
    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
