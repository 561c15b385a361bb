"""The search service's garbage-collector policy, in one place so that the service and the
benchmarks that measure its read path (``bench/bench_cold.py``, ``bench/bench_search.py``)
run under the same one.

Layer: search. Standard library only. Process-wide: ``api.main``'s lifespan applies it to a
service that connects itself, never to the many apps tests build in one process.
"""

from __future__ import annotations

import gc

__all__ = ["fewer_full_collections", "freeze_what_startup_made", "apply_service_policy"]


def fewer_full_collections() -> None:
    """Run CPython's full garbage collection a tenth as often as by default.

    The service keeps posting lists, term scores and result texts in memory, and replaces
    them as the index changes: a steady stream of long-lived objects, which at the default
    thresholds (700, 10, 10) set off a full collection about every 0.6 s at 16 clients on the
    20,000-page index, each a 40-50 ms pause for every request in flight. With (700, 10, 100)
    the young collections stay as short (at most 1 and 4 ms measured), and a full one runs
    about every 6 s. Nothing the service caches holds reference cycles, so memory is freed by
    reference counting as before; only cyclic garbage waits longer.
    """
    gen0, gen1, _ = gc.get_threshold()
    gc.set_threshold(gen0, gen1, 100)


def freeze_what_startup_made() -> None:
    """Keep what start-up made out of every later full garbage collection.

    A full collection traverses every tracked object, and ~65,000 of them (the modules,
    classes and functions of FastAPI, pydantic, Thrift and the service, and the first
    statistics snapshot: one ``DocStats`` per document) live as long as the process: they
    alone made each full collection 50-65 ms of CPU at 20,000 pages, a pause for every
    request in flight. ``gc.freeze`` moves them to a generation the collector skips.
    Reference counting still frees any of them that is dropped (a replaced snapshot); only a
    reference cycle among them would stay, and they hold none that is ever dropped.
    """
    gc.collect()
    gc.freeze()


def apply_service_policy() -> None:
    """Both of the above, as the service applies them once its first snapshot is read."""
    fewer_full_collections()
    freeze_what_startup_made()
