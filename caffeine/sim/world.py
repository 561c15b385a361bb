"""One simulated deployment: clock, scheduler, nemesis, store, oracle, owners, and clients.

Layer: simulation. Builds real ``Cluster`` objects (the code under test) over the simulated
pieces, without touching their modules' files:

- the store is a ``SimStore`` (faults, yield points) over one ``MemoryStore``;
- the oracle is ``SimOracle``: strictly increasing timestamps on the virtual clock, with
  restarts that jump ahead and errors;
- each client gets an owner registry whose liveness the simulation decides (``SimOwners``): alive
  while its actor runs, dead once it crashed or finished (a process that exits deregisters),
  and dead for a while when the nemesis pauses it (a zombie that carries on afterwards). No
  heartbeat thread runs;
- each client's commit executor runs submitted work inline (``InlineExecutor``), so parallel
  prewrites and commits happen one after another inside the actor, deterministically.

``Cluster.__init__`` builds its owner registry and executor itself; ``Sim.cluster()`` hands it
the simulated ones by swapping the two names in ``caffeine.percolator.cluster`` for the
duration of the constructor call (setup runs in the main thread, alone), so the simulation
needs no hook in ``Cluster`` and follows whatever else its constructor builds.

Contract: everything here is a function of the seed. ``history`` is the run's log (one line
per call, fault, outcome); ``violations`` lists every broken invariant, the first one first.
"""

from __future__ import annotations

import hashlib
import heapq
import random
import threading
from collections import Counter
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from caffeine.config import Settings
from caffeine.oracle.errors import OracleUnavailable
from caffeine.oracle.timestamps import compose
from caffeine.percolator import backends
from caffeine.percolator.owners import OwnerRegistry
from caffeine.percolator.owners import ensure_table as ensure_owners_table
from caffeine.sim.clock import EPOCH_MS, SeededRandom, VirtualClock, VirtualTime
from caffeine.sim.nemesis import Nemesis, Profile
from caffeine.sim.scheduler import Actor, ActorCrashed, Scheduler
from caffeine.sim.store import SimStore
from caffeine.storage.batching import BatchingStore
from caffeine.storage.errors import StorageUnavailable

POOL_DEADLINE_MS = 60_000  # ConnectionPool.retry_deadline_s: how long a call rides out an outage
COMPACTION_CHANCE = 0.02   # per step, in runs with faults: the servers' own housekeeping


