"""The document observer's outputs: ``doc:parsed`` and ``doc:outlinks`` values.

Layer: caffeine.index (pure; imports ``.parse``, ``.text``, ``.urls``). The Spark job builds
the same records from the same ``ParsedDocument``, so batch and incremental agree.

* ``document_record(parsed)`` -> ``{"title", "text", "canonical", "length"}`` where
  ``length`` is ``len(tokenize(text))``: the document length BM25 uses, in the same tokens
  the postings count.
* ``outlinks_record(source_url, parsed)`` -> ``[[target, anchor], ...]``: one entry per
  distinct target, sorted by target; a target's anchors are its links' non-empty anchor
  texts in document order, joined by one space ("" if none had text). **Self-links are
  left out**: a page linking to itself (after normalization of both ends) is no vote for
  itself, and leaving it out here keeps link inversion from ever writing ``in:<self>`` on
  the page's own row. ``parse_html`` keeps self-links; this is where the rule lives.
"""

from __future__ import annotations

from caffeine.index.parse import ParsedDocument
from caffeine.index.text import tokenize
from caffeine.index.urls import normalize_url

__all__ = ["document_record", "outlinks_record"]


def document_record(parsed: ParsedDocument) -> dict:
    """The ``doc:parsed`` JSON object (json.dumps it with sort_keys for stable bytes)."""
    return {
        "title": parsed.title,
        "text": parsed.text,
        "canonical": parsed.canonical,
        "length": len(tokenize(parsed.text)),
    }


def outlinks_record(source_url: str, parsed: ParsedDocument) -> list[list[str]]:
    """The ``doc:outlinks`` JSON list: sorted by target, deduplicated, no self-links."""
    source = normalize_url(source_url) or source_url
    anchors: dict[str, list[str]] = {}
    for target, anchor in parsed.links:
        if target == source:
            continue
        texts = anchors.setdefault(target, [])
        if anchor:
            texts.append(anchor)
    return [[target, " ".join(anchors[target])] for target in sorted(anchors)]
