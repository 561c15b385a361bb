"""A client process for the bank test: random transfers between accounts until told to stop.

Layer: test support (a script, run as ``python3 tests/support/bank_child.py ...``; public
``caffeine.percolator`` API only). Settings come from ``CAFFEINE_*`` variables (the test passes
its session's table prefix and fast failure detection).

Each transfer is one ``cluster.run(...)``: read two distinct random accounts, move a random
amount (at most the payer's balance) from one to the other, write both. Output, one line each,
flushed (the process may be SIGKILLed at any moment):

    READY                       connected, about to start
    T <wall time>               a transfer committed (its commit point passed)
    E <error type> <message>    a transfer failed for good (after run()'s retries); continuing
    DONE <committed> <failed>   stdin closed: stopped after the transfer in progress

Errors of Caffeine's own tree (storage, oracle, transaction) are reported and survived: the
test restarts the Thrift2 server under this process. Anything else is a bug and kills the
process with a traceback, which the test reports.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time

from caffeine.errors import CaffeineError
from caffeine.percolator import connect

COLUMN = "balance"


def account(i: int) -> bytes:
    return b"acct-%04d" % i


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", required=True)
    p.add_argument("--accounts", type=int, required=True)
    p.add_argument("--max-amount", type=int, default=10)
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args(argv)
    rng = random.Random(args.seed)
    accounts = [account(i) for i in range(args.accounts)]

    stop = threading.Event()

    def watch_stdin():
        sys.stdin.read()  # returns at end of input: the test closed our stdin
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    cluster = connect()
    print("READY", flush=True)

    def transfer(txn):
        payer, payee = rng.sample(accounts, 2)
        a = int(txn.get(args.table, payer, COLUMN))
        b = int(txn.get(args.table, payee, COLUMN))
        amount = min(a, rng.randint(1, args.max_amount))
        if amount == 0:
            return False  # read-only: nothing to move
        txn.set(args.table, payer, COLUMN, str(a - amount))
        txn.set(args.table, payee, COLUMN, str(b + amount))
        return True

    committed = failed = 0
    while not stop.is_set():
        try:
            moved = cluster.run(transfer)
        except CaffeineError as exc:
            failed += 1
            print(f"E {type(exc).__name__} {str(exc)[:200]!r}", flush=True)
            time.sleep(0.05)
            continue
        if moved:
            committed += 1
            print(f"T {time.time():.6f}", flush=True)
    cluster.close()
    print(f"DONE {committed} {failed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
