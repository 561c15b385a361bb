"""Observer chain: changes to column ``a`` run observer A, which writes ``b``, which runs B.

Layer: simulation. Workload (clients and observers use the public API; workers are real
``Worker`` objects driven one notification at a time through ``Worker.handle``).

Observer A (strong, on ``a``) appends the value of ``a`` it sees to ``seen_a`` and copies it
to ``b``; observer B (strong, on ``b``) appends the value of ``b`` it sees to ``seen_b``.
Clients write unique values to ``a`` on 1-3 rows (sometimes two rows in one transaction);
two worker actors scan for notifications and handle them, racing each other; sometimes a GC
runner. After healing, a drain worker handles notifications until none is left.

Observer B runs in one of three ways, by the seed (``(seed // 3) % 3``, drawn from no
stream, so each seed's faults stay as they were): in its own transaction; ``inline`` in the
transaction of A's run (``Observer.inline``: its notification is then never written); or
inline with work after the commit: it also commits ``pub_b`` = ``<seq>|<value>`` (seq: its
start_ts) and publishes it after the commit to a serving side where the newest seq wins,
which fails now and then (``FAILURE_RATE``), and its ``redo`` publishes the committed
``pub_b`` again (its notification stays until the work is done).

Strong notifications collapse several changes into one run, so not every value is seen;
what must hold per row, with the committed values of ``a`` in commit order:

- the drain ends: no notification is left over;
- ``seen_a`` lists committed values only (nothing that rolled back or never committed), each
  at most once (at most one committed run per change), in commit order, ending with the
  final value of ``a`` (the last change is always observed);
- ``seen_b`` likewise lists values of ``seen_a`` in its order, each at most once, ending with
  the final ``b``, which is the last entry of ``seen_a``;
- with work after the commit: ``pub_b`` holds the final ``b``, and the serving side holds
  ``pub_b`` (the work was done, or redone after it failed);
- the clients' transactions are atomic and their claims true (``Ledger``).
"""

from __future__ import annotations

from caffeine.errors import CaffeineError
from caffeine.percolator import Application, Observer
from caffeine.percolator.worker import Worker
from caffeine.sim.workloads.common import Ledger, ServingSide, TxnRecord, pending_notifications, run_txn, spawn_clients, spawn_gc

TABLE = "chain"
MODES = ("own", "inline", "inline-with-work")
FAILURE_RATE = 0.3


def _append(seen: bytes | None, value: bytes) -> bytes:
    return value if not seen else seen + b"|" + value


def _observe_a(txn, row, column):
    value = txn.get(TABLE, row, "a")
    if value is not None:
        txn.set(TABLE, row, "seen_a", _append(txn.get(TABLE, row, "seen_a"), value))
        txn.set(TABLE, row, "b", value)


def _observe_b(txn, row, column):
    value = txn.get(TABLE, row, "b")
    if value is not None:
        txn.set(TABLE, row, "seen_b", _append(txn.get(TABLE, row, "seen_b"), value))


def application(mode: str = "own", publish=None) -> Application:
    """The chain's observers; B as ``mode`` says (``MODES``). ``publish(row, pub)``: the
    serving side of ``inline-with-work``."""
    if mode == "inline-with-work":
        def observe_b(txn, row, column):
            _observe_b(txn, row, column)
            value = txn.get(TABLE, row, "b")
            if value is not None:
                pub = b"%d|%s" % (txn.start_ts, value)
                txn.set(TABLE, row, "pub_b", pub)
                txn.on_commit(lambda: publish(row, pub))

        def redo_b(txn, row, column):
            pub = txn.get(TABLE, row, "pub_b")
            if pub is not None:
                txn.on_commit(lambda: publish(row, pub))

        b = Observer("obs-b", table=TABLE, column="b", run=observe_b, redo=redo_b, inline=True)
    else:
        b = Observer("obs-b", table=TABLE, column="b", run=_observe_b, inline=mode == "inline")
    return Application("chain", [Observer("obs-a", table=TABLE, column="a", run=_observe_a), b])


class SyncClearer:
    """Deletes handled notifications at once, in the calling actor (a clearer whose batch is
    always one cell: the same deletes, only never delayed by a timer thread)."""

    def __init__(self, store) -> None:
        self.store = store

    def clear(self, table, row, delete, done) -> None:
        try:
            self.store.delete_rows(table, {row: [delete]})
            ok = True
        except CaffeineError:
            ok = False
        done(ok)

    def close(self) -> None:
        pass


def notifications(store) -> list[tuple[bytes, str, object]]:
    return pending_notifications(store, TABLE)


def handle_all(worker: Worker, found) -> None:
    for row, column, cell in found:
        observers = worker.app.observers_of(TABLE, column)
        if observers:
            worker.handle(TABLE, row, column, cell, observers)


