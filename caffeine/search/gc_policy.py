"""The search service's garbage-collector policy, in one place so that the service and the
benchmarks that measure its read path (``bench/bench_cold.py``, ``bench/bench_search.py``)
run under the same one: ``caffeine.gc_policy``'s, which the observer workers share.

Layer: search. Process-wide: ``api.main``'s lifespan applies it to a service that connects
itself, never to the many apps tests build in one process.
"""

from __future__ import annotations

from caffeine.gc_policy import apply_long_running_policy, fewer_full_collections, freeze_what_startup_made

__all__ = ["fewer_full_collections", "freeze_what_startup_made", "apply_service_policy"]


def apply_service_policy() -> None:
    """``caffeine.gc_policy.apply_long_running_policy``, as the service applies it once its
    first snapshot is read (so that snapshot is frozen with the rest of start-up)."""
    apply_long_running_policy()
