"""The generated vocabulary of the search benchmarks: syllable words with Zipf weights.

``bench_search``'s pages and queries and ``direct_index``'s documents draw from it, so a
query's words are words of the index whichever way it was built. Its own module, so the two
import it without importing each other. Needs the repository root on ``sys.path`` (for
``testweb.language``), as every benchmark script puts it.
"""

from __future__ import annotations

import random

from testweb.language import zipf_cum_weights

SYLLABLES = "ka lo mi ne ru sa ti vo ze pa qu be do fi gu ha ja le mo ni".split()


def vocabulary(n: int, rng: random.Random) -> list[str]:
    words: dict[str, None] = {}
    while len(words) < n:
        words["".join(rng.choice(SYLLABLES) for _ in range(rng.randrange(2, 5)))] = None
    return list(words)


def zipf_weights(n: int, s: float = 1.05) -> list[float]:
    return zipf_cum_weights(n, s)
