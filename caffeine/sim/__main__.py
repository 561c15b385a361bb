"""``python3 -m caffeine.sim``: run the fault simulation from the command line.

    python3 -m caffeine.sim --seeds 1000              # seeds 0..999, a summary at the end
    python3 -m caffeine.sim --seed 253                # one run; its history if it fails
    python3 -m caffeine.sim --seed 253 --history      # ... and always
    python3 -m caffeine.sim --seeds 100000 --jobs 2   # the nightly run
    python3 -m caffeine.sim --seeds 3000 --legacy-store   # model the HBase store before e7d0415/67a9c23
    python3 -m caffeine.sim --seeds 3000 --committer coprocessor   # the coprocessor backend's row steps

Exit status 1 if any seed broke an invariant.

Layer: simulation. The command line only.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor

from caffeine.percolator import backends
from caffeine.sim.runner import Summary, run_seed, run_seeds
from caffeine.sim.workloads import WORKLOADS


def _chunk(args) -> Summary:
    seeds, workload, model = args
    summary = run_seeds(seeds, workload, **model)
    for result in summary.failed:
        result.history = []  # the parent prints seeds; ``--seed N`` reproduces a history
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m caffeine.sim", description=__doc__.split("\n\n")[0])
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=int, default=1000, help="how many seeds to run (default 1000)")
    which.add_argument("--seed", type=int, help="run this one seed and show its report (and history on failure)")
    parser.add_argument("--start", type=int, default=0, help="first seed of --seeds (default 0)")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), help="run only this workload (default: the seed picks)")
    parser.add_argument("--jobs", type=int, default=1, help="processes for --seeds (default 1)")
    parser.add_argument("--history", action="store_true", help="with --seed: print the history even if the run passes")
    parser.add_argument("--legacy-store", action="store_true",
                        help="model the HBase store as it was before e7d0415 and 67a9c23: a re-sent blind write "
                             "reuses its guard token, a server-side error on check-and-mutate is a plain StorageError")
    parser.add_argument("--committer", choices=tuple(backends.BACKENDS), default=backends.FALLBACK,
                        help=f"the commit backend (default {backends.FALLBACK}); coprocessor runs the row steps' "
                             "Python model inside the simulated store")
    args = parser.parse_args(argv)
    model = dict(resend_same_token=args.legacy_store, cas_error_is_unknown=not args.legacy_store,
                 committer=args.committer)

    if args.seed is not None:
        result = run_seed(args.seed, args.workload, **model)
        if not result.ok or args.history:
            print("\n".join(result.history))
            print()
        print(result.report())
        print(f"history digest {result.digest}")
        return 0 if result.ok else 1

    seeds = range(args.start, args.start + args.seeds)

    def progress(result):
        if not result.ok:
            first = result.violations[0].splitlines()[0]
            print(f"FAIL seed {result.seed} ({result.workload}): {first}", flush=True)

    if args.jobs <= 1:
        summary = run_seeds(seeds, args.workload, progress=progress, **model)
    else:
        import time

        started = time.perf_counter()
        size = max(1, len(seeds) // (args.jobs * 20))
        chunks = [(seeds[i:i + size], args.workload, model) for i in range(0, len(seeds), size)]
        summary = Summary()
        with ProcessPoolExecutor(args.jobs) as pool:
            for part in pool.map(_chunk, chunks):
                for result in part.failed:
                    progress(result)
                summary.seeds += part.seeds
                summary.failed += part.failed
                summary.faults.update(part.faults)
                summary.operations.update(part.operations)
                summary.batching.update(part.batching)
                summary.workloads.update(part.workloads)
                summary.steps += part.steps
        summary.seconds = time.perf_counter() - started
    print(summary.report())
    if summary.failed:
        print("reproduce one with: python3 -m caffeine.sim --seed N" + (" --legacy-store" if args.legacy_store else "")
              + (f" --committer {args.committer}" if args.committer != backends.FALLBACK else ""))
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
