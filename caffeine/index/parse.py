"""HTML parsing: bytes as fetched -> title, visible text, links, declared canonical.

Layer: index. Pure; imports ``caffeine.index.parsed``, ``.tree_walk`` and, for the
rare document lxml's tree cannot hold, ``.parse_soup``. The document observer and the Spark
job call ``parse_html`` on ``page:content``, so both derive the same ``doc:parsed`` and
``doc:outlinks`` by construction.

The walk (``tree_walk``) runs over lxml's own HTML tree, built by libxml2's parser from the
same events BeautifulSoup's "lxml" builder built its tree from, so it returns what the
BeautifulSoup walk (``parse_soup``) returned, at a fraction of the cost
(``bench/bench_parse.py``; ``--compare`` proves the two identical on the Python
documentation, the test web and random fragments).

Contract of ``parse_html(content, url, content_type) -> ParsedDocument``: it never raises
on any bytes (malformed markup, binary junk, wrong or missing charsets, empty input); the
worst case is a document with empty fields. Pass the URL the body was actually served from
(``page:meta`` ``final_url`` after redirects) so relative links resolve as a browser would.

Decoding follows the WHATWG Encoding Standard (labels resolved with ``webencodings``, the
standard's label table: ``x-sjis`` is Shift_JIS, ``gb2312`` is GBK, ``iso-8859-9`` is
windows-1254, ``iso-8859-1``/``ascii`` are windows-1252). In order, the first that applies
wins:

1. a byte-order mark (UTF-8, UTF-16 LE/BE);
2. the ``charset`` parameter of ``content_type``;
3. a ``<meta charset>`` or ``<meta http-equiv=Content-Type content="...; charset=...">`` in
   the first 4096 bytes (a declared UTF-16 there means UTF-8, x-user-defined means
   windows-1252, as the standard's prescan says);
4. nothing declared: UTF-8 if the bytes are valid UTF-8 (ASCII included); otherwise the
   ``charset-normalizer`` detector, restricted to the standard's legacy encodings, when it
   is confident (its "chaos" below ``_DETECT_MAX_CHAOS``, windows-1252 preferred on a tie);
   otherwise windows-1252 (the standard's default for most locales).

Labels the standard does not know are skipped. GBK and gb18030 decode with Python's
gb18030 codec (the standard's GBK decoder is the gb18030 one). Undecodable bytes become
U+FFFD; control characters become spaces. Detection depends on charset-normalizer's
version (its major version is pinned), and sees only pages that declare nothing and are
not UTF-8; the observers and the Spark job call the same code, so they agree.

Fields of ``ParsedDocument``:

* ``title``: the first ``<title>``'s text, normalized ("" when there is none);
* ``text``: all text a reader sees, normalized (``normalize_text``): everything under the
  document except ``script``, ``style``, ``noscript``, ``template`` and comments, the title
  included; block-level elements (``p``, ``div``, ``li``, ``td``, ``br``, headings, ...)
  separate words, inline ones (``b``, ``a``, ``span``) do not;
* ``links``: ``(target, anchor)`` for every ``<a href>`` and ``<area href>`` in document
  order, the target resolved against the first ``<base href>`` (when it is an http(s) URL)
  or the page URL and normalized with ``normalize_url``; links whose target is not http(s)
  or does not parse (``javascript:``, ``mailto:``, ``http://[bad``) are dropped; duplicates
  and self-links are kept (``documents.outlinks_record`` decides what is inverted). The
  anchor is the link's normalized text;
* ``canonical``: the first ``<link rel=canonical href>``, resolved and normalized like a
  link, or None;
* ``encoding``: the WHATWG name of the encoding the body was decoded with (``utf-8``,
  ``shift_jis``, ``windows-1252``, ...; for diagnostics).
"""

from __future__ import annotations

import codecs
import dataclasses
import logging
import re

from caffeine.index.parsed import ParsedDocument
from caffeine.index.tree_walk import walk_html, walk_links

__all__ = ["ParsedDocument", "parse_html", "parse_links", "decode_html"]

log = logging.getLogger(__name__)

