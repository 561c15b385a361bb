"""Per-document postings and their byte encoding (the value of ``postings[term] p:<url>``).

Layer: index. Pure; standard library only.

``postings(tokens)`` maps each distinct token to ``Posting(tf, positions)``: ``tf`` counts
every occurrence, ``positions`` are the 0-based token indices of the first
``MAX_POSITIONS`` (64) occurrences, ascending. Positions past 64 are not kept: phrase and
proximity scoring only needs the early ones, and it bounds a cell's size.

A posting also counts the term in the document's other fields (``caffeine.index.fields``):
``title``, ``anchor`` (the anchor text of links to the document) and ``url`` (words of its
URL path). ``tf`` and ``positions`` are the body's; ``tf`` is 0 for a term that is only in
the other fields. At least one of the four counts is >= 1.

Encoding (docs/INDEXING.md, pinned by byte-exact tests)::

    body only:    varint(tf) varint(p0) varint(p1 - p0) ... varint(pn - pn-1)
    with fields:  0x00 varint(tf) varint(title) varint(anchor) varint(url) varint(p0) ...

with unsigned LEB128 varints (7 bits per byte, least significant group first, high bit set
on every byte but the last; protobuf's). A posting whose other fields are all 0 keeps the
first form (a body tf is never 0, so the leading 0x00 tells the forms apart). The number of
positions is implicit: they run to the end of the value. An empty value means "removed" in
the postings table and is never a posting: ``decode_posting(b"")`` raises ValueError, as does
any truncated or malformed value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

__all__ = ["MAX_POSITIONS", "Posting", "postings", "encode_posting", "decode_posting", "posting_counts",
           "posting_positions"]

MAX_POSITIONS = 64


@dataclass(frozen=True, slots=True)
class Posting:
    """One term in one document: its body frequency and first positions (ascending), and its
    frequency in the title, the anchor text of incoming links and the URL path words."""

    tf: int
    positions: tuple[int, ...]
    title: int = 0
    anchor: int = 0
    url: int = 0

    def __post_init__(self) -> None:
        if min(self.tf, self.title, self.anchor, self.url) < 0:
            raise ValueError(f"negative frequency in {self}")
        if self.tf + self.title + self.anchor + self.url < 1:
            raise ValueError(f"a posting counts the term at least once, got {self}")
        if len(self.positions) > min(self.tf, MAX_POSITIONS):
            raise ValueError(f"{len(self.positions)} positions for tf={self.tf} (max {MAX_POSITIONS})")
        previous = -1
        for p in self.positions:
            if p <= previous:
                raise ValueError(f"positions must be ascending and >= 0: {self.positions}")
            previous = p


def postings(tokens: Iterable[str]) -> dict[str, Posting]:
    """Postings of one document's token sequence, keyed by token (first-seen order)."""
    tf: dict[str, int] = {}
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(tokens):
        count = tf.get(token, 0)
        tf[token] = count + 1
        if count < MAX_POSITIONS:
            positions.setdefault(token, []).append(i)
    return {t: Posting(tf[t], tuple(positions[t])) for t in tf}


def encode_posting(p: Posting) -> bytes:
    out = bytearray()
    if p.title or p.anchor or p.url:
        out.append(0)
        for value in (p.tf, p.title, p.anchor, p.url):
            _put_varint(out, value)
    else:
        _put_varint(out, p.tf)
    previous = 0
    for pos in p.positions:
        _put_varint(out, pos - previous)
        previous = pos
    return bytes(out)


def decode_posting(b: bytes) -> Posting:
    if not b:
        raise ValueError("empty posting value (a removed posting)")
    values = []
    i = 0
    while i < len(b):
        value, i = _get_varint(b, i)
        values.append(value)
    fields = (0, 0, 0)
    if values[0] == 0:
        if len(values) < 5:
            raise ValueError(f"truncated field counts in posting {b.hex()}")
        fields, values = tuple(values[2:5]), values[1:2] + values[5:]
        if not any(fields):
            raise ValueError(f"field form without field counts in posting {b.hex()}")
    tf, deltas = values[0], values[1:]
    positions = []
    pos = 0
    for n, delta in enumerate(deltas):
        if n > 0 and delta == 0:
            raise ValueError(f"repeated position in posting {b.hex()}")
        pos += delta
        positions.append(pos)
    return Posting(tf, tuple(positions), *fields)


def posting_counts(b: bytes) -> tuple[int, int, int, int]:
    """``(tf, title, anchor, url)`` of an encoded posting, without decoding its positions
    (ranking needs only these). Raises ValueError on an empty or truncated header."""
    if not b:
        raise ValueError("empty posting value (a removed posting)")
    if b[0] != 0:
        tf, _ = _get_varint(b, 0)
        return tf, 0, 0, 0
    tf, i = _get_varint(b, 1)
    title, i = _get_varint(b, i)
    anchor, i = _get_varint(b, i)
    url, i = _get_varint(b, i)
    return tf, title, anchor, url


def posting_positions(b: bytes) -> tuple[int, ...]:
    """``decode_posting(b).positions`` of a well-formed posting, faster (phrases and proximity
    read the positions of many postings per query): no ``Posting`` is built and the positions
    are not re-validated. Raises ValueError on an empty value or a truncated varint."""
    if not b:
        raise ValueError("empty posting value (a removed posting)")
    header = 5 if b[0] == 0 else 1   # varints before the positions: tf, or 0 and four counts
    i = 0
    while header:
        if i >= len(b):
            raise ValueError(f"truncated posting {b.hex()}")
        if not b[i] & 0x80:
            header -= 1
        i += 1
    out = []
    pos = value = shift = 0
    for byte in b[i:]:
        if byte & 0x80:
            value |= (byte & 0x7F) << shift
            shift += 7
        else:
            pos += value | (byte << shift)
            out.append(pos)
            value = shift = 0
    if shift:
        raise ValueError(f"truncated varint in {b.hex()}")
    return tuple(out)


def _put_varint(out: bytearray, value: int) -> None:
    if value < 0:
        raise ValueError(f"varint of a negative number: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _get_varint(b: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(b):
            raise ValueError(f"truncated varint in {b.hex()}")
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError(f"varint longer than 64 bits in {b.hex()}")
