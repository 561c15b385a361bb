"""Near-duplicates: a page's MinHash sketch, its LSH bands, and when two sketches are near.

Layer: index. Pure; imports ``datasketch``, ``breame``, ``mmh3`` and
``caffeine.index.text``. The cluster observer and the Spark job both call these, so they
find the same near-duplicate pairs by construction.

Rule (docs/INDEXING.md, "Near-duplicates"):

* What is compared: the page's main region (``ParsedDocument.main``: its ``<main>`` or
  ``role="main"`` element) when it has one, else its whole text; tokenized as the index does
  (``tokenize``), each British spelling folded to its American one (``breame``'s list:
  colour/color, dialogue/dialog, centre/center, ...), as word 3-shingles. The title too,
  folded the same way.
* Two pages are near-duplicates when their folded titles are equal and the Jaccard
  similarity of their shingle sets is at least ``THRESHOLD`` (4/5), computed exactly from the
  sets of the shingles' 32-bit MurmurHash3 values (``overlap``), which the sketch carries.
* Candidates are found by LSH: a 16-value MinHash of the shingles (datasketch, ``affine32``
  scheme, seed 1), cut into ``BANDS`` x ``BAND_VALUES`` (8 x 2), each band keyed with the
  title. A pair at similarity 0.8 shares a band with probability 1 - (1 - 0.8^2)^8 > 0.999
  (0.7: 0.995): the bands lose almost no pair the threshold keeps, and the exact similarity,
  not an estimate, decides (an estimate's error, 0.03 to 0.04 with 128 values, misjudges
  the many pairs of a partly translated manual that lie near the threshold).
* A page with fewer than 3 words has no sketch: it is only ever an exact duplicate.

Why these choices: MinHash banding finds the pairs whose Jaccard similarity is high in a few
row reads, and the Jaccard similarity of word shingles is what the quality judgment is
stated in (SimHash approximates an angle between term vectors instead). A site's navigation
around the main region is shared by all its pages, so without it the templated pages of an
API reference (which differ in the one name they document) would be 0.9 alike. The title is
the name a page documents: pages titled differently are never near-duplicates, which keeps
templated pages whose main text is boilerplate (a Rust iterator's page is 98% blanket trait
implementations) apart. The spelling fold makes a help system published in British and
American English one set of pages. Measured on real documentation sets in
``tests/indexing/test_neardup_quality.py``.

Stored as (``caffeine.index.schema``): ``doc:sketch`` and the ``dups`` row's ``sketch`` (8
bytes of title hash, 16 big-endian uint32 MinHash values, then the sorted distinct shingle
hashes, big-endian uint32), ``near:<fp>`` cells (``shared/total`` shingles) and band rows
(``~<band key>``, in ``dups`` after the fingerprint rows).
"""

from __future__ import annotations

import struct
from itertools import repeat
from typing import Callable, Iterable, Mapping

import mmh3
import numpy as np
from breame.data.spelling_constants import BRITISH_ENGLISH_SPELLINGS
from datasketch import MinHash

from caffeine.index.schema import BAND_ROW_PREFIX, decode_declared, decode_members, decode_near
from caffeine.index.text import tokenize

__all__ = [
    "THRESHOLD", "BANDS", "BAND_VALUES", "SHINGLE_WORDS",
    "fold", "shingles", "sketch", "band_keys", "overlap", "is_near", "similarity", "component",
    "cluster_rows", "cluster_size", "cluster_pages",
]

THRESHOLD = (4, 5)  # shared / total shingles at least 4/5 (integers: no rounding to agree on)
BANDS = 8
BAND_VALUES = 2
NUM_PERM = BANDS * BAND_VALUES
SHINGLE_WORDS = 3

_TITLE_BYTES = 8
_VALUES = struct.Struct(f">{NUM_PERM}I")
_HEAD = _TITLE_BYTES + _VALUES.size  # the shingle hashes follow


# The permutations are drawn once: datasketch derives them from the seed. It is given each
# shingle's hash (the one the sketch stores), so its hash function is the identity.
_TEMPLATE = MinHash(num_perm=NUM_PERM, seed=1, hashfunc=int, scheme="affine32")


def fold(token: str) -> str:
    """A lowercased token with its British spelling replaced by the American one."""
    # The list itself, not breame's get_american_spelling: tokens are lowercased already and
    # this runs for every word of every page.
    return BRITISH_ENGLISH_SPELLINGS.get(token, token)


def _words(text: str) -> list[str]:
    tokens = tokenize(text)
    # fold() over every token, without a Python call per token (a page has thousands).
    return list(map(BRITISH_ENGLISH_SPELLINGS.get, tokens, tokens))


def shingles(text: str) -> set[str]:
    """The word 3-shingles of ``text`` (folded tokens joined by one space)."""
    words = _words(text)
    # The i-th tuple is words[i:i + SHINGLE_WORDS], for every i where that slice is whole
    # (zip stops at the shortest list): the windows, built and joined without a Python loop.
    return set(map(" ".join, zip(*(words[i:] for i in range(SHINGLE_WORDS)))))


