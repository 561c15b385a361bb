"""A document's fields beyond its body: title, anchor text of incoming links, URL path words.

Layer: index. Pure; imports ``.text``, ``.postings`` and the standard library. The
cluster and export observers and the Spark job call these, so batch and incremental index
the same fields by construction; docs/RANKING.md says how ranking weighs them.

* ``url_words(url)``: the tokens of the URL's path (percent-decoded), the last segment's web
  file extension (``.html``, ``.htm``, ``.php``, ...) left out: ``http://h/library/csv.html``
  -> ``["library", "csv"]``. Host, query and fragment are not words of the page.
* ``anchor_record(inlinks)``: from a target's ``{source url: anchor text}`` (its ``in:*``
  cells), the sorted distinct ``[source host, anchor]`` pairs, the anchor written as its
  tokens joined by one space. **A link that every page of a site carries** (navigation,
  "next", the site's logo) has the same anchor on every page: it counts once per site,
  however many pages carry it, both as anchor text and as a vote for the prior. Links from
  other sites count once per site and anchor too. A link without text is a pair with "".
* ``anchor_text(record)``: the anchor field's text, the record's anchors in order.
* ``anchor_votes(record)``: the link prior's input, the number of pairs.
* ``field_tokens(title, anchor, url)``: the ``(title, anchor text, URL words)`` tokens.
* ``postings_with_fields(body_tokens, fields)``: ``postings(body_tokens)`` with each term's
  counts in the ``field_tokens`` added (terms only in those fields get a posting with body
  tf 0).
* ``field_postings(body_tokens, title, anchor, url)``: ``postings_with_fields`` of the
  ``field_tokens``.
* ``field_lengths(title, anchor, url)``: ``(title, anchor, url)`` lengths in tokens.

An export needs both a document's field postings and its field lengths: it tokenizes the
fields once (``field_tokens``) and derives both from them (``documents.document_index``).
"""

from __future__ import annotations

import re
from typing import Iterable, Mapping
from urllib.parse import unquote, urlsplit

from caffeine.index.postings import Posting, postings
from caffeine.index.text import tokenize

__all__ = ["url_words", "anchor_record", "anchor_text", "anchor_votes", "field_tokens", "postings_with_fields",
           "field_postings", "field_lengths"]

# File extensions that say how a page was produced, not what it is about.
_WEB_EXTENSION = re.compile(r"\.(?:html?|xhtml|shtml|php\d?|aspx?|jsp|cgi)$", re.IGNORECASE)


def url_words(url: str) -> list[str]:
    """Tokens of the URL's path, without the last segment's web file extension."""
    try:
        path = unquote(urlsplit(url).path, errors="replace")
    except ValueError:
        return []
    return tokenize(_WEB_EXTENSION.sub("", path))


def _host(url: str) -> str:
    try:
        return urlsplit(url).netloc.lower()
    except ValueError:
        return ""


def anchor_record(inlinks: Mapping[str, str]) -> list[list[str]]:
    """Sorted distinct ``[source host, anchor tokens joined]`` pairs of a target's inlinks."""
    pairs = {(_host(source), " ".join(tokenize(anchor or ""))) for source, anchor in inlinks.items()}
    return [list(pair) for pair in sorted(pairs)]


def anchor_text(record: Iterable[Iterable[str]]) -> str:
    return " ".join(anchor for _, anchor in record if anchor)


def anchor_votes(record: Iterable) -> int:
    return sum(1 for _ in record)


def field_tokens(title: str, anchor: str, url: str) -> tuple[list[str], list[str], list[str]]:
    """The tokens of the fields besides the body: title, anchor text, URL words."""
    return tokenize(title or ""), tokenize(anchor or ""), url_words(url)


def field_lengths(title: str, anchor: str, url: str) -> tuple[int, int, int]:
    title_tokens, anchor_tokens, url_tokens = field_tokens(title, anchor, url)
    return len(title_tokens), len(anchor_tokens), len(url_tokens)


def field_postings(body_tokens: Iterable[str], title: str, anchor: str, url: str) -> dict[str, Posting]:
    """Each term's posting over all four fields (body positions only)."""
    return postings_with_fields(body_tokens, field_tokens(title, anchor, url))


def postings_with_fields(body_tokens: Iterable[str], fields: tuple[list[str], list[str], list[str]]) -> dict[str, Posting]:
    """``field_postings`` of fields tokenized already (``field_tokens``)."""
    body = postings(body_tokens)
    counts: dict[str, list[int]] = {}
    for slot, tokens in enumerate(fields):
        for token in tokens:
            counts.setdefault(token, [0, 0, 0])[slot] += 1
    if not counts:
        return body
    out = dict(body)
    for term, (title_tf, anchor_tf, url_tf) in counts.items():
        base = body.get(term)
        tf, positions = (base.tf, base.positions) if base else (0, ())
        out[term] = Posting(tf, positions, title_tf, anchor_tf, url_tf)
    return out
