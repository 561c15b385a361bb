"""Garbage-collector policies for Caffeine's long-running processes: the search service and the
observer workers, which keep many objects for the process's life and make a steady stream of
short-lived ones.

Layer: shared. Imports nothing from caffeine (standard library only). Process-wide: a process
applies them once, after its start-up (``caffeine worker``; the search service,
``caffeine.search.gc_policy``), never a library call on its caller's behalf.

CPython's full collection walks every tracked object. At the default thresholds (700, 10, 10)
it runs whenever the objects that survived two young collections have grown by a quarter of
the long-lived ones, so a process whose caches and in-flight work churn runs one every second
or two, each walking its modules, classes and caches again:

- the search service at 16 clients on the 20,000-page index: a full collection about every
  0.6 s, each a 40-50 ms pause for every request in flight;
- an observer worker under the pipeline (``bench_pipeline.py --pages 2000``, 16 threads): 34
  full collections in 20 s of CPU, 47 ms each, 1.6 s in all, and 2.3 s (12% of the worker's
  CPU) in collections of every generation. Most of what an observer run allocates (rows,
  puts, Thrift structs, decoded records) is freed by reference counting as soon as the run
  ends; the collector finds little to free.
"""

from __future__ import annotations

import gc

__all__ = ["fewer_full_collections", "freeze_what_startup_made", "apply_long_running_policy"]


def fewer_full_collections() -> None:
    """Run CPython's full garbage collection a tenth as often as by default: thresholds
    (700, 10, 100). Young collections stay as short as before (the search service measured at
    most 1 and 4 ms); a full one runs about every 6 s in the service. What the processes drop
    is freed by reference counting, or when it is a young reference cycle by the young
    collections, as before; only cycles that have aged into the oldest generation wait
    longer (about ten times as long)."""
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(gen0, gen1, 100)


def freeze_what_startup_made() -> None:
    """Keep what start-up made out of every later full garbage collection.

    A full collection traverses every tracked object, and most of a long-running process's
    live objects are made once at start-up (modules, classes and functions of the libraries
    and of Caffeine; for the service, ~65,000 of them with its first statistics snapshot,
    50-65 ms of CPU per full collection at 20,000 pages). ``gc.freeze`` moves them to a
    generation the collector skips. Reference counting still frees any of them that is
    dropped; only a reference cycle among them would stay, and they hold none that is ever
    dropped.
    """
    gc.collect()
    gc.freeze()


def apply_long_running_policy() -> None:
    """Both of the above, once start-up is done."""
    fewer_full_collections()
    freeze_what_startup_made()