def sketch(title: str, text: str) -> bytes | None:
    """The encoded sketch of a page titled ``title`` whose compared text is ``text``
    (``ParsedDocument.main`` or, without one, ``.text``); None below 3 words."""
    found = shingles(text)
    if not found:
        return None
    # Each shingle's unsigned 32-bit MurmurHash3 (seed 0) of its UTF-8, without a Python call per shingle.
    encoded = [s.encode("utf-8", "surrogatepass") for s in found]
    hashes = np.unique(np.fromiter(map(mmh3.hash, encoded, repeat(0), repeat(False)),
                                   dtype=np.uint32, count=len(found)))
    m = _TEMPLATE.copy()
    m.update_batch(hashes.tolist())  # a colliding pair's one hash changes no minimum
    title_key = mmh3.hash64(" ".join(_words(title)).encode("utf-8", "surrogatepass"), 0, signed=False)[0]
    return struct.pack(">Q", title_key) + _VALUES.pack(*m.hashvalues.tolist()) + hashes.astype(">u4").tobytes()


def _hashes(encoded: bytes) -> np.ndarray:
    return np.frombuffer(encoded, dtype=">u4", offset=_HEAD)


def band_keys(encoded: bytes) -> list[str]:
    """The band rows of a sketch (in ``dups``): ``~``, then title hash, band number, hash of
    the band's values (hex), one per band."""
    title = encoded[:_TITLE_BYTES].hex()
    keys = []
    for band in range(BANDS):
        start = _TITLE_BYTES + band * BAND_VALUES * 4
        value = mmh3.hash64(encoded[start:start + BAND_VALUES * 4], 0, signed=False)[0]
        keys.append(f"{BAND_ROW_PREFIX}{title}{band:02x}{value:016x}")
    return keys


def overlap(a: bytes, b: bytes) -> tuple[int, int]:
    """``(shared, total)``: how many distinct shingles two sketches' pages share, of how many
    they have together (their Jaccard similarity is the ratio); ``(0, 0)`` when their titles
    differ."""
    if a[:_TITLE_BYTES] != b[:_TITLE_BYTES]:
        return 0, 0
    x, y = _hashes(a), _hashes(b)
    shared = len(np.intersect1d(x, y, assume_unique=True))
    return shared, len(x) + len(y) - shared


def is_near(pair: tuple[int, int]) -> bool:
    """Whether an ``overlap`` makes two pages near-duplicates: shared / total >= 4/5."""
    shared, total = pair
    return total > 0 and shared * THRESHOLD[1] >= total * THRESHOLD[0]


def similarity(pair: tuple[int, int]) -> float:
    """The Jaccard similarity of an ``overlap`` (a ``near:`` cell's)."""
    shared, total = pair
    return shared / total if total else 0.0


def component(start: str, neighbours: Callable[[list[str]], Mapping[str, Iterable[str]]]) -> list[str]:
    """The fingerprints connected to ``start`` by near-duplicate edges, ``start`` first then
    in the order found; ``neighbours(fps)`` gives each asked fingerprint's neighbours (one
    call per step of the breadth-first walk, so a caller can read the rows of a step at once)."""
    seen = {start: None}
    frontier = [start]
    while frontier:
        step = neighbours(frontier)
        frontier = []
        for fp in step.values():
            for other in fp:
                if other not in seen:
                    seen[other] = None
                    frontier.append(other)
    return list(seen)


def cluster_rows(start: str, read_rows: Callable[[list[str]], Mapping[str, Mapping[str, bytes]]]) -> dict[str, Mapping[str, bytes]]:
    """The ``dups`` rows of the near-duplicate cluster of exact cluster ``start``: ``{fp:
    cells}`` of every exact cluster joined to it by ``near:`` edges, ``start`` first.
    ``read_rows(fps)`` reads rows ``{fp: cells}`` (one call per step of the walk, so a
    transaction can batch them; a cluster without near-duplicates is one call)."""
    rows: dict[str, Mapping[str, bytes]] = {}

    def neighbours(fps: list[str]) -> dict[str, list[str]]:
        rows.update(read_rows(fps))
        return {fp: list(decode_near(rows[fp])) for fp in fps}

    return {fp: rows[fp] for fp in component(start, neighbours)}


def cluster_pages(rows: Mapping[str, Mapping[str, bytes]]) -> tuple[dict[str, int], dict[str, str], dict[str, str]]:
    """The pages of the exact clusters ``rows`` (``cluster_rows``'s) together: ``({url:
    inlinks}, {url: declared canonical}, {url: its exact cluster's fingerprint})``."""
    members: dict[str, int] = {}
    declared: dict[str, str] = {}
    content: dict[str, str] = {}
    for fp, cells in rows.items():
        exact = decode_members(cells)
        members.update(exact)
        declared.update(decode_declared(cells))
        content.update(dict.fromkeys(exact, fp))
    return members, declared, content


def cluster_size(rows: Mapping[str, Mapping[str, bytes]]) -> int:
    """How many pages the exact clusters ``rows`` (``cluster_rows``'s) hold together."""
    return sum(len(decode_members(cells)) for cells in rows.values())
