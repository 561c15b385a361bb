"""What the observers derive from a page, as the values they store: the one implementation
the observers (incremental) and the Spark job (batch) share.

Layer: index. Pure; imports ``.parse``, ``.text``, ``.urls``, ``.fields``,
``.postings``, ``.impacts`` and ``.schema``, the codecs of the stored values. Batch and incremental call these same functions,
so they agree by construction.

* ``fetch_outcome(meta)``: what a ``page:meta`` record means for the document.
* ``derive(url, meta, content)`` -> ``Derived`` (``doc:parsed`` bytes, outlinks, fingerprint,
  ``doc:directives`` bytes) of a fetched HTML page: the document observer's work, and the
  Spark job's per page. What the page says about itself (``caffeine.index.directives``:
  robots meta tags, ``X-Robots-Tag`` kept in ``page:meta`` ``robots``, meta refresh) decides
  whether it is a document and which of its links count (``page_rules``).
* ``crawl_links(url, meta, parsed)``: the URLs a crawler queues from a fetched page (its
  links unless ``nofollow``, and a meta refresh's target).
* ``anchors_value(inlinks)``: the ``doc:anchors`` value of a page's ``in:*`` cells (the
  inlinks observer's, and the Spark job's after its link inversion).
* ``document_index(url, doc, anchors)`` -> ``DocumentIndex``: what an export indexes for a
  canonical document (its field postings, lengths and link votes), tokenized once for all
  of them (the export observer's per run, and the Spark job's ``index_cells``).
* ``docstats_cells(url, doc, fingerprint, anchors)``: the docstats cells an export writes
  for a canonical document (the export observer's, and the Spark job's); ``docstats_of``
  the same from the lengths and votes of a ``DocumentIndex``.

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

import functools
from typing import Iterable, NamedTuple

from caffeine.index.directives import REDIRECT_MAX_DELAY_S, in_order
from caffeine.index.fields import anchor_record, anchor_text, anchor_votes, field_tokens, postings_with_fields
from caffeine.index.impacts import IMPACT_FORMAT, impact_level
from caffeine.index.parse import ParsedDocument, parse_html
from caffeine.index.postings import Posting
from caffeine.index.schema import (
    DocStats,
    decode_inlinks,
    encode_anchors,
    encode_directives,
    encode_docstats,
    encode_document,
)
from caffeine.index import neardup
from caffeine.index.text import fingerprint, tokenize
from caffeine.index.urls import normalize_url

__all__ = ["document_record", "outlinks_record", "fetch_outcome", "is_html", "GONE_STATUSES",
           "derive", "Derived", "PageRules", "page_rules", "crawl_links", "anchors_value", "docstats_cells", "docstats_of", "document_lengths", "DocumentIndex",
           "document_index"]

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


def document_record(parsed: ParsedDocument, robots: Iterable[str] = ()) -> dict:
    """The ``doc:parsed`` JSON object (json.dumps it with sort_keys for stable bytes).
    ``robots``: the page's directives (``PageRules.robots``); the ones a document keeps
    (``nosnippet``, ``noarchive``) are listed under ``robots``, absent when none."""
    record = {
        "title": parsed.title,
        "text": parsed.text,
        "canonical": parsed.canonical,
        "length": len(tokenize(parsed.text)),
    }
    kept = [d for d in in_order(robots) if d in ("nosnippet", "noarchive")]
    if kept:
        record["robots"] = kept
    return record


def outlinks_record(source_url: str, parsed: ParsedDocument, refresh: str | None = None) -> list[list[str]]:
    """The ``doc:outlinks`` JSON list: sorted by target, deduplicated, no self-links.
    ``refresh``: a meta refresh's target, one more link (with no anchor text of its own)."""
    source = normalize_url(source_url) or source_url
    anchors: dict[str, list[str]] = {}
    links = parsed.links if refresh is None else [*parsed.links, (refresh, "")]
    for target, anchor in links:
        if target == source:
            continue
        texts = anchors.setdefault(target, [])
        if anchor:
            texts.append(anchor)
    return [[target, " ".join(anchors[target])] for target in sorted(anchors)]


