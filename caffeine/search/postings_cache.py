"""Posting lists of recently queried terms, held in memory and refreshed by reading changes only.

Layer: search. Imports ``caffeine.oracle.timestamps`` for the timestamp layout; I/O only through
the ``ServingTable`` it is given. ``caffeine.search.searcher.Searcher`` and ``caffeine.search.cold_reads`` ask it for a query's terms.

Why: a common term's ``postings`` row has a cell for nearly every document (20,000 at 20,000
pages). Reading such a row whole costs 50-250 ms of HBase and client time, most of it per
cell, so a search service that read every query's rows afresh could not answer common
queries in tens of milliseconds. Export writes each posting with its transaction's start
timestamp as the cell timestamp, and removes one with a tombstone at a newer timestamp
(``caffeine.percolator.serving``), so what changed in a row since a moment is exactly its
cells with newer timestamps: few, and cheap to read (Thrift2, one time range).

Contract (near-real-time, as search engines with a refresh interval are):

* **First use** of a term reads its row whole. All of one query's unknown terms are read in
  one round trip.
* **Refresh.** A term last brought up to date more than ``refresh_s`` ago is brought up to
  date before it is used: its cells with a timestamp at or above (the wall time of its last
  read − ``margin_s``) are read, in one round trip for all of the query's stale terms, and
  applied (a tombstone removes the posting). So an export is searchable at most ``refresh_s``
  after its raw write landed, provided that write landed within ``margin_s`` of its
  transaction's start timestamp (the clock in the timestamp's high bits): export writes right
  after it commits, so only a stalled exporter, or clocks more than ``margin_s`` apart, can
  land later.
* **Full reload.** A term is read whole again once its last whole read is ``full_reload_s``
  old, which bounds how long such a straggler stays unseen.
* **Ahead of queries.** ``refresh_used`` brings the held terms queried in the last
  ``ahead_window_s`` (at most ``ahead_max_terms`` of them, the most recently queried first)
  up to date (changes, or a whole read when one is due) once they are half of ``refresh_s``
  old, in batched reads: the search service calls it from a background thread every half
  ``refresh_s``, so a query of a term in use finds it fresh and waits for no read, and the
  reads are one per batch of terms instead of one per query. A term no query used for
  longer is left to age: its next query brings it up to date itself, as above.
  ``ahead_window_s=0``: nothing is read ahead (and queried terms are not tracked).
* **Bounded.** At most ``max_postings`` postings are held; the least recently used terms are
  dropped first (a term longer than that is read for its query and not kept).
* **Consistency.** Each term's postings are one state of its row as some read saw it; a
  query's terms may have been read at different moments (as before: rows are not read in a
  snapshot). Concurrent queries needing the same term wait for one read of it; a query
  whose entry is still young enough uses it while another thread reads the term again.
* Thread-safe. ``entries`` are never mutated after publication: a refresh builds a new dict
  (changes are applied to a copy), so a reader can hold one while it is replaced.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Mapping

from caffeine.oracle.timestamps import compose

from caffeine.search.ttl_cache import RecentKeys

__all__ = ["TermPostings", "PostingsCache"]

TOMBSTONE = b""


@dataclass(frozen=True)
class TermPostings:
    """One term's live postings as of one read: ``{url: decode(value)}``."""

    term: str
    postings: Mapping[str, object]
    version: int            # changes whenever ``postings`` does (a refresh that changed it)
    read_at: float          # time.time() the newest read of the row started
    whole_read_at: float    # time.time() the last whole read started
    checked_at: float       # time.monotonic() of the newest read, for refresh_s
    # What callers compute from these postings (ranking keeps its scores here): it lives and
    # is evicted with them, and is carried over by a refresh that changed nothing.
    derived: dict = field(default_factory=dict, compare=False, repr=False)


@dataclass
class CacheStats:
    whole_reads: int = 0
    change_reads: int = 0
    hits: int = 0
    postings_held: int = 0
    changes_applied: int = 0
    evictions: int = 0
    ahead_reads: int = 0      # terms brought up to date by refresh_used, not by a query


def _young(entry: TermPostings | None, now_mono: float, max_age: float) -> bool:
    """Whether ``entry`` is held and its newest read at most ``max_age`` old."""
    return entry is not None and now_mono - entry.checked_at <= max_age


def _timestamp_at(wall_s: float) -> int:
    """The smallest cell timestamp an export starting at wall time ``wall_s`` can have."""
    return compose(max(0, int(wall_s * 1000)))


