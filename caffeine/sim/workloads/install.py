"""Install: an application's observed columns installed and removed while writers that connected
before commit to them.

Layer: simulation. Workload (clients and observers use the public API; the installs are
``Application.install``; workers are real ``Worker`` objects driven one notification at a
time, as in ``chain``).

Table ``inst``, 2-3 rows, columns ``x`` and ``y``. At setup the application observes ``x``
(version 1: observer OX appends each value of ``x`` it sees to ``seen_x``). Two writers,
connected at setup (so their copies of the observer registry say version 1), write ``x``,
``y`` or both. An installer then installs version 2 (``x`` and ``y``: observer OY appends to
``seen_y``) and, half the time, later version 3 (``y`` only: ``x`` no longer observed), each
tried again after a storage error as a restarted process would, and takes an oracle
timestamp bound as each install returns (``SimOracle.status``: every timestamp issued later
is at least that). Two workers handle the notifications of both observers. After healing, a
drain worker handles every notification left.

Invariants:
- once version 2's install has returned, every change to ``y`` is notified: each committed
  writer transaction that wrote ``y`` at a commit_ts issued after the return has a
  notify cell of ``y`` at its commit_ts (from the store's feed of every write that landed);
- every change to ``x`` is notified the same way, unless version 3's install (which stops
  observing it) began: a writer may take the removal up before any commit point from then;
- ``seen_y`` (and ``seen_x``) list committed values only, each at most once, in commit order,
  and end with the last change whenever that change had to be notified;
- the writers' transactions are atomic and their claims true (``Ledger``).
"""

from __future__ import annotations

from caffeine.errors import CaffeineError
from caffeine.percolator import Application, Observer
from caffeine.percolator.layout import qualifier
from caffeine.percolator.worker import Worker
from caffeine.sim.workloads.chain import SyncClearer
from caffeine.sim.workloads.common import Ledger, TxnRecord, pending_notifications, run_txn

TABLE = "inst"
NAME = "inst"


def _append_seen(column: str):
    def run(txn, row, _column):
        value = txn.get(TABLE, row, column)
        if value is not None:
            seen = txn.get(TABLE, row, "seen_" + column)
            txn.set(TABLE, row, "seen_" + column, value if not seen else seen + b"|" + value)
    return run


OX = Observer("ox", TABLE, "x", _append_seen("x"))
OY = Observer("oy", TABLE, "y", _append_seen("y"))
VERSIONS = {1: [OX], 2: [OX, OY], 3: [OY]}


def version(n: int) -> Application:
    return Application(NAME, VERSIONS[n], tables=[TABLE])


# What the workers run: every observer any version has; installs nothing of its own.
WORKERS = Application("inst-workers", [], tables=[TABLE])


