"""The baton scheduler: many actor threads, exactly one running at a time, chosen by the seed.

Layer: simulation. Imports the standard library only.

Each simulated client (a transaction runner, an observer worker, a GC runner) is an ``Actor``:
a function run in its own thread. An actor runs only while it holds the baton; at every yield
point (``Scheduler.point``: each storage call, oracle call and sleep) it hands the baton back
and waits. The scheduler's loop then picks, with its own ``random.Random``, which actor moves
next, so the whole interleaving is a function of the seed: the threads never run side by side,
and nothing else (timing, the OS scheduler) decides who goes first.

Contract:
- ``point()`` from a thread that is not an actor (the run's setup and final checks, in the
  main thread) returns at once: those run alone and unscheduled.
- A killed actor (``kill``: the nemesis crashed its process, or the run hit its step budget)
  raises ``ActorCrashed`` at its current or next yield point and at every one after, so its
  unwinding code (``finally``, ``except BaseException`` handlers) can touch nothing more.
  ``ActorCrashed`` is a ``BaseException``: the code under test's ``except Exception`` cannot
  swallow a crash.
- An exception other than ``ActorCrashed`` escaping an actor is kept in ``Actor.error``: the
  runner reports it (the workloads catch every outcome the API documents, so anything else
  is a finding).
- ``run()`` returns when every actor has finished, or after ``max_steps`` steps (then the
  remaining actors are killed and ``timed_out`` is set: a liveness failure).
"""

from __future__ import annotations

import random
import threading
import traceback
from typing import Callable


class ActorCrashed(BaseException):
    """The simulated client process died here; nothing after this point happens."""


class Actor:
    def __init__(self, name: str, fn: Callable[[], None], *, crashable: bool) -> None:
        self.name = name
        self.fn = fn
        self.crashable = crashable
        self.killed = False        # crashed (by the nemesis) or stopped (step budget)
        self.crashed = False       # killed by the nemesis: its owner is dead
        self.finished = False
        self.error: BaseException | None = None
        self.error_trace = ""
        self.parked_until = 0      # not scheduled before this step (a delayed call)
        self.steps = 0
        self.process: list["Actor"] = [self]  # the threads of its process, itself included
        self._go = threading.Semaphore(0)
        self._thread: threading.Thread | None = None


class Scheduler:
    def __init__(self, rng: random.Random, *, max_steps: int = 20_000,
                 on_step: Callable[[int], None] | None = None) -> None:
        self.rng = rng
        self.max_steps = max_steps
        self.on_step = on_step or (lambda step: None)
        self.actors: list[Actor] = []
        self.step = 0
        self.timed_out = False
        self._baton = threading.Semaphore(0)
        self._local = threading.local()

    # -- setting up ------------------------------------------------------------------------
    def spawn(self, name: str, fn: Callable[[], None], *, crashable: bool = True,
              thread_of: Actor | None = None) -> Actor:
        """An actor; ``thread_of``: another thread of that actor's process (a crash of any
        thread of a process kills them all). May be called while the run goes on."""
        actor = Actor(name, fn, crashable=crashable)
        if thread_of is not None:
            actor.process = thread_of.process
            actor.process.append(actor)
            if thread_of.killed:
                actor.killed, actor.crashed = True, thread_of.crashed
        self.actors.append(actor)
        return actor

    def current(self) -> Actor | None:
        return getattr(self._local, "actor", None)

    # -- inside an actor -------------------------------------------------------------------
    def point(self) -> None:
        """Hand the baton back and wait to be picked again (no-op outside actors)."""
        actor = self.current()
        if actor is None:
            return
        if actor.killed:
            raise ActorCrashed(actor.name)
        self._baton.release()
        actor._go.acquire()
        if actor.killed:
            raise ActorCrashed(actor.name)

    def park(self, actor: Actor, steps: int) -> None:
        """Keep ``actor`` from being picked for ``steps`` steps (if anyone else can run)."""
        actor.parked_until = max(actor.parked_until, self.step + steps)

    def kill(self, actor: Actor, *, crash: bool) -> None:
        """Kill ``actor``'s process: every one of its threads."""
        for member in actor.process:
            member.killed = True
            member.crashed = member.crashed or crash

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        while True:
            live = [a for a in self.actors if not a.finished]
            if not live:
                return
            if self.step >= self.max_steps:
                self.timed_out = True
                for actor in live:
                    self.kill(actor, crash=False)
                    self._resume(actor)
                continue
            self.on_step(self.step)
            ready = [a for a in live if a.parked_until <= self.step] or live
            actor = ready[self.rng.randrange(len(ready))]
            self.step += 1
            actor.steps += 1
            self._resume(actor)

    def _resume(self, actor: Actor) -> None:
        if actor._thread is None:
            actor._thread = threading.Thread(target=self._body, args=(actor,), name=f"sim-{actor.name}", daemon=True)
            actor._thread.start()
        else:
            actor._go.release()
        self._baton.acquire()
        if actor.finished:
            actor._thread.join()

    def _body(self, actor: Actor) -> None:
        self._local.actor = actor
        try:
            if actor.killed:
                raise ActorCrashed(actor.name)
            actor.fn()
        except ActorCrashed:
            pass
        except BaseException as exc:  # reported by the runner
            actor.error = exc
            actor.error_trace = traceback.format_exc()
        finally:
            actor.finished = True
            self._baton.release()
