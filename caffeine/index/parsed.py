"""What parsing a page yields, and which elements carry reading text: the rules both HTML
walks (``caffeine.index.parse`` over lxml's tree, ``caffeine.index.parse_soup`` over
BeautifulSoup's) share.

Layer: caffeine.index (pure; standard library only). ``ParsedDocument``'s fields are described
in ``caffeine.index.parse``'s module docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ParsedDocument", "HIDDEN_TAGS", "BLOCK_TAGS"]

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