class Install:
    name = "install"

    def __init__(self, sim) -> None:
        rng = sim.workload_rng
        self.sim = sim
        self.ledger = Ledger(sim)
        self.rows = [b"r%d" % i for i in range(rng.randint(2, 3))]
        self.records: list[TxnRecord] = []
        self.returned: dict[int, int] = {}   # version -> oracle timestamp taken as its install returned
        self.removing = False                # version 3's install has begun
        version(1).install(sim.cluster("setup"))
        for i in range(2):
            sim.client(f"c{i}", self._writer(i, rng.randint(4, 8)))
        for i in range(2):
            sim.client(f"w{i}", self._worker(rng.randint(8, 16)))
        sim.client("installer", self._installer(rng.random() < 0.5))

    def _writer(self, who: int, count: int):
        rng = self.sim.workload_rng

        def body(cluster):
            for n in range(count):
                row = rng.choice(self.rows)
                columns = rng.choice((["x"], ["y"], ["y"], ["x", "y"]))
                rec = TxnRecord(f"c{who}.{n}")
                self.records.append(rec)

                def write(txn, r, row=row, columns=columns):
                    for column in columns:
                        value = f"{r.label}@{row.decode()}.{column}".encode()
                        txn.set(TABLE, row, column, value)
                        r.writes[(TABLE, row, column)] = value

                run_txn(self.sim, cluster, rec, write, style=rng.choice(("run", "with", "explicit")))
                self.sim.idle(rng.randint(0, 20))
        return body

    def _installer(self, remove: bool):
        rng = self.sim.workload_rng

        def body(cluster):
            self.sim.idle(rng.randint(5, 60))
            self._install(cluster, 2, "install (adds y)")
            if remove:
                self.sim.idle(rng.randint(5, 60))
                self.removing = True
                self._install(cluster, 3, "install (removes x)")
        return body

    def _install(self, cluster, n: int, kind: str) -> None:
        rng = self.sim.workload_rng
        while True:
            try:
                version(n).install(cluster)
                self.returned[n] = self.sim.oracle.status()  # every later timestamp is at least this
                self.sim.operation(kind, f"returned before {self.returned[n]}")
                return
            except CaffeineError as exc:
                self.sim.operation(kind + " (failed, tried again)", f"{type(exc).__name__}: {exc}"[:160])
                self.sim.idle(rng.randint(2, 30))

    def _worker(self, passes: int):
        rng = self.sim.workload_rng

        def body(cluster):
            worker = self._start_worker(cluster)
            for _ in range(passes):
                self._handle_all(worker, cluster)
                self.sim.idle(rng.randint(2, 30))
        return body

    def _start_worker(self, cluster) -> Worker:
        while True:
            try:
                return Worker(cluster, WORKERS, threads=1, worker_id=f"sim-{cluster.owners.owner.decode()}",
                              clearer=SyncClearer(cluster.store))
            except CaffeineError as exc:
                self.sim.log(f"worker start failed: {type(exc).__name__}")
                self.sim.idle(self.sim.workload_rng.randint(2, 30))

    def _handle_all(self, worker: Worker, cluster) -> None:
        """Handle every notification with both observers: workers of the version before a
        removal may still run, and notifications of a column no longer observed are
        harmless to them."""
        try:
            found = pending_notifications(cluster.store, TABLE)
        except CaffeineError as exc:
            self.sim.log(f"scan failed: {type(exc).__name__}")
            return
        for row, column, cell in found:
            observers = [o for o in VERSIONS[2] if o.column == column]
            if observers:
                worker.handle(TABLE, row, column, cell, observers)

    # -- after healing --------------------------------------------------------------------
    def check(self) -> None:
        sim = self.sim
        drainer = sim.cluster("drainer")
        worker = Worker(drainer, WORKERS, threads=1, worker_id="sim-drainer", clearer=SyncClearer(drainer.store))
        for _ in range(40):
            left = [(r, c) for r, c, _ in pending_notifications(drainer.store, TABLE)]
            if not left:
                break
            self._handle_all(worker, drainer)
        else:
            sim.violation(f"install: notifications never drained: {left}")
        changes: dict[tuple[bytes, str], list[tuple[int, bytes, bool]]] = {}
        for rec in self.records:
            for attempt in rec.attempts:
                commit_ts = self.ledger.settle(sim, attempt)
                self.ledger.check_atomic(sim, attempt, commit_ts)
                if commit_ts is None:
                    continue
                for (_, row, column), value in attempt.writes.items():
                    required = self._must_notify(column, commit_ts)
                    notified = (TABLE, row, qualifier(column), commit_ts) in self.ledger.notified
                    if required and not notified:
                        sim.violation(f"install: {attempt.label} committed {column} of {row.decode()} at {commit_ts}, "
                                      f"after the install that observes it returned, without notifying it")
                    changes.setdefault((row, column), []).append((commit_ts, value, required))
        with sim.cluster("checker").begin() as txn:
            state = {row: txn.get_row(TABLE, row, ["seen_x", "seen_y"]) for row in self.rows}
        for (row, column), found in sorted(changes.items()):
            found.sort()
            seen = state[row]["seen_" + column]
            self._check_seen(f"{row.decode()}/{column}", seen.split(b"|") if seen else [], found)

    def _must_notify(self, column: str, commit_ts: int) -> bool:
        if column == "y":
            return 2 in self.returned and commit_ts >= self.returned[2]
        # x is observed from the start; once a removal has begun, a writer may take it up at
        # any point before its commit point (the change's commit_ts may be older), and
        # nothing requires its notification any more.
        return not self.removing

    def _check_seen(self, what: str, seen: list[bytes], changes: list[tuple[int, bytes, bool]]) -> None:
        sim = self.sim
        position = {value: i for i, (_, value, _) in enumerate(changes)}
        if len(set(seen)) != len(seen):
            sim.violation(f"install: {what}: one change observed twice: {seen}")
        unknown = [v for v in seen if v not in position]
        if unknown:
            sim.violation(f"install: {what}: observed {unknown}, which never committed")
            return
        order = [position[v] for v in seen]
        if order != sorted(order):
            sim.violation(f"install: {what}: observed out of commit order: {seen}")
        _, last, required = changes[-1]
        if required and (not seen or seen[-1] != last):
            sim.violation(f"install: {what}: the last change {last!r} had to be notified and was never "
                          f"observed (saw {seen})")
