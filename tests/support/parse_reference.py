"""The yardstick ``parse_html``'s lxml walk must match exactly, and random HTML fragments to
compare them on.

Test helper. ``reference_parse_html(content, url, content_type)`` is ``parse_html`` as it was
before it walked lxml's own tree: the same decoding (``decode_html``), then the BeautifulSoup
walk (``caffeine.index.parse_soup``, which ``parse_html`` still uses for documents lxml's tree
cannot hold) on every document.
``random_fragment(rng)`` draws a small HTML fragment from the constructs a parser gets wrong
most easily: entities, comments, hidden and raw-text elements, ``<base>``,
``rel``, nesting, stray ``<`` and ``&``, ruby annotations, odd attribute names.
"""

from __future__ import annotations

import random

from caffeine.index.parse import _UNPARSEABLE, ParsedDocument, decode_html
from caffeine.index.parse_soup import parse_soup

__all__ = ["reference_parse_html", "random_fragment", "EDGE_CASES"]


def reference_parse_html(content: bytes, url: str, content_type: str | None) -> ParsedDocument:
    """``parse_html`` over BeautifulSoup's tree; never raises."""
    try:
        text, encoding = decode_html(content or b"", content_type)
        return parse_soup(_UNPARSEABLE.sub(" ", text), url, encoding)
    except Exception:
        return ParsedDocument(title="", text="", links=[], canonical=None)


# -- random fragments ------------------------------------------------------------------------
_TAGS = (
    "a", "area", "b", "i", "span", "p", "div", "li", "ul", "td", "tr", "table", "br", "hr",
    "title", "base", "link", "script", "style", "noscript", "template", "textarea", "pre",
    "ruby", "rt", "rp", "svg", "math", "head", "body", "html", "h1", "option", "select",
    "img", "iframe", "xmp", "plaintext", "frameset", "x-custom", "o:p", "form", "label",
)
_ATTRS = (
    'href="/x"', "href=y.html", "href", 'href=""', 'href="http://other.example/p?q=1#f"',
    'href="javascript:void(0)"', 'href="mailto:a@b"', 'href="http://[bad"', 'href=" /sp ace "',
    'rel=canonical', 'rel="Alternate CANONICAL"', 'rel="nofollow"', "{x}href=/braced",
    "{}rel=canonical", 'class="a b"', 'href="&amp;q=&lt;"', "href='../up'", "href=//proto.rel/",
)
_TEXTS = (
    "word", "two words", " ", "\n", "\t", "&amp;", "&lt;", "&nbsp;", "&bogus;", "&#65;",
    "&#x1F600;", "&#0;", "&#xD800;", "caf\u00e9", "e\u0301", "\u00a0", "<", "<<>>", "& &&",
    "a<b", "</", "<!", "<?pi x?>", "<!-- c -->", "<!--", "-->", "<![CDATA[cd]]>", "]]>",
    "<!DOCTYPE html>", '<?xml version="1.0" encoding="utf-8"?>', "\u3042", "x\x00y",
    "\ufeff", "\r\n", "{", "}",
)


def followed(doc: ParsedDocument) -> tuple:
    """What a crawler reads of a parsed page (``crawl_links``): the links' targets in order, the
    canonical, the robots directives, the meta refresh, the encoding. ``parse_links`` must give
    ``parse_html``'s."""
    return [target for target, _ in doc.links], doc.canonical, doc.robots, doc.refresh, doc.encoding


def random_fragment(rng: random.Random, size: int = 12) -> str:
    """A random sequence of ``size`` pieces: open and close tags with random attributes,
    texts, entities, comments and junk."""
    pieces = []
    for _ in range(size):
        roll = rng.random()
        if roll < 0.35:
            attrs = " ".join(rng.choice(_ATTRS) for _ in range(rng.randrange(3)))
            pieces.append(f"<{rng.choice(_TAGS)}{' ' + attrs if attrs else ''}{rng.choice(('', '', '/'))}>")
        elif roll < 0.55:
            pieces.append(f"</{rng.choice(_TAGS)}>")
        else:
            pieces.append(rng.choice(_TEXTS))
    return "".join(pieces)


