"""What the workloads share: transaction records, outcome claims, the ledger of every write
record that ever landed, the atomicity check, a GC actor and a final resolving read.

Layer: simulation. Uses only ``caffeine.percolator``'s public API for clients; the ledger
decodes the protocol's write records, which is what "inspecting the store" means here.

Outcomes. A client's transaction ends with a *claim* the API made to it:

- ``committed``: ``commit()``/``run()`` returned;
- ``aborted``: it failed before ``commit`` was called (nothing was prewritten), or commit
  raised ``CommitConflict`` (which says it did not commit);
- ``unknown``: commit raised anything else (``CommitUnknown``, a storage or oracle error): it
  may have committed or not, but never half;
- ``incomplete``: the client crashed before it heard anything.

The truth is settled at the end from the ``Ledger``: a transaction committed if and only if a
commit record for its start_ts ever landed on its primary cell. Claims are checked against it
(a committed claim must be true; an aborted one must be too), and ``check_atomic`` requires
every cell of a committed transaction to carry exactly that commit and never a rollback record
(on a secondary that is a split commit; on the primary, a committed transaction whose status
now reads "rolled back"), and no cell of an uncommitted one to carry a commit.
"""

from __future__ import annotations

import inspect
from collections import defaultdict
from dataclasses import dataclass, field

from caffeine.errors import CaffeineError
from caffeine.percolator import CommitConflict
from caffeine.percolator.gc import collect_garbage, gc_horizon
from caffeine.percolator.layout import NOTIFY, WRITE, column_name, qualifier
from caffeine.percolator.records import Kind, Write
from caffeine.storage import Put, ReadSpec

Cell = tuple[str, bytes, str]  # (table, row, column)


@dataclass
class TxnRecord:
    label: str
    start_ts: int | None = None
    reads: list[tuple[Cell, bytes | None]] = field(default_factory=list)
    writes: dict[Cell, bytes | None] = field(default_factory=dict)
    claim: str = "incomplete"
    commit_ts: int | None = None
    error: str = ""
    # The records of each attempt, when ``Cluster.run`` ran the body (itself otherwise).
    attempts: list["TxnRecord"] = field(default_factory=list, repr=False)
    txn: object = field(default=None, repr=False)

    @property
    def primary(self) -> Cell | None:
        return next(iter(self.writes), None)

    def describe(self) -> str:
        reads = ", ".join(f"{c[1].decode()}/{c[2]}={v!r}" for c, v in self.reads)
        writes = ", ".join(f"{c[1].decode()}/{c[2]}:={v!r}" for c, v in self.writes.items())
        return (f"{self.label} start={self.start_ts} {self.claim}"
                f"{'@' + str(self.commit_ts) if self.commit_ts else ''} reads[{reads}] writes[{writes}]"
                f"{' (' + self.error + ')' if self.error else ''}")


def claim_of(exc: BaseException | None, committing: bool) -> str:
    if exc is None:
        return "committed"
    if not committing or isinstance(exc, CommitConflict):
        return "aborted"
    return "unknown"


def run_txn(sim, cluster, rec: TxnRecord, body, *, style: str) -> None:
    """Run ``body(txn)`` as one transaction in ``style`` ('explicit': begin/commit/rollback,
    'with': the context manager, 'run': ``Cluster.run``, which may retry: each attempt gets a
    record of its own, appended to ``rec.attempts``). Sets the record's claim.

    The client's threads run their transactions as a gang, as a worker's observer runs do
    (caffeine.storage.lockstep): their calls of a round share multi-row calls."""
    with cluster.store.lockstep.member():
        _run_txn(sim, cluster, rec, body, style=style)