class InlineExecutor:
    """``submit`` runs the function at once and returns its completed Future."""

    def submit(self, fn, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # ActorCrashed included: the caller re-raises it
            future.set_exception(exc)
        return future

    def shutdown(self, wait: bool = True, **kwargs) -> None:
        pass


class SimOracle:
    """Timestamps on the virtual clock; every call is a yield point and meets the nemesis."""

    def __init__(self, sim: "Sim") -> None:
        self.sim = sim
        self._last = 0

    def get_timestamp(self) -> int:
        kind = self.sim.enter("oracle", "oracle")
        if kind == "restart":
            # A restarted oracle serves from its persisted high-water mark: ahead of anything
            # it handed out, up to one block of wall-clock time ahead of now.
            jump = self.sim.fault_rng.randint(1, self.sim.settings.oracle_block_ms)
            self._last = max(self._last, compose(self.sim.clock.ms() + jump))
        elif kind == "oracle_error":
            raise OracleUnavailable("sim-oracle", 0, 30.0)
        self._last = max(self._last + 1, compose(self.sim.clock.ms()))
        return self._last

    def status(self) -> int:
        return self._last + 1

    def close(self) -> None:
        pass


@dataclass
class _Owner:
    actor: Actor | None
    oldest_open: Callable[[], int | None]
    dead_until_step: int = 0


class SimOwners(OwnerRegistry):
    """The real registry (its safe point, and the beats that report the observer registry
    version a client holds, live in the simulated store, faults included), except that
    liveness is the simulation's: no heartbeat thread (a client beats only when its observer
    registry lease runs out and it renews it); ``is_alive`` and ``oldest_open_start_ts`` ask
    the ``Sim``."""

    def __init__(self, sim: "Sim", name: str, store, **kwargs) -> None:
        super().__init__(store, **kwargs)
        self.sim = sim
        self.owner = f"owner-{name}".encode()
        sim._owners[self.owner] = _Owner(None, kwargs.get("oldest_open_start_ts") or (lambda: None))

    def start(self) -> None:
        ensure_owners_table(self.store)

    def close(self) -> None:
        pass

    def is_alive(self, owner: bytes) -> bool | None:
        return self.sim.owner_alive(owner) if owner else None

    def oldest_open_start_ts(self) -> int | None:
        return self.sim.oldest_open_start_ts()


class Sim:
    def __init__(self, seed: int, *, resend_same_token: bool = False, cas_error_is_unknown: bool = True,
                 max_steps: int = 20_000, committer: str = backends.FALLBACK) -> None:
        self.seed = seed
        self.committer = committer
        root = random.Random(seed)
        self.sched_rng = random.Random(root.getrandbits(64))
        self.fault_rng = random.Random(root.getrandbits(64))
        self.jitter_rng = random.Random(root.getrandbits(64))
        self.workload_rng = random.Random(root.getrandbits(64))
        self.clock = VirtualClock()
        self.profile = Profile.draw(self.fault_rng)
        self.nemesis = Nemesis(self.fault_rng, self.profile)
        self.scheduler = Scheduler(self.sched_rng, max_steps=max_steps, on_step=self._on_step)
        # The in-memory store runs what the backend needs on the server (the coprocessor
        # backend: the row steps' Python model).
        inner = backends.get(committer).memory_store()
        self.store = SimStore(self, inner, resend_same_token=resend_same_token, cas_error_is_unknown=cas_error_is_unknown)
        self.oracle = SimOracle(self)
        # How long a batching store's leader waits for others to join its call (virtual ms).
        self.linger_ms = self.fault_rng.choice((0.0, 1.0, 5.0))
        # How long a leader waits for the process's observer runs to reach their calls
        # (caffeine.storage.lockstep; virtual ms). Drawn from the jitter stream, so each
        # seed's faults stay what they were before lockstep existed.
        self.lockstep_ms = self.jitter_rng.choice((0.0, 1.0, 5.0))
        # How many combined calls of a kind a batching store keeps in flight: from the seed
        # itself, so no stream draws one more number and each seed's faults stay as they were.
        self.calls_in_flight = (1, 2, 3)[seed % 3]
        self.settings = Settings(
            table_prefix="sim_",
            lock_ttl_ms=self.fault_rng.choice((300, 1000, 3000)),
            heartbeat_interval_ms=1000,
            owner_grace_ms=4000,
            lock_wait_timeout_s=self.fault_rng.choice((1.0, 5.0)),
            commit_threads=4,
            oracle_block_ms=3000,
        )
        self._main_thread = threading.get_ident()
        self.virtual_time = VirtualTime(self.clock, self._on_sleep, self.is_sim_thread)
        self.random = SeededRandom(self.jitter_rng, self.is_sim_thread)
        self.history: list[str] = []
        self.violations: list[str] = []
        # Operations the workloads ran, by kind (GC passes, backfills, installs, ingests):
        # what a sweep reports beside the faults it injected.
        self.operations: Counter[str] = Counter()
        self._redactions: list[tuple[str, str]] = []
        self.outage_until_ms: float | None = None
        self._owners: dict[bytes, _Owner] = {}
        # (due step, sequence, label, delivery, the (table, row) pairs it touches)
        self._later: list[tuple[int, int, str, Callable[[], object], frozenset]] = []
        self._later_seq = 0

    def is_sim_thread(self) -> bool:
        """The thread running this simulation, or one of its actors."""
        return self.scheduler.current() is not None or threading.get_ident() == self._main_thread

    # -- building clients ------------------------------------------------------------------
    def cluster(self, name: str, actor: Actor | None = None):
        """A real ``Cluster`` over the simulated store and oracle, with owner ``name``."""
        import caffeine.percolator.cluster as cluster_module

        saved = cluster_module.OwnerRegistry, cluster_module.ThreadPoolExecutor
        cluster_module.OwnerRegistry = lambda store, **kw: SimOwners(self, name, store, **kw)
        cluster_module.ThreadPoolExecutor = lambda *a, **kw: InlineExecutor()
        # Each client process combines its threads' calls, as every process does by default.
        store = BatchingStore(self.store, linger_ms=self.linger_ms, lockstep_ms=self.lockstep_ms,
                              in_flight=self.calls_in_flight, pause=self._pause)
        try:
            cluster = cluster_module.Cluster(store, self.oracle, self.settings,
                                             committer=backends.by_name(self.committer))
        finally:
            cluster_module.OwnerRegistry, cluster_module.ThreadPoolExecutor = saved
        self._owners[cluster.owners.owner].actor = actor
        return cluster

    def client(self, name: str, body: Callable, *, crashable: bool = True):
        """An actor ``name`` running ``body(cluster)`` with a cluster (an owner) of its own."""
        return self.process(name, [body], crashable=crashable)

    def process(self, name: str, bodies: list[Callable], *, crashable: bool = True):
        """A client process of several threads: one cluster (one owner, one batching store)
        and an actor per body running ``body(cluster)``; a crash of any thread kills them all,
        and the owner lives while any thread runs. Returns (first actor, cluster)."""
        holder = {}
        names = [name] if len(bodies) == 1 else [f"{name}.{i}" for i in range(len(bodies))]
        first = self.scheduler.spawn(names[0], lambda: bodies[0](holder["cluster"]), crashable=crashable)
        for thread_name, body in zip(names[1:], bodies[1:]):
            self.scheduler.spawn(thread_name, lambda body=body: body(holder["cluster"]), crashable=crashable,
                                 thread_of=first)
        holder["cluster"] = self.cluster(name, first)
        return first, holder["cluster"]

    # -- liveness --------------------------------------------------------------------------
    def owner_alive(self, owner: bytes) -> bool | None:
        state = self._owners.get(owner)
        if state is None:
            return None
        if state.dead_until_step > self.scheduler.step:
            return False  # paused past the grace period: declared dead
        actor = state.actor
        if actor is None:
            return False  # the setup and checker clients: they run alone, before or after
        return any(not (thread.crashed or thread.finished or thread.killed) for thread in actor.process)

    def oldest_open_start_ts(self) -> int | None:
        opens = [s.oldest_open() for o, s in self._owners.items() if self.owner_alive(o)]
        opens = [ts for ts in opens if ts]
        return min(opens) if opens else None

    # -- yield points and faults -------------------------------------------------------------
    def redact(self, text: str, replacement: str) -> None:
        """Write ``replacement`` for ``text`` in the history from now on (a temporary
        directory's name, which differs from run to run)."""
        self._redactions.append((text, replacement))

    def redacted(self, text: str) -> str:
        """``text`` with every redaction applied (before it is cut short, or a cut name stays)."""
        for old, new in self._redactions:
            text = text.replace(old, new)
        return text

    def log(self, text: str) -> None:
        actor = self.scheduler.current()
        who = actor.name if actor else "-"
        text = self.redacted(text)
        self.history.append(f"{self.scheduler.step:>5} {self.clock.ms() - EPOCH_MS:>8}ms {who:<8} {text}")

    def operation(self, kind: str, detail: str = "") -> None:
        """Count one operation of ``kind`` run by a workload's actor, and log it."""
        self.operations[kind] += 1
        self.log(f"OPERATION {kind}{' ' + detail if detail else ''}")

    def violation(self, text: str) -> None:
        self.log(f"VIOLATION {text}")
        self.violations.append(text)

    def enter(self, cls: str, what: str) -> str | None:
        """A call of class ``cls`` is about to be made: yield, then draw its fault.

        Carries out the faults common to every call (crash before, delay, pause, outage) and
        returns the fault left for the caller to carry out (None: none left)."""
        actor = self.scheduler.current()
        if actor is None:
            return None  # setup and final checks run alone, without faults
        self.scheduler.point()
        kind = self.nemesis.pick(cls, crashable=actor.crashable)
        self.log(what if kind is None else f"{what}  << {kind}")
        if kind == "crash_before":
            self.crash_current()
        elif kind == "delay":
            self.scheduler.park(actor, self.fault_rng.randint(1, 25))
            self.scheduler.point()
        elif kind == "pause":
            # A stop-the-world pause longer than the grace period: others see the owner dead
            # (and its locks' TTLs run out); then the client carries on where it was.
            # The whole process stops: every one of its threads.
            steps = self.fault_rng.randint(5, 60)
            owner = next((o for o, s in self._owners.items() if s.actor is not None and actor in s.actor.process), None)
            if owner is not None:
                self._owners[owner].dead_until_step = self.scheduler.step + steps
            self.clock.advance(self.settings.owner_grace_ms + self.fault_rng.randint(0, 3000))
            for thread in actor.process:
                self.scheduler.park(thread, steps)
            self.scheduler.point()
        elif kind == "outage":
            self.outage_until_ms = self.clock.now_ms + self.fault_rng.choice((2_000, 30_000, 90_000))
        if cls != "oracle":
            self._ride_out_outage(what)
        return None if kind in ("delay", "pause", "outage") else kind

    def _ride_out_outage(self, what: str) -> None:
        if self.outage_until_ms is None or self.clock.now_ms >= self.outage_until_ms:
            return
        remaining = self.outage_until_ms - self.clock.now_ms
        if remaining <= POOL_DEADLINE_MS:
            self.clock.advance(remaining)  # the pool's retries outlast it
            self.log(f"  waited {remaining:.0f}ms for the store")
            return
        self.clock.advance(POOL_DEADLINE_MS)
        self.log("  gave up: store unavailable")
        raise StorageUnavailable(f"simulated outage: {what} gave up after {POOL_DEADLINE_MS} ms")

    def crash_current(self) -> None:
        actor = self.scheduler.current()
        self.scheduler.kill(actor, crash=True)
        self.log("CRASH")
        raise ActorCrashed(actor.name)

    def later(self, label: str, fn: Callable[[], object], rows: frozenset = frozenset()) -> None:
        """Deliver ``fn`` (a request stuck in the network or a server queue, touching ``rows``:
        (table, row) pairs) a few steps on, or earlier, at the worst moment (``worst_moment``)."""
        due = self.scheduler.step + self.fault_rng.randint(1, 40)
        self._later_seq += 1
        heapq.heappush(self._later, (due, self._later_seq, label, fn, rows))

    def _deliver_due(self, step: int | None) -> None:
        while self._later and (step is None or self._later[0][0] <= step):
            _, _, label, fn, _ = heapq.heappop(self._later)
            self.log(f"NETWORK {label}")
            fn()

    def worst_moment(self, table: str, row: bytes) -> None:
        """A compare-and-set on ``row`` is about to be judged: a stuck request on the same row
        may land right now, between the decision's read and its write (the ABA window)."""
        hits = [item for item in self._later if (table, row) in item[4]]
        for item in hits:
            if self.fault_rng.random() < 0.5:
                self._later.remove(item)
                heapq.heapify(self._later)
                self.log(f"NETWORK {item[2]} (just before a check-and-mutate of the row)")
                item[3]()

    def _on_step(self, step: int) -> None:
        self._deliver_due(step)
        if self.nemesis.enabled and self.profile.rate and self.fault_rng.random() < COMPACTION_CHANCE:
            self.nemesis.counts["compaction"] += 1
            self.log("SERVER compaction")
            self.store.compact()
        self.clock.advance(self.sched_rng.choice((0, 1, 1, 2)))

    def _on_sleep(self, seconds: float) -> None:
        if self.scheduler.current() is not None:
            self.scheduler.point()

    def _pause(self) -> None:
        """How a batching store's waiting caller lets others run: one step; in the setup and
        the checks, which run alone, time passes instead (a leader's linger ends)."""
        if self.scheduler.current() is None:
            self.clock.advance(1)
        else:
            self.idle(1)

    def idle(self, steps: int) -> None:
        """Let others run for a while (an actor between rounds of work)."""
        actor = self.scheduler.current()
        if actor is not None:
            self.scheduler.park(actor, steps)
            self.scheduler.point()

    # -- after the run -----------------------------------------------------------------------
    def heal(self) -> None:
        """No more faults: requests in flight land, the store is back, every client that ran
        is gone (so its locks are cleanable), and enough time passes for every TTL."""
        self.nemesis.enabled = False
        self._deliver_due(None)
        self.outage_until_ms = None
        self.clock.advance(POOL_DEADLINE_MS)
        self.log("HEALED")

    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.history).encode()).hexdigest()[:16]
