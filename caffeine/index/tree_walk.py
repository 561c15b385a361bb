"""The walk ``parse_html`` makes over lxml's own HTML tree: title, visible text, links with
anchor text, canonical.

Layer: index. Pure; imports lxml, ``caffeine.index.parsed`` and ``.urls``.

``walk_html(text, url, encoding) -> ParsedDocument | None``: the document of decoded ``text``
(cleaned of characters lxml refuses) served from ``url``, by ``caffeine.index.parse``'s rules
(its module docstring); None when the text is beyond what lxml's tree holds (too deeply
nested, or a text node too large), where the caller walks BeautifulSoup's tree instead
(``parse_soup``). Whatever it returns is what ``parse_soup`` returns for the same text
(``bench/bench_parse.py --compare``, ``tests/unit/test_parse_identity.py``).
"""

from __future__ import annotations

from caffeine.index.parsed import BLOCK_TAGS, HIDDEN_TAGS, DocumentWalk, ParsedDocument, is_main
from caffeine.index.urls import normalize_link, normalize_url

__all__ = ["walk_html", "walk_links"]

# Ruby annotations (pronunciation over the base text): walked for links, but their text is
# not reading text.
_ANNOTATION_TAGS = ("rt", "rp")
# Elements whose strings are never reading text, wherever they occur (a <title> included).
_NON_TEXT_CONTAINERS = ("script", "style", "template", "rt", "rp")
# Elements the walk does something for besides taking their text; every other element is
# walked as plain text.
_SPECIAL_TAGS = frozenset((*BLOCK_TAGS, *_ANNOTATION_TAGS, "a", "area", "title", "link", "meta"))
# lxml's tree (libxml2 without XML_PARSE_HUGE) holds at most this many nested elements and
# text nodes of at most this many bytes; past either it stops building and the rest of the
# document is lost. BeautifulSoup's tree, built from the parser's events, has no such limits,
# so documents near them are walked over it instead (``parse_soup``).
_TREE_MAX_DEPTH = 255
_TREE_MAX_TEXT_BYTES = 9_000_000


def walk_html(text: str, url: str, encoding: str) -> ParsedDocument | None:
    """``text``'s document, or None when lxml's tree cannot hold it whole."""
    return _walk_text(text, url, encoding, _Walk)


def walk_links(text: str, url: str, encoding: str) -> ParsedDocument | None:
    """``walk_html``'s document without the reading text: the same links (in the same order,
    each with an empty anchor), canonical, robots and refresh, an empty title, text and main
    region; None exactly where ``walk_html`` returns None. What a crawler follows, for about
    half the walk."""
    return _walk_text(text, url, encoding, _LinkWalk)


def _walk_text(text: str, url: str, encoding: str, walk_class: type[_Walk]) -> ParsedDocument | None:
    if len(text) * 4 >= _TREE_MAX_TEXT_BYTES and len(text.encode("utf-8", "surrogatepass")) >= _TREE_MAX_TEXT_BYTES:
        return None
    # BeautifulSoup dropped one leading byte-order mark (a second one, after decoding's).
    tops = _document_nodes(text[1:] if text.startswith("\ufeff") else text)
    try:
        return _walk_tree(tops, url, encoding, walk_class)
    except _TreeTooDeep:
        return None


def _walk_tree(tops: list, url: str, encoding: str, walk_class: type[_Walk]) -> ParsedDocument:
    # The first <base href> applies to every link, even ones before it in the document.
    base = normalize_url(url) or url
    for top in tops:
        base_tag = next((b for b in _iter_elements(top, "base") if _attr(b, "href") is not None), None)
        if base_tag is not None:
            declared = normalize_url(_attr(base_tag, "href") or "", base)
            if declared is not None:
                base = declared
            break

    walk = walk_class(base)
    walk.run(tops)
    return walk.document(encoding)


class _TreeTooDeep(Exception):
    """The tree reaches lxml's depth limit: libxml2 may have stopped building it there."""


def _document_nodes(text: str) -> list:
    """The document's top-level nodes in order (elements, comments, processing
    instructions), as lxml's HTML parser builds them; [] for a document with no content.

    ``feed`` rather than ``fromstring``: it takes a str that starts with an XML declaration
    naming an encoding (``fromstring`` refuses one), and it is the call BeautifulSoup's
    "lxml" builder made, so libxml2 sees the text the same way. libxml2 may open a second
    root after the first closes (``</html>`` followed by more markup); those are siblings of
    the first."""
    from lxml import etree

    parser = etree.HTMLParser(recover=True)
    parser.feed(text)
    try:
        root = parser.close()
    except etree.XMLSyntaxError:
        return []
    if root is None:
        return []
    before = list(root.itersiblings(preceding=True))
    before.reverse()
    return [*before, root, *root.itersiblings()]


def _iter_elements(top, name: str):
    """Elements named ``name`` under (and including) ``top``, in document order."""
    if not isinstance(top.tag, str):
        return iter(())
    return top.iter(name)