class Chain:
    name = "chain"

    def __init__(self, sim) -> None:
        rng = sim.workload_rng
        self.sim = sim
        self.ledger = Ledger(sim)
        self.rows = [b"r%d" % i for i in range(rng.randint(1, 3))]
        self.records: list[TxnRecord] = []
        self.mode = MODES[(sim.seed // 3) % 3]
        self.side = ServingSide(sim, FAILURE_RATE)
        self.app = application(self.mode, self.side.publish)
        self.workers: list[Worker] = []
        # Recorded in the store's observer registry: the clients below never install the
        # application, their clusters learn the observed columns from the registry.
        self.app.install(sim.cluster("setup"))
        spawn_clients(sim, "w", [self._worker(rng.randint(6, 14)) for _ in range(2)], rng)
        spawn_clients(sim, "c", [self._client(i, rng.randint(3, 6)) for i in range(2)], rng)
        if rng.random() < 0.5:
            spawn_gc(sim, [TABLE], rng)

    def _client(self, who: int, count: int):
        rng = self.sim.workload_rng

        def body(cluster):
            for n in range(count):
                rows = rng.sample(self.rows, min(len(self.rows), rng.choice((1, 1, 2))))
                rec = TxnRecord(f"c{who}.{n}")
                self.records.append(rec)

                def write(txn, r, rows=rows):
                    for row in rows:
                        value = f"{r.label}@{row.decode()}".encode()
                        txn.set(TABLE, row, "a", value)
                        r.writes[(TABLE, row, "a")] = value

                run_txn(self.sim, cluster, rec, write, style=rng.choice(("run", "with", "explicit")))
                self.sim.idle(rng.randint(0, 20))
        return body

    def _worker(self, passes: int):
        rng = self.sim.workload_rng

        def body(cluster):
            worker = self._start_worker(cluster)
            for _ in range(passes):
                try:
                    handle_all(worker, notifications(cluster.store))
                except CaffeineError as exc:
                    self.sim.log(f"scan failed: {type(exc).__name__}")
                self.sim.idle(rng.randint(2, 30))
        return body

    def _start_worker(self, cluster) -> Worker:
        """A worker on ``cluster``; its start (which installs the application: store reads
        and writes) is tried again after a storage error, as a restarted process would."""
        while True:
            try:
                worker = Worker(cluster, self.app, threads=1, worker_id=f"sim-{cluster.owners.owner.decode()}",
                                clearer=SyncClearer(cluster.store))
                self.workers.append(worker)
                return worker
            except CaffeineError as exc:
                self.sim.log(f"worker start failed: {type(exc).__name__}")
                self.sim.idle(self.sim.workload_rng.randint(2, 30))

    def check(self) -> None:
        sim = self.sim
        self.side.heal()  # the serving side takes every write from now
        drainer = sim.cluster("drainer")
        worker = Worker(drainer, self.app, threads=1, worker_id="sim-drainer", clearer=SyncClearer(drainer.store))
        for _ in range(40):
            found = notifications(drainer.store)
            if not found:
                break
            handle_all(worker, found)
        else:
            sim.violation(f"chain: notifications never drained: {[(r, c) for r, c, _ in found]}")
        # How often B ran inside A's transaction, for the report (the modes' coverage).
        sim.operations[f"chain: B {self.mode}"] += 1
        sim.operations["chain: inline runs"] += sum(w.metrics.inline for w in (*self.workers, worker))
        committed: dict[bytes, list[tuple[int, bytes]]] = {row: [] for row in self.rows}
        for rec in self.records:
            for attempt in rec.attempts:
                commit_ts = self.ledger.settle(sim, attempt)
                self.ledger.check_atomic(sim, attempt, commit_ts)
                if commit_ts is not None:
                    for (_, row, _), value in attempt.writes.items():
                        committed[row].append((commit_ts, value))
        with sim.cluster("checker").begin() as txn:
            state = {row: txn.get_row(TABLE, row, ["a", "b", "seen_a", "seen_b", "pub_b"]) for row in self.rows}
        for row in self.rows:
            values = [v for _, v in sorted(committed[row])]
            got = state[row]
            name = row.decode()
            final_a = values[-1] if values else None
            if got["a"] != final_a:
                sim.violation(f"chain: {name}/a is {got['a']!r}, the last committed change was {final_a!r}")
            seen_a = got["seen_a"].split(b"|") if got["seen_a"] else []
            seen_b = got["seen_b"].split(b"|") if got["seen_b"] else []
            self._check_seen(f"{name}: observer A", seen_a, values)
            self._check_seen(f"{name}: observer B", seen_b, seen_a)
            if got["b"] != (seen_a[-1] if seen_a else None):
                sim.violation(f"chain: {name}/b is {got['b']!r} but observer A's last run saw {seen_a[-1:]!r}")
            if self.mode == "inline-with-work" and got["b"] is not None:
                self._check_published(name, row, got)

    def _check_published(self, name: str, row: bytes, got: dict) -> None:
        sim = self.sim
        if got["pub_b"] is None or got["pub_b"].split(b"|", 1)[1] != got["b"]:
            sim.violation(f"chain: {name}: pub_b is {got['pub_b']!r}, the final b is {got['b']!r}")
            return
        if self.side.holds(row) != got["pub_b"]:
            sim.violation(f"chain: {name}: the serving side holds {self.side.holds(row)!r}, the committed pub_b is "
                          f"{got['pub_b']!r}: the work after the commit was never done")

    def _check_seen(self, who: str, seen: list[bytes], changes: list[bytes]) -> None:
        sim = self.sim
        position = {v: i for i, v in enumerate(changes)}
        if len(set(seen)) != len(seen):
            sim.violation(f"chain: {who} committed two runs for one change: {seen}")
        unknown = [v for v in seen if v not in position]
        if unknown:
            sim.violation(f"chain: {who} observed {unknown}, which never committed (changes: {changes})")
            return
        order = [position[v] for v in seen]
        if order != sorted(order):
            sim.violation(f"chain: {who} observed changes out of commit order: {seen} (changes: {changes})")
        if changes and (not seen or seen[-1] != changes[-1]):
            sim.violation(f"chain: {who} never observed the last change {changes[-1]!r} (saw {seen}): a lost notification")
