"""The pseudo-language of the generated web: a seeded vocabulary, Zipf weights, marker words.

Layer: testweb. Imports the standard library only; pure.
"""

from __future__ import annotations

import random

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh", "tr", "gl"]
_VOWELS = ["a", "e", "i", "o", "u", "ä", "ö", "y", "ai", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "l", "m"]
# Markers start with "qu", which no vocabulary word does, and encode the page number in
# syllables, so each marker is unique by construction.
_MARKER_SYLLABLES = [o + v for o in ("b", "d", "k", "l", "m", "n", "r", "t") for v in ("a", "e", "i", "o")]


def vocabulary(seed: int, size: int) -> list[str]:
    """``size`` distinct words of one to four syllables (some with non-ASCII letters), a pure
    function of ``seed``; none starts with "qu" (the markers' prefix)."""
    rng = random.Random(f"{seed}:vocabulary")
    words: list[str] = []
    seen = set()
    while len(words) < size:
        syllables = rng.choice((1, 2, 2, 2, 3, 3, 4))
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        if word not in seen and not word.startswith("qu"):
            seen.add(word)
            words.append(word)
    return words


def marker_word(n: int) -> str:
    """The unique word of page ``n``: "qu" and ``n`` in syllable digits."""
    digits = []
    while True:
        n, d = divmod(n, len(_MARKER_SYLLABLES))
        digits.append(_MARKER_SYLLABLES[d])
        if n == 0:
            break
    return "qu" + "".join(reversed(digits))


def zipf_cum_weights(n: int, s: float = 1.1) -> list[float]:
    """Cumulative Zipf weights of ranks 1..n (``random.choices(cum_weights=...)``)."""
    total, out = 0.0, []
    for rank in range(1, n + 1):
        total += 1.0 / rank**s
        out.append(total)
    return out