class _Walk(DocumentWalk):
    """One iterative pass over the tree: visible text, links with anchor text, title,
    canonical. Iterative (no recursion limit on deeply nested junk) and read-only.

    Text lives in lxml's tree as an element's ``text`` (before its first child) and each
    node's ``tail`` (after it, inside its parent): a hidden element's or a comment's tail is
    visible, its own text is not. Text under ``rt`` and ``rp`` (ruby annotations) is not
    part of the reading text either; their links still count, with no anchor text."""

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self._annotation_depth = 0  # open rt/rp elements
        self._targets: dict[str, str | None] = {}  # href -> normalized target, this page

    def run(self, tops: list) -> None:
        emit = self.emit
        stack = [iter(tops)]
        exits: list[tuple | None] = [None]  # per level: how to leave the element it is inside
        while stack:
            for node in stack[-1]:
                name = node.tag
                if name.__class__ is not str or name in HIDDEN_TAGS:
                    # A comment, processing instruction or hidden element: its own text and
                    # links are not visible, the text after it is.
                    tail = node.tail
                    if tail and not self._annotation_depth:
                        emit(tail)
                    continue
                if name not in _SPECIAL_TAGS:  # the common case: nothing to record
                    leave = (False, None, False, node.tail, False)
                else:
                    leave = self._enter(node, name)
                text = node.text
                if text and not self._annotation_depth:
                    emit(text)
                if len(node):
                    if len(stack) >= _TREE_MAX_DEPTH:
                        raise _TreeTooDeep
                    stack.append(iter(node))
                    exits.append(leave)
                    break
                self._leave(leave)
            else:
                stack.pop()
                leave = exits.pop()
                if leave is not None:
                    self._leave(leave)

    def _enter(self, tag, name: str) -> tuple:
        """Handle a tag's start; return what ``_leave`` needs at its end."""
        if name == "title" and self.title is None:
            self.title = "" if self._annotation_depth else _own_text(tag)
        elif name == "link" or name == "meta":
            self._directive(tag, name)
        block = name in BLOCK_TAGS  # never "a" or "area"
        annotation = name in _ANNOTATION_TAGS
        anchor = None
        if name in ("a", "area"):
            href = _attr(tag, "href")
            if href is not None:
                anchor = self.open_link(self._target(href))
        if block:
            self.emit(" ")
        if annotation:
            self._annotation_depth += 1
        main = is_main(name, _attr(tag, "role")) and self.enter_main()
        return block, anchor, annotation, tag.tail, main

    def _leave(self, leave: tuple) -> None:
        block, anchor, annotation, tail, main = leave
        if main:
            self.leave_main()
        if annotation:
            self._annotation_depth -= 1
        if anchor is not None:
            self.close_link(anchor)
        if block:
            self.emit(" ")
        if tail and not self._annotation_depth:
            self.emit(tail)

    def _directive(self, tag, name: str) -> None:
        """A ``<link>`` (the first canonical) or ``<meta>`` (robots, refresh)."""
        if name == "link":
            if self.canonical is None and _attr(tag, "href") is not None:
                rel = _attr(tag, "rel") or ""
                if any(r.lower() == "canonical" for r in rel.split()):
                    self.canonical = normalize_url(_attr(tag, "href") or "", self.base)
        else:
            self.meta(_attr(tag, "name"), _attr(tag, "http-equiv"), _attr(tag, "content"))

    def _target(self, href: str) -> str | None:
        try:
            return self._targets[href]
        except KeyError:
            target = self._targets[href] = normalize_link(href, self.base)
            return target


def _own_text(tag) -> str:
    """The text under ``tag`` outside comments and outside script, style, template, rt and
    rp (whose strings are not reading text), in document order."""
    pieces = [tag.text or ""]
    stack = [iter(tag)]
    while stack:
        node = next(stack[-1], None)
        if node is None:
            stack.pop()
            continue
        if isinstance(node.tag, str) and node.tag not in _NON_TEXT_CONTAINERS:
            pieces.append(node.text or "")
            stack.append(_then(iter(node), node.tail, pieces))
        else:
            pieces.append(node.tail or "")
    return "".join(pieces)


def _then(children, tail, pieces):
    """``children``, then append ``tail`` to ``pieces`` once they are exhausted."""
    yield from children
    pieces.append(tail or "")


def _attr(tag, name: str) -> str | None:
    """Attribute ``name`` of ``tag``, or None. An attribute spelled ``{anything}name`` (the
    HTML tokenizer accepts braces in names) counts as ``name``, the later one winning, as
    a namespace-qualified name would."""
    value = tag.get(name)
    if "{" in "".join(tag.keys()):
        for key, v in tag.items():
            if key == name or (key[:1] == "{" and "}" in key and key.split("}", 1)[1] == name):
                value = v
    return value



# The elements the links-only walk records something for.
_LINK_TAGS = frozenset(("a", "area", "link", "meta"))


class _LinkWalk(_Walk):
    """``_Walk`` without the text: the same elements visited in the same order (hidden ones,
    comments and processing instructions skipped with what is inside them, the same depth
    limit), recording only links (with empty anchors), canonical and meta directives."""

    def run(self, tops: list) -> None:
        stack = [iter(tops)]
        while stack:
            for node in stack[-1]:
                name = node.tag
                if name.__class__ is not str or name in HIDDEN_TAGS:
                    continue
                if name in _LINK_TAGS:
                    if name == "link" or name == "meta":
                        self._directive(node, name)
                    else:
                        href = _attr(node, "href")
                        anchor = self.open_link(self._target(href)) if href is not None else None
                        if anchor is not None:
                            self.close_link(anchor)
                if len(node):
                    if len(stack) >= _TREE_MAX_DEPTH:
                        raise _TreeTooDeep
                    stack.append(iter(node))
                    break
            else:
                stack.pop()
