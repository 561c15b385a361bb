"""What parsing a page yields, and what both HTML walks (``caffeine.index.tree_walk`` over
lxml's tree, ``caffeine.index.parse_soup`` over BeautifulSoup's) share: which elements carry
reading text, and ``DocumentWalk``, what a walk collects and the document it makes of it.

Layer: index. Pure; imports ``caffeine.index.text``, ``.directives`` and ``.urls``.
``ParsedDocument``'s fields are described in ``caffeine.index.parse``'s module docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from caffeine.index.directives import meta_applies, parse_refresh, robots_directives
from caffeine.index.text import normalize_text
from caffeine.index.urls import normalize_url

__all__ = ["ParsedDocument", "DocumentWalk", "HIDDEN_TAGS", "BLOCK_TAGS", "is_main"]

# Elements whose text and links a reader never sees.
HIDDEN_TAGS = ("script", "style", "noscript", "template")
# Elements a browser lays out as their own box or line: their text is a separate word from
# what surrounds it ("<p>a</p><p>b</p>" is "a b"), while inline elements join ("<b>W</b>ord"
# is "Word").
BLOCK_TAGS = (
    "address", "article", "aside", "blockquote", "br", "caption", "dd", "details", "dialog",
    "div", "dl", "dt", "fieldset", "figcaption", "figure", "footer", "form", "h1", "h2", "h3",
    "h4", "h5", "h6", "header", "hgroup", "hr", "li", "main", "nav", "ol", "option", "p",
    "pre", "section", "summary", "table", "tbody", "td", "tfoot", "th", "thead", "title", "tr",
    "ul", "body", "head", "html", "img", "input", "button", "select", "textarea", "label",
)


@dataclass(frozen=True)
class ParsedDocument:
    title: str
    text: str
    links: list[tuple[str, str]] = field(default_factory=list)
    canonical: str | None = None
    encoding: str = "utf-8"
    robots: frozenset[str] = frozenset()
    refresh: tuple[float, str] | None = None
    # The text of the page's main region (its first ``<main>`` or ``role="main"`` element,
    # normalized like ``text``); None when it has none. What the page says beyond its site's
    # navigation: near-duplicate detection compares this (``caffeine.index.neardup``).
    main: str | None = None


def is_main(name: str, role: str | None) -> bool:
    """Whether an element named ``name`` with ``role`` attribute ``role`` is a main region."""
    return name == "main" or (role is not None and "main" in role.lower().split())


class DocumentWalk:
    """What one pass over a document's tree collects: the text pieces, the links with their
    anchor pieces, the title, the canonical, the robots directives and the meta refresh;
    links resolve against ``base``."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.text: list[str] = []
        self.links: list[tuple[str, list[str]]] = []
        self.title: str | None = None
        self.canonical: str | None = None
        self.robots: set[str] = set()
        self.refresh: tuple[float, str] | None = None
        self._refresh_seen = False
        self._open_anchors: list[list[str]] = []
        self._main: list[int] = []  # [start] or [start, end]: text pieces of the main region

    def enter_main(self) -> bool:
        """A main region starts here; True when it is the page's first (the one kept), and
        then ``leave_main`` must be called at its end."""
        if self._main:
            return False
        self._main.append(len(self.text))
        return True

    def leave_main(self) -> None:
        self._main.append(len(self.text))

    def meta(self, name: str | None, http_equiv: str | None, content: str | None) -> None:
        """A ``<meta>`` element's attributes: robots directives aimed at this crawler add
        up; the first refresh that parses is the page's (its target resolved like a link;
        None when that is not an http(s) URL)."""
        if content is None:
            return
        if name is not None and meta_applies(name):
            self.robots |= robots_directives(content)
        elif http_equiv is not None and http_equiv.strip().lower() == "refresh" and not self._refresh_seen:
            refresh = parse_refresh(content)
            if refresh is not None:
                self._refresh_seen = True  # browsers act on the first refresh only
                target = normalize_url(refresh[1], self.base)
                self.refresh = (refresh[0], target) if target is not None else None

    def emit(self, piece: str) -> None:
        """Add ``piece`` to the text and to every anchor open around it."""
        self.text.append(piece)
        for pieces in self._open_anchors:
            pieces.append(piece)

    def open_link(self, target: str | None) -> list[str] | None:
        """Record a link to ``target`` (None: no link) and collect its anchor text from now
        on; returns the anchor for ``close_link``."""
        if target is None:
            return None
        anchor: list[str] = []
        self.links.append((target, anchor))
        self._open_anchors.append(anchor)
        return anchor

    def close_link(self, anchor: list[str]) -> None:
        """Stop collecting text for ``anchor`` (what ``open_link`` returned)."""
        # By identity: a link opened inside another before any text (an <area href> in an
        # <a href>) has an anchor equal to the outer one's, and list.remove, which compares by
        # equality, released the outer one instead; closing that one later then failed the
        # whole parse.
        for i in range(len(self._open_anchors) - 1, -1, -1):
            if self._open_anchors[i] is anchor:
                del self._open_anchors[i]
                return

    def document(self, encoding: str) -> ParsedDocument:
        return ParsedDocument(
            title=normalize_text(self.title or ""),
            text=normalize_text("".join(self.text)),
            links=[(target, normalize_text("".join(pieces))) for target, pieces in self.links],
            canonical=self.canonical,
            encoding=encoding,
            robots=frozenset(self.robots),
            refresh=self.refresh,
            main=normalize_text("".join(self.text[slice(*self._main)])) if self._main else None,
        )
