"""The BeautifulSoup walk ``parse_html`` used before it walked lxml's own tree; now only for
the documents lxml's tree cannot hold whole.

Layer: index. Pure; imports bs4, ``caffeine.index.urls`` and ``.parsed``.

``parse_soup(text, url, encoding) -> ParsedDocument`` follows ``caffeine.index.parse``'s rules
(its module docstring) on ``text`` already decoded and cleaned. bs4's "lxml" builder is fed
lxml's parser events, not its tree, so it has no limit on nesting depth or text node size;
lxml's tree stops (dropping the rest of the document) at 256 nested elements or at a text
node over 10,000,000 bytes. ``caffeine.index.parse`` calls this walk for those documents and
its own for all others; on every other input the two return identical documents
(``bench/bench_parse.py --compare``).
"""

from __future__ import annotations

import warnings

from caffeine.index.parsed import BLOCK_TAGS, HIDDEN_TAGS, DocumentWalk, ParsedDocument, is_main
from caffeine.index.urls import normalize_url

__all__ = ["parse_soup"]


def parse_soup(text: str, url: str, encoding: str) -> ParsedDocument:
    """``parse_html``'s document from decoded ``text`` (cleaned of ``_UNPARSEABLE``
    characters), over BeautifulSoup's tree."""
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

    with warnings.catch_warnings():
        # A body like "http://x" or a file name makes bs4 warn; it is still parsed as markup.
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        # Attributes as plain strings: splitting every class="..." into a list costs ~10% of
        # the parse, and only rel is read as a list (``_rel`` splits it).
        soup = BeautifulSoup(text, "lxml", multi_valued_attributes=None)

    # The first <base href> applies to every link, even ones before it in the document.
    base = normalize_url(url) or url
    base_tag = soup.find("base", href=True)
    if base_tag is not None:
        declared = normalize_url(_attr(base_tag, "href"), base)
        if declared is not None:
            base = declared

    walk = _Walk(base)
    walk.run(soup)
    return walk.document(encoding)


class _Walk(DocumentWalk):
    """One iterative pass over the tree: visible text, links with anchor text, title,
    canonical. Iterative (no recursion limit on deeply nested junk) and read-only: editing
    the tree (decompose, insert) costs time linear in a parent's child count per edit,
    quadratic on big flat pages."""

    def run(self, root) -> None:
        from bs4 import CData, NavigableString, Tag

        visible_strings = (NavigableString, CData)  # not Comment, Doctype, ...
        end = object()
        stack = [(iter(root.contents), None)]
        while stack:
            children, on_exit = stack[-1]
            node = next(children, end)
            if node is end:
                stack.pop()
                if on_exit is not None:
                    on_exit()
                continue
            if isinstance(node, Tag):
                if node.name in HIDDEN_TAGS:
                    continue  # neither its text nor its links are visible
                stack.append((iter(node.contents), self._enter(node)))
            elif type(node) in visible_strings:
                self.emit(str(node))

    def _enter(self, tag):
        """Handle a tag's start; return the action for its end (or None)."""
        name = tag.name
        if name == "title" and self.title is None:
            self.title = tag.get_text("")
        elif name == "link" and self.canonical is None and tag.get("href") is not None:
            if any(r.lower() == "canonical" for r in _rel(tag)):
                self.canonical = normalize_url(_attr(tag, "href"), self.base)
        elif name == "meta":
            self.meta(tag.get("name"), tag.get("http-equiv"), tag.get("content"))
        block = name in BLOCK_TAGS  # never "a" or "area"
        anchor = None
        if name in ("a", "area") and tag.get("href") is not None:
            anchor = self.open_link(normalize_url(_attr(tag, "href"), self.base))
        if block:
            self.emit(" ")
        main = is_main(name, _attr(tag, "role")) and self.enter_main()
        if not block and anchor is None and not main:
            return None

        def leave():
            if main:
                self.leave_main()
            if anchor is not None:
                self.close_link(anchor)
            if block:
                self.emit(" ")

        return leave


def _attr(tag, name: str) -> str:
    value = tag.get(name)
    if isinstance(value, list):  # multi-valued attributes come back as lists
        value = " ".join(value)
    return value or ""


def _rel(tag) -> list[str]:
    rel = tag.get("rel") or []
    return rel.split() if isinstance(rel, str) else list(rel)