class PostingsCache:
    """See the module docstring. ``read_whole(terms)`` and ``read_since(terms, ts)`` do the I/O,
    and ``decode(value)`` turns a posting's stored value into what is kept (ranking keeps the
    term frequency only):

    * ``read_whole(terms) -> {term: {url: value}}``: live postings of each row;
    * ``read_since(terms, min_ts) -> {term: {url: value}}``: each row's cells with a timestamp
      at or above ``min_ts``, newest version in that range, tombstones included (as ``b""``).
    """

    def __init__(
        self,
        read_whole: Callable[[list[str]], Mapping[str, Mapping[str, bytes]]],
        read_since: Callable[[list[str], int], Mapping[str, Mapping[str, bytes]]],
        decode: Callable[[bytes], object] = bytes,
        *,
        refresh_s: float = 1.0,
        margin_s: float = 30.0,
        full_reload_s: float = 300.0,
        max_postings: int = 2_000_000,
        ahead_window_s: float = 30.0,
        ahead_max_terms: int = 4096,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read_whole = read_whole
        self._read_since = read_since
        self._decode = decode
        self.refresh_s = refresh_s
        self.margin_s = margin_s
        self.full_reload_s = full_reload_s
        self.max_postings = max_postings
        self.ahead_window_s = ahead_window_s
        self.ahead_max_terms = ahead_max_terms
        self._clock = clock
        self._monotonic = monotonic
        self._entries: OrderedDict[str, TermPostings] = OrderedDict()
        self._lock = threading.Lock()
        self._reading: dict[str, threading.Event] = {}   # terms some thread is reading now
        self._used = RecentKeys(ahead_window_s)            # terms queried, for refresh_used
        self._versions = 0
        self.stats = CacheStats()

    def get(self, terms: list[str]) -> dict[str, TermPostings]:
        """Every term's postings, read or brought up to date as the contract says."""
        out: dict[str, TermPostings] = {}
        todo = list(dict.fromkeys(terms))
        if self.ahead_window_s > 0:  # else nothing calls refresh_used, which prunes this
            self._used.touch(todo, self._monotonic())
        while todo:
            whole, delta, waits = self._plan(todo, out, self.refresh_s)
            self._read_claimed(whole, delta, out)
            for event in waits.values():
                event.wait()
            # Terms another thread was reading: take its result (or read them ourselves if
            # its read failed or the entry was already evicted).
            todo = [t for t in waits if t not in out]
        return out

    def peek(self, terms: list[str]) -> dict[str, TermPostings] | None:
        """Every term's postings if ``get`` would return them without reading (each is held
        and at most ``refresh_s`` old), else None; reads nothing and counts nothing: a caller
        that answers from them says so with ``note_used``."""
        now_mono = self._monotonic()
        out: dict[str, TermPostings] = {}
        with self._lock:
            for term in terms:
                entry = self._entries.get(term)
                if not _young(entry, now_mono, self.refresh_s):
                    return None
                out[term] = entry
        return out

    def note_used(self, terms: list[str]) -> None:
        """What ``get`` notes of terms it found held: hits, recent use (kept first in the
        cache and, for ``refresh_used``, read ahead)."""
        todo = list(dict.fromkeys(terms))
        with self._lock:
            for term in todo:
                if term in self._entries:
                    self._entries.move_to_end(term)
            self.stats.hits += len(todo)
        if self.ahead_window_s > 0:
            self._used.touch(todo, self._monotonic())

    def refresh_used(self, batch: int = 512) -> int:
        """Bring the held terms queried in the last ``ahead_window_s`` up to date (at most
        ``ahead_max_terms``, the most recently queried first), those at least half of
        ``refresh_s`` old (module docstring, "Ahead of queries"), in reads of at most
        ``batch`` terms; terms another thread is reading are left to it. Returns how many
        terms were brought up to date. A read that fails raises (the terms stay as they
        were: their queries bring them up to date)."""
        recent = self._used.recent(self._monotonic(), self.ahead_max_terms)
        with self._lock:
            held = [term for term in recent if term in self._entries]
        done = 0
        for start in range(0, len(held), batch):
            whole, delta, _ = self._plan(held[start:start + batch], {}, self.refresh_s / 2, background=True)
            self._read_claimed(whole, delta, {}, background=True)
            done += len(whole) + len(delta)
        return done

    def _read_claimed(self, whole: list[str], delta: list[TermPostings], out: dict,
                      background: bool = False) -> None:
        """``_read`` the terms ``_plan`` claimed, then release them, whatever happens."""
        if not (whole or delta):
            return
        try:
            self._read(whole, delta, out, background)
        finally:
            with self._lock:
                for term in [*whole, *(t.term for t in delta)]:
                    self._reading.pop(term).set()

    def absent(self, terms: list[str]) -> list[str]:
        """The terms with no entry that no thread is reading: a ``get`` would read them whole."""
        with self._lock:
            return [t for t in dict.fromkeys(terms) if t not in self._entries and t not in self._reading]

    def _plan(self, terms, out, max_age: float, background: bool = False):
        """Under the lock: take what is at most ``max_age`` old; claim the reads this thread
        will do. ``background`` (``refresh_used``): terms being read are skipped rather than
        waited for, terms no longer held are not read, and nothing counts as a hit."""
        whole: list[str] = []
        delta: list[TermPostings] = []
        waits: dict[str, threading.Event] = {}
        now_mono = self._monotonic()
        now = self._clock()
        with self._lock:
            for term in terms:
                entry = self._entries.get(term)
                # A held entry young enough is used even while another thread reads the term
                # again (refresh_used keeps terms in use fresh that way): only a query whose
                # entry is missing or too old waits for that read.
                if _young(entry, now_mono, max_age):
                    if not background:
                        self._entries.move_to_end(term)
                        self.stats.hits += 1
                        out[term] = entry
                    continue
                if term in self._reading:
                    if not background:
                        waits[term] = self._reading[term]
                    continue
                if background and entry is None:
                    continue
                self._reading[term] = threading.Event()
                if entry is None or now - entry.whole_read_at >= self.full_reload_s:
                    whole.append(term)
                else:
                    delta.append(entry)
        return whole, delta, waits

    def _read(self, whole: list[str], delta: list[TermPostings], out: dict, background: bool = False) -> None:
        started, started_mono = self._clock(), self._monotonic()
        decode = self._decode
        if whole:
            rows = self._read_whole(whole)
            # Decoded before taking the lock: a common term has 20,000 postings.
            decoded = {term: {url: decode(value) for url, value in rows.get(term, {}).items()} for term in whole}
            with self._lock:
                if background:
                    self.stats.ahead_reads += len(whole)
                else:
                    self.stats.whole_reads += len(whole)
                for term, postings in decoded.items():
                    out[term] = self._publish(TermPostings(term, postings, self._next_version(),
                                                           started, started, started_mono))
        if delta:
            # One time range for the whole batch: the oldest of the entries' read times.
            since = _timestamp_at(min(e.read_at for e in delta) - self.margin_s)
            changes = self._read_since([e.term for e in delta], since)
            updated = []
            for entry in delta:
                changed = {url: None if value == TOMBSTONE else decode(value)
                           for url, value in (changes.get(entry.term) or {}).items()}
                if not any(entry.postings.get(url) != value for url, value in changed.items()):
                    updated.append((entry, None, 0))
                    continue
                postings = dict(entry.postings)
                for url, value in changed.items():
                    if value is None:
                        postings.pop(url, None)
                    else:
                        postings[url] = value
                updated.append((entry, postings, len(changed)))
            with self._lock:
                if background:
                    self.stats.ahead_reads += len(delta)
                else:
                    self.stats.change_reads += len(delta)
                for entry, postings, applied in updated:
                    if postings is None:  # unchanged: same version, same derived values
                        fresh = TermPostings(entry.term, entry.postings, entry.version, started,
                                             entry.whole_read_at, started_mono, entry.derived)
                    else:
                        self.stats.changes_applied += applied
                        fresh = TermPostings(entry.term, postings, self._next_version(), started,
                                             entry.whole_read_at, started_mono)
                    out[entry.term] = self._publish(fresh)

    def _next_version(self) -> int:
        self._versions += 1
        return self._versions

    def _publish(self, entry: TermPostings) -> TermPostings:
        """Store ``entry`` (lock held), evicting least recently used terms over the bound."""
        stats = self.stats
        old = self._entries.pop(entry.term, None)
        if old is not None:
            stats.postings_held -= len(old.postings)
        if len(entry.postings) > self.max_postings:
            return entry  # used for this query, not kept
        self._entries[entry.term] = entry
        stats.postings_held += len(entry.postings)
        while stats.postings_held > self.max_postings:
            _, dropped = self._entries.popitem(last=False)
            stats.postings_held -= len(dropped.postings)
            stats.evictions += 1
        return entry

    def clear(self) -> None:
        """Drop every entry (reads in flight still publish theirs)."""
        with self._lock:
            self._entries.clear()
            self.stats.postings_held = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def report(self) -> dict:
        """What ``/stats`` shows of the cache."""
        with self._lock:
            stats = self.stats
            return {"terms": len(self._entries), "postings": stats.postings_held, "hits": stats.hits,
                    "change_reads": stats.change_reads, "whole_reads": stats.whole_reads,
                    "evictions": stats.evictions, "ahead_reads": stats.ahead_reads}
