"""caffeine.search.ranking_cache: a ranked answer is returned only for the very inputs it was ranked from."""

from __future__ import annotations

import gc

from caffeine.search.ranking_cache import RankingCache, stamp


class Weights:
    """Stands in for a statistics snapshot's CorpusWeights (only its identity matters)."""


class Answer:
    """Stands in for an caffeine.search.matching.Match (only its hits' number matters)."""

    def __init__(self, hits: int = 10) -> None:
        self.hits = [None] * hits


def test_an_answer_is_returned_only_for_the_same_snapshot_n_and_term_versions():
    cache = RankingCache(8)
    weights = Weights()
    answer = Answer()
    cache.put("q", stamp(weights, 100, (1, 2)), answer)
    assert cache.get("q", stamp(weights, 100, (1, 2))) is answer
    assert cache.get("q", stamp(weights, 100, (1, 3))) is None      # a term's list changed
    assert cache.get("q", stamp(weights, 101, (1, 2))) is None      # N changed
    assert cache.get("q", stamp(Weights(), 100, (1, 2))) is None    # another snapshot
    assert cache.get("other", stamp(weights, 100, (1, 2))) is None
    assert cache.report() == {"ranked_held": 1, "ranked_hits": 1, "ranked_misses": 4}


def test_an_entry_keeps_no_snapshot_alive_and_outlives_none():
    cache = RankingCache(8)
    weights = Weights()
    cache.put("q", stamp(weights, 1, ()), Answer())
    old = stamp(weights, 1, ())
    del weights
    gc.collect()
    assert old[0]() is None  # the cache held it weakly
    assert cache.get("q", old) is None


def test_the_least_recently_used_go_first_and_zero_keeps_nothing():
    cache = RankingCache(2)
    weights = Weights()
    s = stamp(weights, 1, ())
    a, b, c = Answer(), Answer(), Answer()
    cache.put("a", s, a)
    cache.put("b", s, b)
    assert cache.get("a", s) is a
    cache.put("c", s, c)
    assert cache.get("b", s) is None and cache.get("a", s) is a and cache.get("c", s) is c
    off = RankingCache(0)
    off.put("a", s, a)
    assert off.get("a", s) is None and off.report()["ranked_held"] == 0


def test_the_hits_held_are_bounded_and_an_answer_over_the_bound_is_not_kept():
    cache = RankingCache(100, max_hits=30)
    weights = Weights()
    s = stamp(weights, 1, ())
    cache.put("a", s, Answer(10))
    cache.put("b", s, Answer(10))
    cache.put("c", s, Answer(10))
    assert cache.report()["ranked_held"] == 3
    cache.put("d", s, Answer(10))        # over 30 hits: the least recently used goes
    assert cache.get("a", s) is None and cache.get("d", s) is not None
    cache.put("e", s, Answer(31))        # alone over the bound: not kept, nothing pushed out
    assert cache.get("e", s) is None and cache.report()["ranked_held"] == 3
