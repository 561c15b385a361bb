"""A transfer process that keeps a ledger: bank transfers precise enough to audit afterwards.

Layer: test support (a script, run as ``python3 tests/support/ledger_child.py ...``; public
``caffeine.percolator`` API only). Settings come from ``CAFFEINE_*`` variables.

Like ``tests/support/bank_child.py``, each transfer is one ``cluster.run(...)``: read two
distinct random accounts, move a random amount (at most the payer's balance), write both. In
the same transaction it writes a marker: row ``<id>`` of the ledger table, column ``transfer``,
value ``<payer> <payee> <amount>``, where ``<id>`` (``<tag>-<n>``) is unique per attempt of the
body. So an audit can tell, per transfer, whether it committed (its marker is there) and
whether it committed whole (both balance writes sit at the marker's commit_ts). With
``--notify`` the markers also set notifications, for an observer of the ledger
(``tests/support/ledger_observer.py``).

Output, one line each, flushed before the next step (the process, or HBase under it, may be
killed at any moment):

    READY
    P <id> <start_ts> <payer> <payer after> <payee> <payee after> <amount>
                                an attempt is about to commit: from here on it may have
    T <id> <commit_ts> <wall time>
                                that attempt committed, and was acknowledged to this client
    E <id> <error type> <message>
                                the transfer failed for good (after run()'s retries); its
                                last attempt did not commit or its outcome is unknown
                                (``CommitUnknown``, ``OutcomeUnknown``); continuing
    S <json>                    stdin closed: this client's storage counters (retries,
                                reconnects, unknown outcomes), the non-zero ones
    DONE <committed> <failed>   then stopped, after the transfer in progress

Any ``CaffeineError`` (storage, oracle, transaction) is reported and survived: the test kills
HBase under this process. Anything else is a bug: the process dies with a traceback.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import threading
import time

from caffeine.errors import CaffeineError
from caffeine.percolator import connect

COLUMN = "balance"
MARKER = "transfer"


def account(i: int) -> bytes:
    return b"acct-%04d" % i


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", required=True)
    p.add_argument("--ledger", required=True, help="table of the per-transfer markers")
    p.add_argument("--tag", required=True, help="prefix of this process's transfer ids")
    p.add_argument("--accounts", type=int, required=True)
    p.add_argument("--max-amount", type=int, default=10)
    p.add_argument("--notify", action="store_true",
                   help="markers set notifications (an observer watches the ledger's marker column)")
    args = p.parse_args(argv)
    rng = random.Random()
    accounts = [account(i) for i in range(args.accounts)]

    stop = threading.Event()

    def watch_stdin():
        sys.stdin.read()  # returns at end of input: the test closed our stdin
        stop.set()

    threading.Thread(target=watch_stdin, daemon=True).start()

    cluster = connect()
    if args.notify:
        cluster.observe_column(args.ledger, MARKER)
    print("READY", flush=True)

    attempts = 0
    last: dict[str, object] = {}

    def transfer(txn):
        nonlocal attempts
        attempts += 1
        tid = f"{args.tag}-{attempts}"
        last.update(id=tid, txn=txn)
        payer, payee = rng.sample(accounts, 2)
        a = int(txn.get(args.table, payer, COLUMN))
        b = int(txn.get(args.table, payee, COLUMN))
        amount = min(a, rng.randint(1, args.max_amount))
        if amount == 0:
            last.update(id=None)
            return False  # read-only: nothing to move, nothing to audit
        txn.set(args.table, payer, COLUMN, str(a - amount))
        txn.set(args.table, payee, COLUMN, str(b + amount))
        txn.set(args.ledger, tid, MARKER, f"{payer.decode()} {payee.decode()} {amount}")
        # Printed before run() commits, so every attempt that may commit is on record.
        print(f"P {tid} {txn.start_ts} {payer.decode()} {a - amount} {payee.decode()} {b + amount} {amount}",
              flush=True)
        return True

    committed = failed = 0
    while not stop.is_set():
        last.clear()
        try:
            moved = cluster.run(transfer)
        except CaffeineError as exc:
            failed += 1
            print(f"E {last.get('id') or '-'} {type(exc).__name__} {str(exc)[:200]!r}", flush=True)
            time.sleep(0.05)
            continue
        if moved:
            committed += 1
            print(f"T {last['id']} {last['txn'].commit_ts} {time.time():.6f}", flush=True)
    print("S " + json.dumps({k: v for k, v in cluster.stats.as_dict().items() if v}), flush=True)
    cluster.close()
    print(f"DONE {committed} {failed}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