class PageRules(NamedTuple):
    """What a fetched page says about itself, for the index and the crawler."""
    robots: frozenset[str]      # directives for this crawler: meta tags and X-Robots-Tag together
    refresh: str | None         # a meta refresh's target, or None
    redirect: bool              # a redirect stub: a refresh to ``refresh`` soon enough
    follow: bool                # its links count (inlinks, anchor text) and are crawled
    canonical: str | None = None  # its <link rel="canonical">, resolved and normalized

    @property
    def document(self) -> bool:
        """A document of the index: neither ``noindex`` nor a redirect stub."""
        return "noindex" not in self.robots and not self.redirect

    def record(self) -> dict:
        """The ``doc:directives`` JSON object: ``robots`` (in ``DIRECTIVES`` order),
        ``refresh`` (the target, with ``redirect`` true for a stub) and ``canonical`` (of a
        document: the cluster observer's election honours it), each only when present."""
        out: dict = {}
        if self.canonical is not None and self.document:
            out["canonical"] = self.canonical
        if self.robots:
            out["robots"] = in_order(self.robots)
        if self.refresh is not None:
            out["refresh"] = self.refresh
            out["redirect"] = self.redirect
        return out


def page_rules(url: str, meta: dict, parsed: ParsedDocument) -> PageRules:
    """The rules of docs/INDEXING.md ("What pages say about themselves") for a fetched page:
    ``meta``'s ``robots`` (from its ``X-Robots-Tag`` headers) and the page's own tags.
    A meta refresh to another URL within ``REDIRECT_MAX_DELAY_S`` makes a redirect stub."""
    robots = frozenset(meta.get("robots") or ()) | parsed.robots
    refresh = None
    stub = False
    if parsed.refresh is not None:
        delay, target = parsed.refresh
        here = {normalize_url(url) or url, normalize_url(meta.get("final_url") or url) or url}
        if target not in here:
            refresh = target
            stub = delay <= REDIRECT_MAX_DELAY_S
    return PageRules(robots, refresh, redirect=stub, follow="nofollow" not in robots, canonical=parsed.canonical)


class Derived(NamedTuple):
    """What the document observer stores for a fetched HTML page (and the Spark job)."""
    parsed: bytes | None        # doc:parsed; None when the page is no document (noindex, a redirect stub)
    outlinks: list              # doc:outlinks' records; [] when its links do not count (nofollow)
    fingerprint: str | None     # doc:fingerprint; None with parsed
    directives: bytes | None    # doc:directives; None when the page says nothing to crawlers
    sketch: bytes | None = None  # doc:sketch (caffeine.index.neardup); None without a document or below 3 words


def derive(url: str, meta: dict, content: bytes) -> Derived:
    """What a fetched HTML page becomes.

    ``meta`` is its ``page:meta`` record (``final_url`` is the base for relative links,
    ``content_type`` picks the charset, ``robots`` holds its ``X-Robots-Tag`` directives),
    ``content`` its body. The outlinks are ``outlinks_record``'s (``encode_outlinks`` stores
    them; a meta refresh's target is one of them), the fingerprint the hex ``fingerprint`` of
    the parsed text. The page is parsed once for all of it.
    """
    parsed = parse_html(content, meta.get("final_url") or url, meta.get("content_type"))
    rules = page_rules(url, meta, parsed)
    outlinks = outlinks_record(url, parsed, rules.refresh) if rules.follow else []
    directives = rules.record()
    encoded_directives = encode_directives(directives) if directives else None
    if not rules.document:
        return Derived(None, outlinks, None, encoded_directives)
    return Derived(encode_document(document_record(parsed, rules.robots)), outlinks,
                   document_fingerprint(parsed), encoded_directives, document_sketch(parsed))


def document_fingerprint(parsed: ParsedDocument) -> str:
    """The exact-duplicate fingerprint of a document: of its text, title and main region, the
    three things its near-duplicate sketch is made of, so the pages of one exact cluster
    share one sketch (a page whose title words merely run into its body differs)."""
    # parse_html's fields are normalized already: no need to normalize them again.
    return fingerprint("\x00".join((parsed.title, parsed.text, parsed.main or "")), normalized=True)


def document_sketch(parsed: ParsedDocument) -> bytes | None:
    """The near-duplicate sketch of a document: its title and its main region's text (the
    whole text when it has none)."""
    return neardup.sketch(parsed.title, parsed.main if parsed.main is not None else parsed.text)


def crawl_links(url: str, meta: dict, parsed: ParsedDocument, *, links: bool = True) -> list[str]:
    """The URLs a crawler queues from a fetched page, in document order: its links' targets
    (none when it says ``nofollow``), its declared canonical (so a canonical outside the
    crawl is discovered; whatever ``nofollow`` says), neither when ``links`` is false (the
    crawl's last depth); then a meta refresh's target (followed as a redirect is, whatever
    ``nofollow`` and the depth say)."""
    rules = page_rules(url, meta, parsed)
    links = ([target for target, _ in parsed.links] if rules.follow else []) + (
        [rules.canonical] if rules.canonical is not None else []) if links else []
    if rules.refresh is not None:
        links.append(rules.refresh)
    return list(dict.fromkeys(links))