def _run_txn(sim, cluster, rec: TxnRecord, body, *, style: str) -> None:
    state = {"committing": False}

    def attempt(txn, r: TxnRecord):
        r.start_ts = txn.start_ts
        state["committing"] = False
        body(txn, r)
        state["committing"] = True

    if style == "run":
        attempts: list[TxnRecord] = []
        rec.attempts = attempts

        def fn(txn):
            if attempts:
                attempts[-1].claim = "aborted"  # run retries only after a CommitConflict
            r = TxnRecord(f"{rec.label}#{len(attempts) + 1}")
            attempts.append(r)
            attempt(txn, r)
            r.txn = txn

        try:
            cluster.run(fn, max_attempts=3)
            last = attempts[-1]
            last.claim, last.commit_ts = "committed", last.txn.commit_ts
        except CaffeineError as exc:
            if attempts:
                attempts[-1].claim = claim_of(exc, state["committing"])
                attempts[-1].error = f"{type(exc).__name__}: {exc}"[:200]
        for r in attempts:
            sim.log(f"txn {r.describe()}")
        return
    rec.attempts = [rec]
    try:
        txn = cluster.begin()
    except CaffeineError as exc:
        rec.claim, rec.error = "aborted", f"begin: {type(exc).__name__}"
        return
    try:
        if style == "with":
            with txn:
                attempt(txn, rec)
        else:
            try:
                attempt(txn, rec)
                txn.commit()
            except BaseException:
                if not state["committing"]:
                    txn.rollback()
                raise
        rec.claim, rec.commit_ts = "committed", txn.commit_ts
    except CaffeineError as exc:
        rec.claim = claim_of(exc, state["committing"])
        rec.error = f"{type(exc).__name__}: {exc}"[:200]
        if style == "explicit" and state["committing"]:
            # What a careful caller does after a failed commit: roll back (never undoes a
            # commit that happened) and move on.
            try:
                txn.rollback()
            except CaffeineError:
                pass
    sim.log(f"txn {rec.describe()}")


class Ledger:
    """Every write record (commit or rollback) and notify cell that ever landed, from the
    store's feed."""

    def __init__(self, sim) -> None:
        self.commits: dict[tuple[str, bytes, bytes, int], set[int]] = defaultdict(set)
        self.rollbacks: set[tuple[str, bytes, bytes, int]] = set()
        # (table, row, qualifier) -> commit_ts of every committed delete of the cell
        self.deletes: dict[tuple[str, bytes, bytes], set[int]] = defaultdict(set)
        # (table, row, qualifier, version) of every notify cell written
        self.notified: set[tuple[str, bytes, bytes, int]] = set()
        sim.store.on_applied = self._applied

    def _applied(self, table, row, mutations) -> None:
        for m in mutations:
            if isinstance(m, Put) and m.family == WRITE:
                write = Write.decode(m.value)
                key = (table, row, m.qualifier, write.start_ts)
                if write.is_rollback:
                    self.rollbacks.add(key)
                else:
                    self.commits[key].add(m.ts)
                    if write.kind is Kind.DELETE:
                        self.deletes[(table, row, m.qualifier)].add(m.ts)
            elif isinstance(m, Put) and m.family == NOTIFY:
                self.notified.add((table, row, m.qualifier, m.ts))

    def commit_ts(self, cell: Cell, start_ts: int) -> set[int]:
        return self.commits.get((cell[0], cell[1], qualifier(cell[2]), start_ts), set())

    def rolled_back(self, cell: Cell, start_ts: int) -> bool:
        return (cell[0], cell[1], qualifier(cell[2]), start_ts) in self.rollbacks

    def settle(self, sim, rec: TxnRecord) -> int | None:
        """The commit_ts of a transaction, from its primary's records (None: not committed);
        checks the client's claim against it."""
        if rec.start_ts is None or not rec.writes:
            return None
        found = self.commit_ts(rec.primary, rec.start_ts)
        if len(found) > 1:
            sim.violation(f"two commit records for one transaction on its primary: {sorted(found)}: {rec.describe()}")
        commit_ts = min(found) if found else None
        if rec.claim == "committed" and commit_ts != rec.commit_ts:
            sim.violation(f"commit returned {rec.commit_ts} but the primary's commit record says {commit_ts}: {rec.describe()}")
        if rec.claim == "aborted" and commit_ts is not None:
            sim.violation(f"reported as not committed (a caller may run it again) but committed at {commit_ts}: {rec.describe()}")
        return commit_ts

    def check_atomic(self, sim, rec: TxnRecord, commit_ts: int | None) -> None:
        for cell in rec.writes:
            found = self.commit_ts(cell, rec.start_ts)
            where = f"{cell[1].decode()}/{cell[2]}"
            if commit_ts is not None:
                if self.rolled_back(cell, rec.start_ts) and cell == rec.primary:
                    sim.violation(f"a committed transaction fenced off: its primary {where} has its commit record "
                                  f"({commit_ts}) and a rollback record, and its status reads rolled back: {rec.describe()}")
                elif self.rolled_back(cell, rec.start_ts):
                    sim.violation(f"split commit: committed at {commit_ts} on its primary, rolled back on {where}: {rec.describe()}")
                elif found != {commit_ts}:
                    sim.violation(f"split commit: committed at {commit_ts} on its primary, {where} has commit records {sorted(found)}: {rec.describe()}")
            elif found:
                sim.violation(f"half commit: not committed on its primary, but {where} committed at {sorted(found)}: {rec.describe()}")


