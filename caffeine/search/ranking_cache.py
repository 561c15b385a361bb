"""Ranked results of recent queries, reused while nothing they were computed from has changed.

Layer: search. Pure (standard library only). ``caffeine.search.searcher.Searcher`` asks it before ranking a
query over posting lists held in memory, and puts what it ranked.

Why: ranking a warm query (BM25F over its terms' lists, the all-words walk, phrase and
proximity checks on positions) costs a few milliseconds of CPU, most of a warm request's, and
query streams repeat themselves: the same queries arrive again and again while the index
under them has not changed. Search engines keep such results (Solr's ``queryResultCache``,
dropped when a new searcher opens); here the unit of change is finer than a whole index.

Contract: an entry is a query's ``caffeine.search.matching.Match`` for one ``limit``, with the *stamp* of
its inputs: the statistics snapshot's ``CorpusWeights`` (held weakly: an entry never keeps a
replaced snapshot alive), N, and the ``TermPostings.version`` of each of the query's terms.
``get`` returns it only when the caller's current stamp is the same, and ranking is a pure
function of those inputs, so a hit is exactly what ranking again would return. Queries whose
inputs are not all in the stamp (a term with documents newer than the statistics, whose
docstats are read at query time; cold queries) are not kept by the caller. Bounded: the
least recently used entries go first. Thread-safe.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Hashable

__all__ = ["RankingCache", "stamp"]


def stamp(weights, n: int, versions: tuple) -> tuple:
    """The inputs' identity: a weak reference to the snapshot's weights, N, the terms' versions."""
    return (weakref.ref(weights), n, versions)


def _same(a: tuple, b: tuple) -> bool:
    ref_a, n_a, versions_a = a
    ref_b, n_b, versions_b = b
    weights = ref_a()
    return weights is not None and weights is ref_b() and n_a == n_b and versions_a == versions_b


class RankingCache:
    """At most ``max_entries`` ranked queries (0 keeps none), holding at most ``max_hits``
    ranked documents in all: a deep page (``page × size`` up to 5,000) costs what it holds,
    and an answer over the bound alone is not kept."""

    def __init__(self, max_entries: int, max_hits: int = 100_000) -> None:
        self.max_entries = max_entries
        self.max_hits = max_hits
        self._entries: OrderedDict[Hashable, tuple[tuple, object]] = OrderedDict()
        self._held_hits = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable, current: tuple, *, count: bool = True):
        """The match kept for ``key`` if it was ranked from the inputs ``current`` names, else
        None. ``count=False``: a look that may come to nothing (``note_hit`` if it is used)."""
        if self.max_entries <= 0:
            return None
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or not _same(entry[0], current):
                self.misses += count
                return None
            self._entries.move_to_end(key)
            self.hits += count
            return entry[1]

    def note_hit(self) -> None:
        with self._lock:
            self.hits += 1

    def note_miss(self) -> None:
        """A query ranked without looking here (its answer cannot be kept)."""
        with self._lock:
            self.misses += 1

    def put(self, key: Hashable, current: tuple, match) -> None:
        """Keep ``match`` (anything with a ``hits`` list) for ``key`` under ``current``."""
        size = len(match.hits)
        if self.max_entries <= 0 or size > self.max_hits:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._held_hits -= len(old[1].hits)
            self._entries[key] = (current, match)
            self._held_hits += size
            while len(self._entries) > self.max_entries or self._held_hits > self.max_hits:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._held_hits -= len(dropped.hits)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held_hits = 0

    def report(self) -> dict:
        """What ``/stats`` shows of it."""
        with self._lock:
            return {"ranked_held": len(self._entries), "ranked_hits": self.hits, "ranked_misses": self.misses}
