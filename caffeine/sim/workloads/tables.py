"""Tables: transfers between accounts kept in two tables, and GC of some tables or all.

Layer: simulation. Workload (clients use the public transaction API; GC is the library's).

Setup: 3-5 accounts of 100 in each of two tables, the first of each hot (most transfers
touch it), the others cold. Actors: 2-3 transfer clients (each transfer reads two accounts,
often one in each table, and writes both, so a transaction's primary is in one table and its
secondary in the other), a reader taking snapshots of every account, and two GC
runners, each round collecting every table (``caffeine gc``) or some of them (``caffeine gc
--table ...``).

Now and then a client dies right after a transfer's commit point (on purpose, besides the
nemesis's crashes): a committed transfer whose client dies there leaves its secondary locked;
GC of the primary's table alone must still settle that lock before it publishes the safe
point and deletes the commit record (``caffeine.percolator.gc``).

Invariants:
- every snapshot a reader completes sums to the total;
- after healing, a fresh reader resolves every leftover lock: none is left stuck (a lock no
  one can settle makes it wait until ``LockWaitTimeout``), and it sees the total;
- every transfer is atomic and its client's claim is true (``Ledger``).
"""

from __future__ import annotations

from caffeine.errors import CaffeineError
from caffeine.percolator import CommitConflict, LockWaitTimeout
from caffeine.percolator import testing as steps
from caffeine.sim.workloads.common import (Ledger, TxnRecord, check_total, final_read, run_txn, spawn_clients,
                                           spawn_gc)

TABLES = ("acct_a", "acct_b")
COLUMN = "bal"
INITIAL = 100


class Tables:
    name = "tables"

    def __init__(self, sim) -> None:
        rng = sim.workload_rng
        self.sim = sim
        self.ledger = Ledger(sim)
        self.accounts = [(table, b"acct%d" % i) for table in TABLES for i in range(rng.randint(3, 5))]
        self.total = INITIAL * len(self.accounts)
        self.records: list[TxnRecord] = []
        setup = sim.cluster("setup")
        for table in TABLES:
            setup.create_table(table)
        with setup.begin() as txn:
            for table, row in self.accounts:
                txn.set(table, row, COLUMN, b"%d" % INITIAL)
        spawn_clients(sim, "xfer", [self._transfers(i, rng.randint(4, 8)) for i in range(rng.randint(2, 3))], rng)
        sim.client("reader", self._reader(rng.randint(1, 3)))
        for i in range(2):
            spawn_gc(sim, list(TABLES), rng, name=f"gc{i}", rounds=(3, 6), idle=(20, 120))

    def _transfers(self, who: int, count: int):
        rng = self.sim.workload_rng

        def body(cluster):
            for n in range(count):
                dies = rng.random() < 0.15
                a, b = self._pick(rng, across=dies)
                amount = rng.randint(1, 30)
                rec = TxnRecord(f"xfer{who}.{n}")
                self.records.append(rec)

                def transfer(txn, r, a=a, b=b, amount=amount):
                    balances = txn.get(a[0], a[1], COLUMN), txn.get(b[0], b[1], COLUMN)
                    r.reads += [((a[0], a[1], COLUMN), balances[0]), ((b[0], b[1], COLUMN), balances[1])]
                    if None in balances:
                        self.sim.violation(f"tables: {r.label} (start {txn.start_ts}) read no balance: {balances}")
                        return
                    for (table, row), value in ((a, int(balances[0]) - amount), (b, int(balances[1]) + amount)):
                        txn.set(table, row, COLUMN, b"%d" % value)
                        r.writes[(table, row, COLUMN)] = b"%d" % value

                if dies:
                    self._die_after_commit_point(cluster, rec, transfer)  # returns if nothing to commit
                    continue
                run_txn(self.sim, cluster, rec, transfer, style=rng.choice(("run", "with", "explicit")))
                self.sim.idle(rng.randint(0, 10))
        return body

    def _pick(self, rng, *, across: bool):
        """Two accounts for a transfer. Each table's first account is hot (most transfers
        start there), the others are cold; ``across``: a hot one (the primary) and a cold one
        of the other table, the cell a dying client leaves locked."""
        if across:
            table = rng.choice(TABLES)
            other = TABLES[1 - TABLES.index(table)]
            cold = [acct for acct in self.accounts if acct[0] == other and acct != (other, b"acct0")]
            return (table, b"acct0"), rng.choice(cold)
        if rng.random() < 0.6:
            a = (rng.choice(TABLES), b"acct0")
            return a, rng.choice([acct for acct in self.accounts if acct != a])
        a, b = rng.sample(self.accounts, 2)
        return a, b

    def _die_after_commit_point(self, cluster, rec: TxnRecord, transfer) -> None:
        """The client commits the transfer's primary and dies before its secondary: the
        transaction is committed, and its other cell stays locked until someone settles it.
        A conflict before the commit point is tried again (up to three attempts, each with a
        record of its own in ``rec.attempts``), as ``Cluster.run`` would."""
        rec.attempts = []
        for n in range(3):
            attempt = TxnRecord(f"{rec.label}#{n + 1}")
            rec.attempts.append(attempt)
            try:
                txn = cluster.begin()
            except CaffeineError as exc:
                attempt.claim, attempt.error = "aborted", f"begin: {type(exc).__name__}"
                return
            attempt.start_ts = txn.start_ts
            try:
                transfer(txn, attempt)
                if not attempt.writes:
                    attempt.claim = "aborted"
                    txn.rollback()
                    return
                steps.prewrite(txn)
            except CommitConflict as exc:  # before the commit point: nothing committed
                attempt.claim, attempt.error = "aborted", f"{type(exc).__name__}"
                self.sim.log(f"txn {attempt.describe()}")
                continue
            except CaffeineError as exc:
                attempt.error = f"{type(exc).__name__}: {exc}"[:200]
                break
            try:
                steps.commit_primary(txn)
            except CaffeineError as exc:  # it dies anyway: what landed is the ledger's to tell
                attempt.error = f"{type(exc).__name__}: {exc}"[:200]
            break
        self.sim.log(f"txn {rec.attempts[-1].describe()} dies after its commit point")
        self.sim.crash_current()

    def _reader(self, count: int):
        def body(cluster):
            for _ in range(count):
                self.sim.idle(self.sim.workload_rng.randint(1, 40))
                try:
                    with cluster.begin() as txn:
                        values = [txn.get(table, row, COLUMN) for table, row in self.accounts]
                        start_ts = txn.start_ts
                except CaffeineError as exc:
                    self.sim.log(f"snapshot failed: {type(exc).__name__}")
                    continue
                self._check_sum(f"snapshot at {start_ts}", values)
        return body

    def _check_sum(self, what: str, values) -> None:
        check_total(self.sim, "tables", what, values, self.total)

    def check(self) -> None:
        cells = [(table, row, COLUMN) for table, row in self.accounts]
        try:
            final = final_read(self.sim, self.sim.cluster("checker"), cells)
        except LockWaitTimeout as exc:
            self.sim.violation(f"tables: a lock is left stuck, no reader can settle it: {exc}")
        else:
            self._check_sum("final read", list(final.values()))
        for rec in self.records:
            for attempt in rec.attempts:
                commit_ts = self.ledger.settle(self.sim, attempt)
                self.ledger.check_atomic(self.sim, attempt, commit_ts)