def anchors_value(inlinks: dict[str, bytes]) -> bytes:
    """The ``doc:anchors`` value of a page whose ``inlinks`` row holds ``inlinks``
    (``{column: anchor text bytes}``; columns other than ``in:*`` are ignored, undecodable
    anchor bytes replaced). ``encode_anchors(anchor_record(...))``: ``b"[]"`` for none."""
    return encode_anchors(anchor_record(decode_inlinks(inlinks)))


def document_lengths(url: str, canonical_doc: dict, anchors: list | None) -> tuple[tuple[int, int, int, int], int]:
    """((body, title, anchor, url) lengths, votes) of an exported document: what its docstats
    row says (``docstats_cells``) and what its postings' impact levels are computed with
    (``caffeine.index.impacts``)."""
    fields = _field_tokens(url, canonical_doc, anchors)
    return _lengths(canonical_doc, fields), anchor_votes(anchors or [])


class DocumentIndex(NamedTuple):
    """What an export indexes for one canonical document: its postings by term (body, title,
    anchor text and URL words: ``field_postings``), its (body, title, anchor, url) lengths
    in tokens and its link votes (``document_lengths``)."""

    terms: dict[str, Posting]
    lengths: tuple[int, int, int, int]
    votes: int

    def impact_levels(self, terms: Iterable[str]) -> list[int]:
        """The impact level (``caffeine.index.impacts``) of each of ``terms``' postings."""
        postings, lengths, votes = self.terms, self.lengths, self.votes
        # A level depends on the posting's field counts only (the lengths and votes are the
        # document's), and most of a page's terms share a few, such as once in the body.
        level_of = functools.cache(lambda *counts: impact_level(counts, lengths, votes))
        return [level_of(p.tf, p.title, p.anchor, p.url) for p in map(postings.__getitem__, terms)]


def document_index(url: str, canonical_doc: dict, anchors: list | None) -> DocumentIndex:
    """The ``DocumentIndex`` of a canonical document (``canonical_doc`` its ``doc:parsed``
    record, ``anchors`` its ``doc:anchors`` record): the body and each other field are
    tokenized once for the postings and the lengths together."""
    fields = _field_tokens(url, canonical_doc, anchors)
    terms = postings_with_fields(tokenize(canonical_doc["text"]), fields)
    return DocumentIndex(terms, _lengths(canonical_doc, fields), anchor_votes(anchors or []))


def _field_tokens(url: str, canonical_doc: dict, anchors: list | None) -> tuple[list[str], list[str], list[str]]:
    return field_tokens(canonical_doc.get("title") or "", anchor_text(anchors or []), url)


def _lengths(canonical_doc: dict, fields: tuple[list[str], ...]) -> tuple[int, int, int, int]:
    """(body, title, anchor, url) lengths: the body's as ``doc:parsed`` records it."""
    title, anchor, url_words = (len(tokens) for tokens in fields)
    return canonical_doc["length"], title, anchor, url_words


def docstats_cells(url: str, canonical_doc: dict, fingerprint: str | None, anchors: list | None) -> dict[str, str]:
    """The docstats cells an export writes for a canonical document (``encode_docstats``).

    ``canonical_doc`` is its ``doc:parsed`` record, ``anchors`` its ``doc:anchors`` record.
    ``s:length`` is the body's length in tokens, ``s:fields`` the title's, the anchor text's
    and the URL words' (``caffeine.index.field_lengths``), ``s:votes`` the link prior's input
    (``anchor_votes``), ``s:impacts`` the format of the impacts cells the export writes
    with them (``caffeine.index.impacts``); a missing title or fingerprint is "".
    """
    return docstats_of(canonical_doc, fingerprint, *document_lengths(url, canonical_doc, anchors))


def docstats_of(canonical_doc: dict, fingerprint: str | None, lengths: tuple[int, int, int, int], votes: int) -> dict[str, str]:
    """``docstats_cells`` from the document's (body, title, anchor, url) lengths and votes
    (a ``DocumentIndex``'s, or ``document_lengths``')."""
    length, *fields = lengths
    return encode_docstats(DocStats(
        length=length,
        title=canonical_doc.get("title") or "",
        fingerprint=fingerprint or "",
        fields=tuple(fields),
        votes=votes,
        impacts=IMPACT_FORMAT,
    ))