def spawn_clients(sim, name: str, bodies: list, rng) -> None:
    """Clients running ``bodies``: half the time each a process of its own (``name0``,
    ``name1``, ...), else all of them threads of one process (``name.0``, ...), whose
    concurrent transactions share one batching store, so their calls go in shared multi-row
    calls (caffeine.storage.batching)."""
    if len(bodies) > 1 and rng.random() < 0.5:
        sim.process(name, bodies)
        return
    for i, body in enumerate(bodies):
        sim.client(f"{name}{i}", body)


def spawn_gc(sim, tables: list[str], rng, name: str = "gc", *, rounds: tuple[int, int] = (1, 4),
             idle: tuple[int, int] = (5, 60)) -> None:
    """A GC actor: a few rounds (``rounds``: the range drawn from) of horizon + collection,
    with pauses of ``idle`` steps between them. Each round collects every table (``caffeine
    gc``) or, as often, a random non-empty subset of ``tables`` (``caffeine gc --table ...``)."""
    rounds = rng.randint(*rounds)
    margin_ms = rng.choice((0, 5, 50))
    plans = []
    for _ in range(rounds):
        if rng.random() < 0.5:
            plans.append(None)
        else:
            plans.append(sorted(rng.sample(tables, rng.randint(1, len(tables)))))

    def body(cluster):
        for subset in plans:
            sim.idle(rng.randint(*idle))
            kind = "gc all tables" if subset is None else "gc some tables"
            try:
                horizon = gc_horizon(cluster, margin_ms=margin_ms)
                report = collect_garbage(_gc_target(cluster), horizon, subset)
                sim.operation(kind, f"{subset or 'all'} at {horizon}: {report.write_versions_deleted} "
                                    f"write versions deleted, {report.locks_resolved} locks resolved")
            except CaffeineError as exc:
                sim.operation(kind + " (failed)", f"{type(exc).__name__}: {exc}"[:200])

    sim.client(name, body)


def _gc_target(cluster):
    """``collect_garbage`` takes the cluster since 064a1ad (it resolves old locks and publishes
    a safe point first); before, it took the store."""
    first = next(iter(inspect.signature(collect_garbage).parameters))
    return cluster.store if first == "store" else cluster


def check_total(sim, workload: str, what: str, values, total: int) -> None:
    """Money is conserved: every account read has a balance and they sum to ``total``."""
    if any(v is None for v in values):
        sim.violation(f"{workload}: {what}: an account has no balance: {values}")
        return
    balances = [int(v) for v in values]
    sim.log(f"{what}: {balances} = {sum(balances)}")
    if sum(balances) != total:
        sim.violation(f"{workload}: {what} sums to {sum(balances)}, not {total}: {balances}")


def final_read(sim, cluster, cells: list[Cell]) -> dict[Cell, bytes | None]:
    """Every cell in one fresh transaction after healing: resolves every leftover lock."""
    with cluster.begin() as txn:
        return {cell: txn.get(cell[0], cell[1], cell[2]) for cell in cells}


def pending_notifications(store, table: str) -> list[tuple[bytes, str, object]]:
    """Every notify cell of ``table``: (row, column, newest cell), in row order."""
    out = []
    for row in store.scan(table, spec=ReadSpec(families=(NOTIFY,))):
        for q, versions in row.family(NOTIFY).items():
            out.append((row.key, column_name(q), versions[0]))
    return out


class PublishFailed(Exception):
    """The serving side did not take the write (injected)."""


class ServingSide:
    """A serving system that observers publish to after their commit: row -> (seq, pub), the
    newest seq winning (as the index's timestamped writes do), where ``pub`` starts with
    ``<seq>|``. A publish fails (``PublishFailed``) with probability ``failure_rate``, drawn
    from the workload's stream; ``heal()`` makes every later one succeed."""

    def __init__(self, sim, failure_rate: float) -> None:
        self.sim = sim
        self.failure_rate = failure_rate
        self.rows: dict[bytes, tuple[int, bytes]] = {}

    def publish(self, row: bytes, pub: bytes) -> None:
        if self.sim.workload_rng.random() < self.failure_rate:
            self.sim.log(f"publish of {row!r} fails")
            raise PublishFailed(f"serving side unreachable for {row!r}")
        seq = int(pub.split(b"|", 1)[0])
        if row not in self.rows or self.rows[row][0] <= seq:
            self.rows[row] = (seq, pub)

    def heal(self) -> None:
        self.failure_rate = 0.0

    def holds(self, row: bytes) -> bytes | None:
        """The pub the side holds for ``row`` (None: none)."""
        return self.rows.get(row, (0, None))[1]
