"""Bank: concurrent transfers between accounts; every snapshot sums to the total.

Layer: simulation. Workload (clients use the public transaction API).

Setup: 3-6 accounts of 100 each. Actors: 2-3 transfer clients (each transfer reads two
balances and writes both, through ``Cluster.run``, ``with cluster.begin()`` or an explicit
begin/commit/rollback), a reader taking snapshots of every account in one transaction, and
sometimes a GC runner.

Invariants:
- every snapshot a reader completes sums to the total (a torn snapshot, a half-committed
  transfer or a lost update shows here);
- after healing, a fresh reader (which resolves every leftover lock) sees the total;
- every transfer is atomic and its client's claim is true (``Ledger``).
"""

from __future__ import annotations

from caffeine.errors import CaffeineError
from caffeine.sim.workloads.common import (Ledger, TxnRecord, check_total, final_read, run_txn, spawn_clients,
                                           spawn_gc)

TABLE = "bank"
COLUMN = "bal"
INITIAL = 100


class _Skip(Exception):
    """A transfer that read a missing balance: reported, then abandoned."""


class Bank:
    name = "bank"

    def __init__(self, sim) -> None:
        rng = sim.workload_rng
        self.sim = sim
        self.ledger = Ledger(sim)
        self.accounts = [b"acct%d" % i for i in range(rng.randint(3, 6))]
        self.total = INITIAL * len(self.accounts)
        self.records: list[TxnRecord] = []
        setup = sim.cluster("setup")
        setup.create_table(TABLE)
        with setup.begin() as txn:
            for account in self.accounts:
                txn.set(TABLE, account, COLUMN, b"%d" % INITIAL)
        spawn_clients(sim, "xfer", [self._transfers(i, rng.randint(3, 7)) for i in range(rng.randint(2, 3))], rng)
        sim.client("reader", self._reader(rng.randint(2, 5)))
        if rng.random() < 0.5:
            spawn_gc(sim, [TABLE], rng)

    def _transfers(self, who: int, count: int):
        rng = self.sim.workload_rng

        def body(cluster):
            for n in range(count):
                a, b = rng.sample(self.accounts, 2)
                amount = rng.randint(1, 30)
                style = rng.choice(("run", "with", "explicit"))
                rec = TxnRecord(f"xfer{who}.{n}")
                self.records.append(rec)

                def transfer(txn, r, a=a, b=b, amount=amount):
                    balances = txn.get_row(TABLE, a, [COLUMN])[COLUMN], txn.get(TABLE, b, COLUMN)
                    r.reads += [((TABLE, a, COLUMN), balances[0]), ((TABLE, b, COLUMN), balances[1])]
                    if None in balances:
                        self.sim.violation(f"bank: {r.label} (start {txn.start_ts}) read no balance: "
                                           f"{a.decode()}={balances[0]!r} {b.decode()}={balances[1]!r}")
                        raise _Skip()
                    new_a, new_b = int(balances[0]) - amount, int(balances[1]) + amount
                    txn.set(TABLE, a, COLUMN, b"%d" % new_a)
                    txn.set(TABLE, b, COLUMN, b"%d" % new_b)
                    r.writes[(TABLE, a, COLUMN)] = b"%d" % new_a
                    r.writes[(TABLE, b, COLUMN)] = b"%d" % new_b

                try:
                    run_txn(self.sim, cluster, rec, transfer, style=style)
                except _Skip:
                    pass  # reported; the transfer is abandoned (the actor's thread unwinds it)
        return body

    def _reader(self, count: int):
        def body(cluster):
            for _ in range(count):
                self.sim.idle(self.sim.workload_rng.randint(1, 30))
                try:
                    with cluster.begin() as txn:
                        if self.sim.workload_rng.random() < 0.5:
                            rows = txn.get_rows(TABLE, self.accounts, [COLUMN])
                            values = [rows[a][COLUMN] for a in self.accounts]
                        else:
                            values = [txn.get(TABLE, a, COLUMN) for a in self.accounts]
                        start_ts = txn.start_ts
                except CaffeineError as exc:
                    self.sim.log(f"snapshot failed: {type(exc).__name__}")
                    continue
                self._check_sum(f"snapshot at {start_ts}", values)
        return body

    def _check_sum(self, what: str, values) -> None:
        check_total(self.sim, "bank", what, values, self.total)

    def check(self) -> None:
        checker = self.sim.cluster("checker")
        final = final_read(self.sim, checker, [(TABLE, a, COLUMN) for a in self.accounts])
        self._check_sum("final read", list(final.values()))
        for rec in self.records:
            for attempt in rec.attempts:
                commit_ts = self.ledger.settle(self.sim, attempt)
                self.ledger.check_atomic(self.sim, attempt, commit_ts)
