"""The deterministic fault simulation: Caffeine's correctness gate.

Layer: simulation. Test support, on top: it drives the protocol, the library's operations and
the applications' (the crawler's ingest); nothing imports it. Nothing user-facing uses it.

Run it::

    python3 -m caffeine.sim --seeds 2000                 # what CI runs, with each committer (pytest tests/faults/test_simulation.py)
    python3 -m caffeine.sim --seed 253                   # one run, exactly reproduced, history on failure
    python3 -m caffeine.sim --seeds 100000 --jobs 2      # nightly, per committer: ~40 min on 2 cores
    CAFFEINE_SIM_SEEDS=100000 python3 -m pytest tests/faults/test_simulation.py -k sweep   # the same from pytest

What a run is. A seed draws a workload (``workloads``: bank transfers; transfers across two
tables with GC of some tables or all; snapshot-isolation registers; an observer chain;
backfills racing observers whose post-commit work fails; installs and removals of observed
columns while writers commit; WARC ingests with repeated and reordered records), a fault
profile and the settings. Every simulated client (a transaction runner, an observer worker,
a GC runner, a backfill, an installer, an ingest and its writer threads) is an actor thread,
but only one runs at a
time (``scheduler``): every storage call, oracle call and sleep hands the baton back, and the
seeded scheduler picks who moves next. Each storage call first meets the nemesis
(``nemesis``): lost replies, lost or late requests, re-sends, errors before and after applying,
crashes, pauses past the owner grace period, store outages, oracle restarts, compactions
(``store``: ``SimStore`` models what the HBase store and its connection pool turn each of
those into). Requests that land late may land at the worst moment: between another row
transaction's read of the same row and its compare-and-set. After the actors finish, the faults stop (``Sim.heal``) and the workload's
checkers run: claims against the ledger of every write record that ever landed, atomicity,
every read against the committed history, first committer wins, bank totals, no lock left
stuck, observer runs (none lost or repeated, post-commit work done), notifications after an
install, a URL's last response kept. Each run also counts the operations its workload ran,
by kind (GC passes, backfills, installs, ingests).

Why it is deterministic (``tests/faults/test_simulation.py`` checks the same seed gives the same
history, also under two different ``PYTHONHASHSEED`` values):

- one actor runs at a time, and the scheduler's choices come from the seed;
- clusters get an inline commit executor and no heartbeat thread (``world``); owner liveness
  is the simulation's (alive while the actor runs; dead once crashed, finished or paused);
- time is virtual (``clock``): ``time`` and ``random`` inside ``caffeine`` are swapped for a
  virtual clock and a seeded generator during a run, so TTLs, deadlines and backoffs are
  functions of the seed, and sleeping costs nothing but lets others run;
- guard tokens of blind writes come from a counter; row-transaction tokens (``os.urandom``)
  are only compared for equality; no decision iterates an unordered set of str or bytes.

A seed is a regression case for the code it ran against: a change to the code under test
changes the calls it makes and so the interleaving a seed produces. Failing seeds found are
pinned in ``tests/faults/test_simulation.py`` all the same, next to the bug each one found.
"""

from caffeine.sim.runner import Result, Summary, run_seed, run_seeds

__all__ = ["Result", "Summary", "run_seed", "run_seeds"]