# Documents that exercise one rule each (as str; encode with "surrogatepass" for the last).
EDGE_CASES = (
    "", " ", "\n\n", "just text", "<", "&", "<!-- only a comment -->", "<?pi only?>", "<!DOCTYPE html>",
    "\ufeff<p>bom</p>", "\ufeff\ufeffdouble bom", "x\ufeff", '<?xml version="1.0" encoding="utf-8"?><p>decl</p>',
    "<?xml version='1.0' encoding='latin-1'?>\n<html><title>t</title><p>x</p></html>",
    '<?xml version="1.0"?><!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" "x"><html xmlns="http://www.w3.org/1999/xhtml"><p>x</p></html>',
    "a\x00b<p>c\x00d</p>\x01\x1f\x7f", "\ufffe\uffff<p>nonchars\ufdd0</p>", "<p>lone \ud800 surrogate</p>",
    "<p>a</p></html>after<p>more</p><a href=/late>late</a>", "</body></html><!--c-->tail text",
    "<html><head></head><body>x</body></html><html><body>second root</body></html>",
    "<a href=/a1>one</a><base href=http://base.test/dir/><a href=a2>two</a><base href=http://other.test/>",
    "<template><base href=http://tpl.test/></template><a href=x>x</a>",
    "<noscript><base href=http://ns.test/></noscript><a href=x>x</a>", "<base href=''><a href=x>x</a>",
    "<base href='javascript:alert(1)'><a href=x>x</a>", "<base><base href=http://second.test/><a href=x>x</a>",
    "<base href=/rel/><a href=x>x</a>", "<base {x}href=http://braced.test/><a href=x>x</a>",
    "<link rel=canonical href=/c1><link rel=canonical href=/c2>", "<link href=/c rel='Alternate CANONICAL'>",
    "<link rel=canonical><link rel=canonical href=/second>", "<link rel=canonical href='javascript:x'>",
    "<link rel=canonical href=''>", "<script><link rel=canonical href=/no></script><link rel=canonical href=/yes>",
    "<a href=/1><a href=/2>x</a></a>y", "<a href=/1>x<b><a href=/2>x</a></b>z</a>w",
    "<a href=/1><div><a href=/2>in</a></div>out</a>", "<a href=/1><span>a</span><a href=/1>a</a></a>",
    "<area href=/map alt=x>", "<a href>empty href</a>", "<a name=x>no href</a>", "<a HREF=/UP>upper</a>",
    "<a href='http://[bad'>bad</a><a href='mailto:x@y'>m</a><a href=' /spaced '>s</a>",
    "<p><![CDATA[cdata]]>after</p>", "<svg><![CDATA[svg cdata]]><title>svg title</title></svg>",
    "<?php echo 1 ?>after pi", "<p>a<!-- c -->b<?x y?>c</p>", "<!--><p>x", "<!--->y", "<!-- unclosed",
    "<title>first</title><title>second</title>", "<body><title>in body</title>", "<title></title>",
    "<title>a &amp; b &lt;i&gt;</title>", "<rt><title>t</title></rt>x", "<ruby>\u6f22<rt>kan<a href=/r>link</a></rt>tail</ruby>",
    "<ruby>a<rp>(</rp><rt>b<div>c</div>d</rt><rp>)</rp></ruby>e", "<rt>a<script>s</script>b</rt>c",
    "<p>a<br>b<br/>c</p>", "<b>W</b>ord <i>it</i>alic", "<td>a</td><td>b</td>", "x<img>y<input>z",
    "<ul> <x>a</x> <x>b</x></ul>", "<table><tr><x>a</x> <x>b</x></tr></table>", "<section><x>a</x> <y>b</y></section>",
    "<pre>  a\n  b  </pre><textarea> t <b>x</b></textarea>", "<xmp><b>raw</b></xmp><plaintext><a href=/p>p</a>",
    "<noscript><a href=/n>n</a>t</noscript>after", "<style>s{}</style><script>if (a<b) {}</script>visible",
    "<template><a href=/t>t</a></template>", "<iframe><a href=/if>x</a></iframe>", "<frameset><frame src=/f></frameset>",
    "&amp;&lt;&gt;&quot;&nbsp;&copy&notin;&#128;&#x110000;&#0;&#xD800;&bogus;&;&#;",
    "<a href='/q?a=1&amp;b=2&lt;'>ent</a><a href='/q?a=1&b=2&copy=3'>raw</a>",
    "<a {x}href=/braced>b</a><a href=/plain {y}href=/second>c</a><link {}rel=canonical href=/bc>",
    "<a {x}>weird attr</a><a href=/k {x}=v>k</a>", "<o:p>office</o:p><svg:a href=/s>s</svg:a>",
    "<DIV>UPPER</DIV><P>CASE", "<a href=/x\n>nl</a>", "<p>caf\u00e9 e\u0301 \u00a0 nbsp</p>",
    "<div>" * 300 + "deep" + "</div>" * 300, "<div>" * 50000 + "deep<a href='/z'>z</a>", "<b>" * 3000 + "x" + "<a href=/d>d</a>",
    *("<div>" * n + "x<a href=/d>d</a>" for n in (252, 253, 254, 255)), "\ufeff\ufeff" + "<b>" * 300 + "bom deep",
    "<p>" + "word " * 200000 + "</p>", "<p>huge</p>" * 100000, "<a href=/l>l</a>" * 20000, "x" * 11_000_000,
)
