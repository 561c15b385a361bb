"""Run one seed, or many: build the world, run the actors, heal, check, report.

Layer: simulation. ``run_seed`` is a pure function of its arguments: the same seed (and
store model) gives the same history, byte for byte (``tests/faults/test_simulation.py`` checks it).

A run: the seed draws the workload (unless one is named), the fault profile and the
settings; the workload sets up its tables in the main thread and spawns its actors; the
scheduler runs them to the end under the nemesis; then ``Sim.heal`` stops the faults, lets
requests still in flight land and lets every lock's owner be dead; the workload's checks run
last, in the main thread. ``Result.violations`` lists every broken invariant, the first first.
"""

from __future__ import annotations

import gc
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

from caffeine.percolator import backends
from caffeine.sim.clock import patched
from caffeine.sim.world import Sim
from caffeine.sim.workloads import WORKLOADS


@dataclass
class Result:
    seed: int
    workload: str
    profile: str
    violations: list[str]
    faults: Counter
    steps: int
    history: list[str] = field(repr=False)
    digest: str = ""
    operations: Counter = field(default_factory=Counter)
    # The batching stores' calls: all, those carrying several callers' requests, requests;
    # combined calls that failed (for every caller in them) and whose outcome was unknown;
    # checked calls in which some rows were refused and others applied.
    batching: Counter = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.violations

    def report(self) -> str:
        lines = [f"seed {self.seed}: workload {self.workload}, {self.steps} steps, faults {self.profile}"]
        lines.append("faults injected: " + (", ".join(f"{k}={v}" for k, v in sorted(self.faults.items())) or "none"))
        if self.operations:
            lines.append("operations: " + ", ".join(f"{k}={v}" for k, v in sorted(self.operations.items())))
        for v in self.violations:
            lines.append(f"VIOLATION: {v}")
        return "\n".join(lines)


def run_seed(seed: int, workload: str | None = None, *, resend_same_token: bool = False,
             cas_error_is_unknown: bool = True, max_steps: int = 20_000, committer: str = backends.FALLBACK) -> Result:
    # A seed's run must be a function of the seed: a transaction or snapshot dropped in a
    # reference cycle (a crashed actor's frames) releases GC's horizon from a finalizer, which
    # the cyclic collector would run at a moment set by the allocations of everything that ran
    # before in the process. So the collector starts each seed empty and runs only between seeds.
    collector_was_on = gc.isenabled()
    gc.collect()
    gc.freeze()  # what survived is long-lived: the next seeds' collections need not walk it
    gc.disable()
    try:
        return _run_seed(seed, workload, resend_same_token=resend_same_token, cas_error_is_unknown=cas_error_is_unknown,
                         max_steps=max_steps, committer=committer)
    finally:
        if collector_was_on:
            gc.enable()


def _run_seed(seed: int, workload: str | None, *, resend_same_token: bool, cas_error_is_unknown: bool,
              max_steps: int, committer: str) -> Result:
    sim = Sim(seed, resend_same_token=resend_same_token, cas_error_is_unknown=cas_error_is_unknown,
              max_steps=max_steps, committer=committer)
    name = workload or sim.workload_rng.choice(sorted(WORKLOADS))
    # The code under test warns about every fault.
    quiet = [logging.getLogger(name) for name in ("caffeine", "crawler")]
    levels = [logger.level for logger in quiet]
    for logger in quiet:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        with patched(sim.virtual_time, sim.random):
            sim.log(f"seed {seed} workload {name} faults {sim.profile} ttl={sim.settings.lock_ttl_ms}ms")
            world = WORKLOADS[name](sim)
            sim.scheduler.run()
            sim.heal()
            for actor in sim.scheduler.actors:
                if actor.error is not None:
                    sim.violation(f"actor {actor.name} raised {type(actor.error).__name__}: {actor.error}\n{actor.error_trace}")
            if sim.scheduler.timed_out:
                sim.violation(f"liveness: actors still running after {sim.scheduler.max_steps} steps")
            try:
                world.check()
            except Exception as exc:  # a check that cannot even read the store is a finding
                import traceback
                sim.violation(f"final check raised {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
    finally:
        for logger, level in zip(quiet, levels):
            logger.setLevel(level)
    stats = sim.store.stats.as_dict()
    batching = Counter({"calls": stats.get("batched_calls", 0), "combined calls": stats.get("combined_calls", 0),
                        "requests": stats.get("batched_requests", 0),
                        "combined calls failed": stats.get("combined_calls_failed", 0),
                        "of them unknown": stats.get("combined_calls_unknown", 0),
                        "checked calls partly refused": stats.get("checked_calls_partly_refused", 0),
                        "leaders that waited for the gang": stats.get("lockstep_waits", 0)})
    return Result(seed, name, str(sim.profile), sim.violations, Counter(sim.nemesis.counts),
                  sim.scheduler.step, sim.history, sim.digest(), Counter(sim.operations), batching)


@dataclass
class Summary:
    seeds: int = 0
    failed: list[Result] = field(default_factory=list)
    faults: Counter = field(default_factory=Counter)
    workloads: Counter = field(default_factory=Counter)
    operations: Counter = field(default_factory=Counter)
    batching: Counter = field(default_factory=Counter)
    steps: int = 0
    seconds: float = 0.0

    def add(self, result: Result) -> None:
        self.seeds += 1
        self.faults.update(result.faults)
        self.operations.update(result.operations)
        self.batching.update(result.batching)
        self.workloads[result.workload] += 1
        self.steps += result.steps
        if not result.ok:
            self.failed.append(result)

    def report(self) -> str:
        rate = self.seeds / self.seconds if self.seconds else 0.0
        return "\n".join([
            f"seeds run: {self.seeds} in {self.seconds:.1f}s ({rate:.0f} seeds/s, {self.steps} steps)",
            "workloads: " + ", ".join(f"{k}={v}" for k, v in sorted(self.workloads.items())),
            "faults injected: " + ", ".join(f"{k}={v}" for k, v in sorted(self.faults.items())),
            "operations: " + (", ".join(f"{k}={v}" for k, v in sorted(self.operations.items())) or "none"),
            "batching stores: " + ", ".join(f"{k}={v}" for k, v in sorted(self.batching.items())),
            f"violations: {len(self.failed)} seeds"
            + (": " + " ".join(str(r.seed) for r in self.failed[:50]) if self.failed else ""),
        ])


def run_seeds(seeds, workload: str | None = None, *, progress=None, **model) -> Summary:
    summary = Summary()
    started = time.perf_counter()
    for seed in seeds:
        result = run_seed(seed, workload, **model)
        summary.add(result)
        if progress is not None:
            progress(result)
    summary.seconds = time.perf_counter() - started
    return summary