_SNIFF_BYTES = 4096
_DETECT_BYTES = 64 * 1024
_DETECT_MAX_CHAOS = 0.1
_META_CHARSET = re.compile(rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE)
_CT_CHARSET = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9_:.+-]+)""", re.IGNORECASE)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16le"), (codecs.BOM_UTF16_BE, "utf-16be"))
# Characters lxml refuses or truncates at (NUL, other C0 controls, lone surrogates cannot
# occur after decoding with "replace"); browsers never show them either.
_UNPARSEABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")
# WHATWG encoding name -> the Python codec that decodes it as the standard says, where
# webencodings' own choice differs (its GBK is Python's gbk, narrower than the standard's).
_PYTHON_CODECS = {"gbk": "gb18030", "gb18030": "gb18030"}
# The detector's candidates: the standard's legacy single- and multi-byte encodings, as
# Python codec names (UTF-16/32 are never detected: without a BOM, HTML is not UTF-16).
_DETECTABLE = (
    "cp1250", "cp1251", "cp1252", "cp1253", "cp1254", "cp1255", "cp1256", "cp1257", "cp1258",
    "iso8859_2", "iso8859_4", "iso8859_5", "iso8859_6", "iso8859_7", "iso8859_8", "iso8859_13",
    "iso8859_15", "koi8_r", "koi8_u", "cp866", "mac_cyrillic", "cp874",
    "cp932", "shift_jis", "euc_jp", "iso2022_jp", "gb18030", "gb2312", "gbk", "big5", "cp949", "euc_kr",
)
# Python codec names charset-normalizer answers with that are not WHATWG labels.
_DETECTED_LABELS = {"cp932": "shift_jis", "cp949": "euc-kr", "mac_cyrillic": "x-mac-cyrillic",
                    "cp874": "windows-874", "cp866": "ibm866"}


def parse_html(content: bytes, url: str, content_type: str | None) -> ParsedDocument:
    """Parse a fetched body; never raises (see the module docstring for the rules)."""
    return _parse_body(content, url, content_type, links_only=False)


def parse_links(content: bytes, url: str, content_type: str | None) -> ParsedDocument:
    """What ``parse_html`` returns for a crawler to follow, for about half its cost: the same
    ``links`` targets in the same order (each with an empty anchor), ``canonical``, ``robots``,
    ``refresh`` and ``encoding``; ``title``, ``text`` and ``main`` empty. The same decoding and
    tree, walked without collecting text (``tree_walk.walk_links``). Never raises."""
    return _parse_body(content, url, content_type, links_only=True)


def _parse_body(content: bytes, url: str, content_type: str | None, *, links_only: bool) -> ParsedDocument:
    try:
        text, encoding = decode_html(content or b"", content_type)
        return _parse(text, url, encoding, links_only)
    except Exception:  # a parser bug must not stop an observer on one bad page
        log.warning("parsing %s failed; treating it as an empty document", url, exc_info=True)
        return ParsedDocument(title="", text="", links=[], canonical=None)


def decode_html(content: bytes, content_type: str | None) -> tuple[str, str]:
    """(text, WHATWG encoding name) following the order in the module docstring."""
    for bom, name in _BOMS:
        if content.startswith(bom):
            return _decode(content[len(bom):], name), name
    candidates = []
    if content_type:
        m = _CT_CHARSET.search(content_type)
        if m:
            candidates.append((m.group(1), False))
    m = _META_CHARSET.search(content[:_SNIFF_BYTES])
    if m:
        candidates.append((m.group(1).decode("ascii", "replace"), True))
    for label, from_meta in candidates:
        name = _encoding(label, from_meta)
        if name is None:
            continue
        try:
            return _decode(content, name), name
        except Exception:  # an exotic codec that fails even with errors="replace"
            continue
    name = _undeclared(content)
    return _decode(content, name), name


def _encoding(label: str, from_meta: bool) -> str | None:
    """The WHATWG encoding name of ``label``, or None when the standard does not know it."""
    import webencodings

    encoding = webencodings.lookup(label)
    if encoding is None or encoding.name == "replacement":
        return None
    name = encoding.name
    if from_meta and name in ("utf-16le", "utf-16be"):
        return "utf-8"
    if from_meta and name == "x-user-defined":
        return "windows-1252"
    return name


def _decode(content: bytes, name: str) -> str:
    import webencodings

    codec = _PYTHON_CODECS.get(name)
    if codec is not None:
        return content.decode(codec, errors="replace")
    return webencodings.lookup(name).codec_info.decode(content, "replace")[0]


def _undeclared(content: bytes) -> str:
    """The encoding of a page that declares none (rule 4 of the module docstring)."""
    try:
        content.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError as exc:
        if exc.start >= len(content) - 3 and exc.reason == "unexpected end of data":
            return "utf-8"  # valid UTF-8 cut inside a character (a body at the size cap)
    try:
        from charset_normalizer import from_bytes

        results = list(from_bytes(content[:_DETECT_BYTES], cp_isolation=list(_DETECTABLE)))
    except Exception:  # the detector must never stop a parse
        log.debug("charset detection failed", exc_info=True)
        results = []
    if not results or results[0].chaos > _DETECT_MAX_CHAOS:
        return "windows-1252"
    best = results[0]
    for r in results:  # windows-1252 on a tie: the standard's default, the likeliest
        if r.encoding == "cp1252" and r.chaos <= best.chaos and r.coherence >= best.coherence:
            return "windows-1252"
    return _encoding(_DETECTED_LABELS.get(best.encoding, best.encoding), False) or "windows-1252"


def _parse(text: str, url: str, encoding: str, links_only: bool) -> ParsedDocument:
    text = _UNPARSEABLE.sub(" ", text)
    parsed = (walk_links if links_only else walk_html)(text, url, encoding)
    if parsed is None:  # beyond what lxml's tree holds: rare, and slower
        from caffeine.index.parse_soup import parse_soup

        parsed = parse_soup(text, url, encoding)
        if links_only:
            parsed = dataclasses.replace(parsed, title="", text="", links=[(t, "") for t, _ in parsed.links], main=None)
    return parsed
