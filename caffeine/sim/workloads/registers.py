"""Registers: random reads and writes of a few keys, checked for snapshot isolation.

Layer: simulation. Workload (clients use the public transaction API).

Actors: 3-4 clients, each running 3-7 transactions of 1-4 operations (read or write a random
key; every written value is unique), through ``Cluster.run``, ``with cluster.begin()`` or an
explicit begin/commit/rollback; sometimes a GC runner. Each transaction's start_ts, reads
(with the value seen), writes and claimed outcome are recorded.

After healing, a fresh reader reads every key (resolving leftover locks), and is recorded too.
Unknown outcomes are settled from the ledger (a commit record on the primary). Checks:

- claims are true, and every transaction is atomic (``Ledger``);
- every read sees exactly the newest committed write with commit_ts below the reader's
  start_ts, or nothing if there is none: no read of aborted or uncommitted data (G1a), no
  intermediate value (G1b; each transaction writes a key once), no stale or future value;
- first committer wins: no two committed transactions that overlap in time wrote one key
  (lost update).
"""

from __future__ import annotations

from caffeine.sim.workloads.common import Ledger, TxnRecord, final_read, run_txn, spawn_clients, spawn_gc

TABLE = "reg"
COLUMN = "v"


class Registers:
    name = "registers"

    def __init__(self, sim) -> None:
        rng = sim.workload_rng
        self.sim = sim
        self.ledger = Ledger(sim)
        self.keys = [b"k%d" % i for i in range(rng.randint(2, 5))]
        self.records: list[TxnRecord] = []
        sim.cluster("setup").create_table(TABLE)
        spawn_clients(sim, "c", [self._client(i, rng.randint(3, 7)) for i in range(rng.randint(3, 4))], rng)
        if rng.random() < 0.5:
            spawn_gc(sim, [TABLE], rng)

    def _client(self, who: int, count: int):
        rng = self.sim.workload_rng

        def body(cluster):
            for n in range(count):
                ops = []
                for _ in range(rng.randint(1, 4)):
                    key = rng.choice(self.keys)
                    ops.append(("w", key) if rng.random() < 0.5 else ("r", key))
                style = rng.choice(("run", "with", "explicit"))
                rec = TxnRecord(f"c{who}.{n}")
                self.records.append(rec)

                def txn_body(txn, r, ops=ops, label=rec.label):
                    for op, key in ops:
                        cell = (TABLE, key, COLUMN)
                        if op == "r":
                            value = txn.get(TABLE, key, COLUMN)
                            if cell not in r.writes:  # own writes are not snapshot reads
                                r.reads.append((cell, value))
                        elif cell not in r.writes:
                            value = f"{r.label}:{key.decode()}".encode()
                            txn.set(TABLE, key, COLUMN, value)
                            r.writes[cell] = value

                run_txn(self.sim, cluster, rec, txn_body, style=style)
        return body

    def check(self) -> None:
        sim = self.sim
        checker = sim.cluster("checker")
        cells = [(TABLE, k, COLUMN) for k in self.keys]
        final = TxnRecord("final")
        with checker.begin() as txn:
            final.start_ts = txn.start_ts
            final.reads = [(cell, txn.get(*cell)) for cell in cells]
        final.claim = "committed"
        attempts = [a for rec in self.records for a in rec.attempts if a.start_ts is not None]
        committed: dict[str, int] = {}
        writer_of: dict[tuple, TxnRecord] = {}
        for a in attempts:
            commit_ts = self.ledger.settle(sim, a)
            self.ledger.check_atomic(sim, a, commit_ts)
            if commit_ts is not None:
                committed[a.label] = commit_ts
            for cell, value in a.writes.items():
                writer_of[(cell, value)] = a
        # Per key, the committed writes in commit order.
        history: dict[tuple, list[tuple[int, TxnRecord]]] = {}
        for a in attempts:
            if a.label in committed:
                for cell in a.writes:
                    history.setdefault(cell, []).append((committed[a.label], a))
        for versions in history.values():
            versions.sort(key=lambda v: v[0])
        for reader in [*attempts, final]:
            for cell, value in reader.reads:
                visible = [a for ts, a in history.get(cell, []) if ts < reader.start_ts]
                expected = visible[-1].writes[cell] if visible else None
                if value == expected:
                    continue
                writer = writer_of.get((cell, value))
                if value is not None and writer is None:
                    why = "a value nobody wrote"
                elif writer is not None and writer.label not in committed:
                    why = f"G1a: the write of {writer.label}, which did not commit ({writer.claim})"
                elif writer is not None and committed[writer.label] > reader.start_ts:
                    why = f"a write that committed later, at {committed[writer.label]}"
                else:
                    why = "a stale value: a newer committed write below start_ts is missing"
                sim.violation(f"registers: {reader.label} (start {reader.start_ts}) read {cell[1].decode()}={value!r}, "
                              f"expected {expected!r}: {why}")
        for cell, versions in history.items():
            for (ts_a, a), (ts_b, b) in zip(versions, versions[1:]):
                if b.start_ts < ts_a:
                    sim.violation(f"registers: lost update on {cell[1].decode()}: {a.label} [{a.start_ts}, {ts_a}] and "
                                  f"{b.label} [{b.start_ts}, {ts_b}] overlap and both committed")
