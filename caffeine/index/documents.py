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

__all__ = ["document_record", "outlinks_record", "fetch_outcome", "is_html", "GONE_STATUSES"]

GONE_STATUSES = (404, 410)


def is_html(content_type: str | None) -> bool:
    if not content_type:
        return False
    mime = content_type.split(";", 1)[0].strip().lower()
    return mime in ("text/html", "application/xhtml+xml")


def fetch_outcome(meta: dict | None) -> str:
    """'document', 'gone' or 'keep' for a page:meta record (the rule in docs/INDEXING.md)."""
    if not meta:
        return "keep"
    status = meta.get("status")
    if status in GONE_STATUSES:
        return "gone"
    if isinstance(status, int) and 200 <= status < 300 and not meta.get("error"):
        return "document" if is_html(meta.get("content_type")) else "gone"
    return "keep"



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
