"""``neardup.shingles`` and ``neardup.sketch`` give exactly what their plain per-token,
per-shingle form gives (kept here as the reference): a stored sketch made before compares
with one made now, so the near-duplicate pairs cannot move."""

from __future__ import annotations

import glob

import mmh3
import numpy as np
import pytest
from breame.data.spelling_constants import BRITISH_ENGLISH_SPELLINGS
from hypothesis import given, settings
from hypothesis import strategies as st

from caffeine.index import neardup, parse_html
from caffeine.index.text import tokenize


def reference_shingles(text: str) -> set[str]:
    words = [BRITISH_ENGLISH_SPELLINGS.get(t, t) for t in tokenize(text)]
    n = neardup.SHINGLE_WORDS
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def reference_sketch(title: str, text: str) -> bytes | None:
    found = reference_shingles(text)
    if not found:
        return None
    hashes = np.unique(np.fromiter((mmh3.hash(s.encode("utf-8", "surrogatepass"), 0, signed=False) for s in found),
                                   dtype=np.uint32, count=len(found)))
    m = neardup._TEMPLATE.copy()
    m.update_batch(hashes.tolist())
    folded_title = " ".join(BRITISH_ENGLISH_SPELLINGS.get(t, t) for t in tokenize(title))
    title_key = mmh3.hash64(folded_title.encode("utf-8", "surrogatepass"), 0, signed=False)[0]
    return (neardup.struct.pack(">Q", title_key) + neardup._VALUES.pack(*m.hashvalues.tolist())
            + hashes.astype(">u4").tobytes())


_BRITISH = sorted(BRITISH_ENGLISH_SPELLINGS)[:200]
_WORDS = st.one_of(st.sampled_from(_BRITISH), st.sampled_from(["the", "a", "colour", "Colour", "x", "x"]),
                   st.text(min_size=1, max_size=8))
_TEXTS = st.lists(_WORDS, max_size=40).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(_TEXTS, _TEXTS)
def test_shingles_and_sketch_are_the_references(title, text):
    assert neardup.shingles(text) == reference_shingles(text)
    assert neardup.sketch(title, text) == reference_sketch(title, text)


@pytest.mark.parametrize("text", ["", "one", "one two", "one two three", "a a a a", "colour centre dialogue colour",
                                  "x\ud800y z w", "İ Σ ΟΔΟΣ'Α b c"])
def test_short_and_odd_texts(text):
    assert neardup.shingles(text) == reference_shingles(text)
    assert neardup.sketch(text, text) == reference_sketch(text, text)


_PAGES = sorted(glob.glob("/usr/share/doc/python3.11/html/**/*.html", recursive=True))[:60]


@pytest.mark.skipif(not _PAGES, reason="python3.11-doc is not installed")
def test_real_pages_sketch_as_the_reference():
    for path in _PAGES:
        with open(path, "rb") as f:
            parsed = parse_html(f.read(), "http://x/" + path, "text/html")
        text = parsed.main if parsed.main is not None else parsed.text
        assert neardup.sketch(parsed.title, text) == reference_sketch(parsed.title, text), path
