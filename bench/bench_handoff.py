#!/usr/bin/env python3
"""What combining calls across threads costs the client: CPU per request of the batching
store's leader protocol (``caffeine.storage.call_batcher``) against each caller sending alone.

A worker runs up to 16 observer runs at once, each on its own thread; the batching store
combines their storage calls, and the lockstep gang makes a round of them wait for each
other (``caffeine.storage.lockstep``). Every request then costs two thread hand-offs at
least: the caller blocks on its own wake and the leader wakes it with the answer (a futex
call each way, and the woken thread's wait for the GIL). This bench measures that toll with
no server at all: ``--threads`` callers in a gang each submit ``--requests`` requests, doing
``--work-us`` of Python work between them; the call itself is a sleep of ``--call-us``
(releasing the GIL, as a socket wait does) and returns at once.

Reported per request, process CPU (user, system) from ``getrusage``:

- ``alone``: each thread calls the sleep itself (no batcher, no gang): the floor;
- ``batched``: through a ``CallBatcher`` and ``Lockstep`` as a worker's store has them (one
  call in flight, lockstep wait up to 5 ms): requests per call, and CPU per request;
- ``greenlets`` (``--greenlets``): the same callers as greenlets of one thread, the batcher's
  and the gang's ``pause`` (the hook the fault simulation drives) switching to a hub that
  runs the next ready one: what the protocol would cost a wave run as coroutines, with no
  thread hand-off at all. (The gang keeps its per-caller state in a ``threading.local``;
  here it is replaced by a per-greenlet one.) Needs ``greenlet`` (``pip install -e '.[bench]'``).

The difference is the protocol's toll per request on this machine, to set against what a
combined call saves (the per-call toll of a Thrift round trip: ``bench_storage_toll.py``).

    python3 bench/bench_handoff.py [--threads 1,4,16] [--requests 2000] [--work-us 200] [--call-us 500] [--greenlets]

Needs no runtime.
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from caffeine.storage.call_batcher import CallBatcher  # noqa: E402
from caffeine.storage.lockstep import Lockstep  # noqa: E402


def _calibrate() -> float:
    """Iterations of ``spin``'s loop per µs on this machine (best of 5)."""
    n, best = 200_000, float("inf")
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(n):
            pass
        best = min(best, time.perf_counter() - began)
    return n / (best * 1e6)


_PER_US = _calibrate()


def spin(us: float) -> None:
    """About ``us`` µs of Python work holding the GIL (an observer's own CPU between calls);
    a counted loop, no clock read, which would be a system call each time."""
    for _ in range(int(us * _PER_US)):
        pass


def sleeping_send(call_us: float):
    """(send, calls): a call that sleeps ``call_us`` and answers its items, and its count."""
    calls = [0]

    def send(items: list) -> list:
        calls[0] += 1
        time.sleep(call_us / 1e6)
        return items

    return send, calls


def per_request(before, after, requests: int, calls: int) -> tuple[float, float, float]:
    """(user µs, system µs, requests per call) per request between two ``getrusage``s."""
    return ((after.ru_utime - before.ru_utime) / requests * 1e6,
            (after.ru_stime - before.ru_stime) / requests * 1e6, requests / max(calls, 1))


def measure(threads: int, requests: int, work_us: float, call_us: float, batched: bool) -> tuple[float, float, float]:
    """(user µs, system µs, requests per call) per request, over all threads."""
    send, calls = sleeping_send(call_us)
    lockstep = Lockstep(0.005)
    batcher = CallBatcher(send, lockstep=lockstep)

    def caller() -> None:
        with lockstep.member(enlisted=True):
            for i in range(requests):
                spin(work_us)
                if batched:
                    batcher.submit([i])
                else:
                    send([i])

    pool = [threading.Thread(target=caller) for _ in range(threads)]
    lockstep.enlist(threads)
    before = resource.getrusage(resource.RUSAGE_SELF)
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return per_request(before, after, threads * requests, calls[0])


class _GreenletLocal:
    """``threading.local``'s attribute contract, per greenlet (``current()``) instead of per
    thread."""

    def __init__(self, current) -> None:
        object.__setattr__(self, "_values", {})
        object.__setattr__(self, "_current", current)

    def __getattr__(self, name: str):
        try:
            return self._values[self._current(), name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self._values[self._current(), name] = value


def measure_greenlets(callers: int, requests: int, work_us: float, call_us: float) -> tuple[float, float, float]:
    """``measure(batched=True)`` with the callers as greenlets of this thread."""
    from collections import deque

    from greenlet import getcurrent, greenlet

    send, calls = sleeping_send(call_us)
    hub = getcurrent()
    ready: deque = deque()

    def pause() -> None:
        ready.append(getcurrent())
        hub.switch()

    lockstep = Lockstep(0.005, pause=pause)
    lockstep._local = _GreenletLocal(getcurrent)
    batcher = CallBatcher(send, lockstep=lockstep, pause=pause)

    def caller() -> None:
        with lockstep.member(enlisted=True):
            for i in range(requests):
                spin(work_us)
                batcher.submit([i])

    lockstep.enlist(callers)
    ready.extend(greenlet(caller, parent=hub) for _ in range(callers))
    before = resource.getrusage(resource.RUSAGE_SELF)
    while ready:
        let = ready.popleft()
        if not let.dead:
            let.switch()
    after = resource.getrusage(resource.RUSAGE_SELF)
    return per_request(before, after, callers * requests, calls[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,4,16", help="callers (threads, or greenlets)")
    parser.add_argument("--requests", type=int, default=2000, help="requests per caller")
    parser.add_argument("--work-us", type=float, default=200.0, help="Python work between a caller's requests")
    parser.add_argument("--call-us", type=float, default=500.0, help="each call's wait (a sleep)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--greenlets", action="store_true", help="also the callers as greenlets of one thread")
    args = parser.parse_args()
    arms = ["alone", "batched"] + (["greenlets"] if args.greenlets else [])
    print(f"CPU µs per request (medians of {args.repeats}, arms alternated), {args.work_us:g} µs of work between "
          f"requests, calls of {args.call_us:g} µs; toll: user+system over alone's")
    for threads in (int(t) for t in args.threads.split(",")):
        runs: dict[str, list] = {arm: [] for arm in arms}
        for _ in range(args.repeats):
            for arm in arms:
                if arm == "greenlets":
                    runs[arm].append(measure_greenlets(threads, args.requests, args.work_us, args.call_us))
                else:
                    runs[arm].append(measure(threads, args.requests, args.work_us, args.call_us, arm == "batched"))
        med = {arm: [sorted(r[i] for r in v)[len(v) // 2] for i in range(3)] for arm, v in runs.items()}
        floor = med["alone"][0] + med["alone"][1]
        parts = [f"{arm} user {m[0]:.1f} sys {m[1]:.1f} ({m[2]:.1f} req/call, toll {m[0] + m[1] - floor:.1f})"
                 for arm, m in med.items()]
        print(f"{threads:>3} callers: " + "; ".join(parts))


if __name__ == "__main__":
    main()
