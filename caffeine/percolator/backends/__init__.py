"""The commit backends, by name: the one list that every place naming a backend reads.

Layer: percolator. Internal. Each backend is a module of this package with its ``BACKEND``
(``caffeine.percolator.committer.Backend``: its ``Committer``, the server-side row step it
needs as the in-memory store's model, the probe that finds that on a cluster); ``BACKENDS``
lists them. The ``committer`` setting (``CAFFEINE_COMMITTER``; the simulation's
``--committer``) names one, or ``auto``:

- a named backend is used if its probe (when it has one) finds what it needs on the cluster,
  else ``choose`` raises ``BackendUnavailable`` saying what to do;
- ``auto`` takes the first backend in ``BACKENDS`` whose probe finds its server side, else
  ``FALLBACK``, which needs nothing on the server.

``memory_store(setting)`` is an in-memory store on which a setting picks what it picks on an
HBase that runs every backend's server side, so tests and the simulation run each backend's
row steps without HBase. Adding a backend: its module here, and its entry in ``BACKENDS``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from caffeine.percolator.backends import cas, coprocessor
from caffeine.percolator.committer import Backend, BackendUnavailable, Committer
from caffeine.storage import Store

if TYPE_CHECKING:
    from caffeine.storage.memory import MemoryStore

log = logging.getLogger(__name__)

# In ``auto``'s order of preference.
BACKENDS: dict[str, Backend] = {b.name: b for b in (coprocessor.BACKEND, cas.BACKEND)}
# What ``auto`` falls back on, and the default where nothing is probed (the simulation).
FALLBACK = cas.BACKEND.name
AUTO = "auto"
# Every value of the ``committer`` setting.
SETTINGS = (AUTO, *BACKENDS)


def get(setting: str) -> Backend:
    """The backend a ``committer`` setting names (``auto``: the one it prefers where every
    backend's server side runs); ValueError for any other name."""
    if setting == AUTO:
        return next((b for b in BACKENDS.values() if b.probe is not None), BACKENDS[FALLBACK])
    if setting not in BACKENDS:
        raise ValueError(f"committer must be one of {', '.join(SETTINGS)}, not {setting!r}")
    return BACKENDS[setting]


def by_name(name: str) -> Committer:
    """The committer of a backend name, without probing (tests and the simulation)."""
    return BACKENDS[name].committer()


def memory_store(setting: str) -> MemoryStore:
    """An in-memory store on which ``setting`` picks the backend it picks on an HBase that runs
    them all: it runs the server-side row step of the backend named (for ``auto``, of the
    first it would probe)."""
    return get(setting).memory_store()


def choose(setting: str, store: Store, probe_table: str) -> Committer:
    """The committer for the ``committer`` setting (see the module docstring); the probes
    write to ``probe_table``, a system table the caller has created."""
    backend = get(setting)
    if setting != AUTO:
        if backend.probe is not None and not backend.probe(store, probe_table):
            raise BackendUnavailable(backend.missing)
        return backend.committer()
    probed = [b for b in BACKENDS.values() if b.probe is not None]
    for backend in probed:
        if backend.probe(store, probe_table):
            return backend.committer()
    log.info("committer: %s (no %s answered the probe on %s)",
             FALLBACK, " or ".join(b.name for b in probed), probe_table)
    return BACKENDS[FALLBACK].committer()


__all__ = ["AUTO", "BACKENDS", "FALLBACK", "SETTINGS", "BackendUnavailable", "by_name", "choose", "get", "memory_store"]
