"""Backfill: ``caffeine notify`` re-runs an observer over old rows while writers and workers run,
and the observer's work after its commit fails now and then.

Layer: simulation. Workload (clients and observers use the public API; the backfill is
``caffeine.ops.backfill``, what ``caffeine notify`` runs; workers are real ``Worker`` objects
driven one notification at a time, as in ``chain``).

Observer PUB (strong, on ``v``, with ``redo``) commits ``pub`` = ``<seq>|<code>|<value of v>``,
where ``code`` is the observer's code version when it runs and ``seq`` its start_ts, appends
``<value>@<code>`` to ``runs``, and after the commit publishes ``pub`` to a serving side (the
newest ``seq`` wins, as the index's timestamped writes do). Publishing fails now and then
(``FAILURE_RATE``: a serving system that is unreachable), and the redo publishes the
committed ``pub`` again. Actors: 1-2 writers setting ``v`` on 2-3 rows, two workers, and a
backfiller that, once or twice, deploys a new code version and backfills ``v`` (in batches of
1-2 rows). After healing, a drain worker (publishing never fails then) handles notifications
until none is left.

Invariants, per row with a committed ``v``:
- the drain ends;
- the committed ``pub`` holds the last committed value of ``v`` (the last change observed),
  with a code version at least that of the last backfill that finished (the re-run happened);
- the serving side holds the committed ``pub`` (the work after the commit was done, redone
  if it failed);
- ``runs`` lists each change at most once, plus once per backfill batch that deleted the
  observer's ack after that change committed (at most one committed run per change and
  notification; a backfill asks for one more);
- the writers' transactions are atomic and their claims true (``Ledger``).
"""

from __future__ import annotations

from caffeine.errors import CaffeineError
from caffeine.ops.backfill import backfill
from caffeine.percolator import Application, Observer
from caffeine.percolator.worker import Worker
from caffeine.sim.workloads.chain import SyncClearer
from caffeine.sim.workloads.common import Ledger, ServingSide, TxnRecord, pending_notifications, run_txn

TABLE = "bf"
FAILURE_RATE = 0.3


class Backfill:
    name = "backfill"

    def __init__(self, sim) -> None:
        rng = sim.workload_rng
        self.sim = sim
        self.ledger = Ledger(sim)
        self.rows = [b"r%d" % i for i in range(rng.randint(2, 3))]
        self.records: list[TxnRecord] = []
        self.code = 1                 # the observer code deployed now
        self.finished_code = 0        # the code of the last backfill that finished
        self.side = ServingSide(sim, FAILURE_RATE)
        self.app = Application("backfill", [Observer("pub", TABLE, "v", self._run, redo=self._redo)])
        self.app.install(sim.cluster("setup"))
        for i in range(rng.randint(1, 2)):
            sim.client(f"c{i}", self._writer(i, rng.randint(3, 6)))
        for i in range(2):
            sim.client(f"w{i}", self._worker(rng.randint(8, 16)))
        sim.client("backfiller", self._backfiller(rng.randint(1, 2)))

    # -- the observer ---------------------------------------------------------------------
    def _run(self, txn, row, column):
        value = txn.get(TABLE, row, "v")
        if value is None:
            return
        pub = b"%d|%d|%s" % (txn.start_ts, self.code, value)
        runs = txn.get(TABLE, row, "runs")
        txn.set(TABLE, row, "pub", pub)
        txn.set(TABLE, row, "runs", (runs + b" " if runs else b"") + b"%s@%d" % (value, self.code))
        txn.on_commit(lambda: self.side.publish(row, pub))

    def _redo(self, txn, row, column):
        pub = txn.get(TABLE, row, "pub")
        if pub is not None:
            txn.on_commit(lambda: self.side.publish(row, pub))

    # -- actors ---------------------------------------------------------------------------
    def _writer(self, who: int, count: int):
        rng = self.sim.workload_rng

        def body(cluster):
            for n in range(count):
                row = rng.choice(self.rows)
                rec = TxnRecord(f"c{who}.{n}")
                self.records.append(rec)

                def write(txn, r, row=row):
                    value = f"{r.label}@{row.decode()}".encode()
                    txn.set(TABLE, row, "v", value)
                    r.writes[(TABLE, row, "v")] = value

                run_txn(self.sim, cluster, rec, write, style=rng.choice(("run", "with", "explicit")))
                self.sim.idle(rng.randint(0, 25))
        return body

    def _worker(self, passes: int):
        rng = self.sim.workload_rng

        def body(cluster):
            worker = self._start_worker(cluster)
            for _ in range(passes):
                self._handle_all(worker, cluster)
                self.sim.idle(rng.randint(2, 30))
        return body

    def _backfiller(self, times: int):
        rng = self.sim.workload_rng

        def body(cluster):
            for _ in range(times):
                self.sim.idle(rng.randint(5, 60))
                self.code += 1  # a new observer version is deployed, then the backfill
                code = self.code
                try:
                    progress = backfill(cluster, self.app.observers_of(TABLE, "v"), TABLE, "v",
                                        batch_size=rng.randint(1, 2))
                except CaffeineError as exc:
                    self.sim.operation("backfill (failed)", f"code {code}: {type(exc).__name__}")
                    continue
                self.finished_code = max(self.finished_code, code)
                self.sim.operation("backfill", f"code {code}: {progress.rows} rows, {progress.acks_cleared} acks cleared")
        return body

    def _start_worker(self, cluster) -> Worker:
        while True:
            try:
                return Worker(cluster, self.app, threads=1, worker_id=f"sim-{cluster.owners.owner.decode()}",
                              clearer=SyncClearer(cluster.store))
            except CaffeineError as exc:
                self.sim.log(f"worker start failed: {type(exc).__name__}")
                self.sim.idle(self.sim.workload_rng.randint(2, 30))

    def _handle_all(self, worker: Worker, cluster) -> None:
        try:
            found = pending_notifications(cluster.store, TABLE)
        except CaffeineError as exc:
            self.sim.log(f"scan failed: {type(exc).__name__}")
            return
        for row, column, cell in found:
            observers = self.app.observers_of(TABLE, column)
            if observers:
                worker.handle(TABLE, row, column, cell, observers)

    # -- after healing --------------------------------------------------------------------
    def check(self) -> None:
        sim = self.sim
        self.side.heal()
        drainer = sim.cluster("drainer")
        worker = Worker(drainer, self.app, threads=1, worker_id="sim-drainer", clearer=SyncClearer(drainer.store))
        for _ in range(40):
            if not pending_notifications(drainer.store, TABLE):
                break
            self._handle_all(worker, drainer)
        else:
            sim.violation(f"backfill: notifications never drained: {pending_notifications(drainer.store, TABLE)}")
        changes: dict[bytes, list[tuple[int, bytes]]] = {row: [] for row in self.rows}
        for rec in self.records:
            for attempt in rec.attempts:
                commit_ts = self.ledger.settle(sim, attempt)
                self.ledger.check_atomic(sim, attempt, commit_ts)
                for (_, row, _), value in attempt.writes.items():
                    if commit_ts is not None:
                        changes[row].append((commit_ts, value))
        with sim.cluster("checker").begin() as txn:
            state = {row: txn.get_row(TABLE, row, ["v", "pub", "runs"]) for row in self.rows}
        for row in self.rows:
            if changes[row]:
                self._check_row(row, sorted(changes[row]), state[row])

    def _check_row(self, row: bytes, changes: list[tuple[int, bytes]], got: dict) -> None:
        sim = self.sim
        name, value = row.decode(), changes[-1][1]
        # Each committed delete of the ack (a backfill's batch) allows one more run of the
        # changes committed before it.
        ack = self.app.observers_of(TABLE, "v")[0].ack_column.encode()
        resets = sorted(self.ledger.deletes.get((TABLE, row, ack), ()))
        runs = got["runs"].split(b" ") if got["runs"] else []
        for commit_ts, changed in changes:
            done = sum(1 for run in runs if run.rsplit(b"@", 1)[0] == changed)
            allowed = 1 + sum(1 for ts in resets if ts > commit_ts)
            if done > allowed:
                sim.violation(f"backfill: {name}: change {changed!r} ran {done} times, more than once plus "
                              f"once per backfill after it ({allowed}): {runs}")
        if got["pub"] is None:
            sim.violation(f"backfill: {name}: v={value!r} was never observed")
            return
        _, code, seen = got["pub"].split(b"|", 2)
        if seen != value:
            sim.violation(f"backfill: {name}: pub holds {seen!r}, the last change was {value!r}: a lost notification")
        if int(code) < self.finished_code:
            sim.violation(f"backfill: {name}: pub was made by code {int(code)}, but a backfill with code "
                          f"{self.finished_code} finished: the re-run never happened")
        published = self.side.holds(row)
        if published != got["pub"]:
            sim.violation(f"backfill: {name}: the serving side holds {published!r}, the committed pub is "
                          f"{got['pub']!r}: the work after the commit was never done")
