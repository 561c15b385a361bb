"""What a page says about itself to search engines: robots meta tags, ``X-Robots-Tag``, meta refresh.

Layer: index. Pure; standard library only. ``caffeine.index.parse`` collects a
page's ``<meta name=... content=...>`` and ``<meta http-equiv=refresh>`` with these rules,
the crawler reads ``X-Robots-Tag`` headers with ``header_directives``, and
``caffeine.index.documents.derive`` combines them into what the page is to the index
(docs/INDEXING.md, "What pages say about themselves").

Robots directives, as Google and Bing document them and the Robots Exclusion Protocol's
practice has them (names and values case-insensitive, values separated by commas):

* ``noindex``: the page is no document of the index; ``nofollow``: its links are not
  followed and are no inlinks (no votes, no anchor text); ``none``: both;
* ``nosnippet`` (and ``max-snippet:0``): search shows no snippet for it; ``noarchive``:
  no stored copy is shown (recorded; the search service shows none anyway);
* ``all``, ``index``, ``follow``: the defaults, so nothing; anything else is ignored.

A meta tag counts when its ``name`` is ``robots`` (every crawler) or this crawler's own
token ``caffeinebot``; one aimed at another crawler (``googlebot``) is ignored. Several tags
add up. An ``X-Robots-Tag`` header value may start with a user agent (``googlebot:
noindex``): it counts when there is none or it is ``caffeinebot``; several headers add up.

Meta refresh: ``<meta http-equiv="refresh" content="N; url=U">``. With a target other than
the page itself and a delay of at most ``REDIRECT_MAX_DELAY_S`` seconds, the page is a
redirect stub, as search engines treat an instant refresh: no document of its own, its
target followed like a redirect's. A longer delay leaves the page a document, the target
one more of its links. A refresh inside ``<noscript>`` (a fallback for browsers without
scripts) is not seen at all: the walk skips hidden elements.
"""

from __future__ import annotations

import re
from typing import Iterable

__all__ = ["ROBOTS_TOKEN", "DIRECTIVES", "REDIRECT_MAX_DELAY_S", "robots_directives", "meta_applies",
           "header_directives", "in_order", "parse_refresh"]

ROBOTS_TOKEN = "caffeinebot"  # this crawler's product token (robots.txt's, in lower case)
# The directives Caffeine acts on, in the order they are stored.
DIRECTIVES = ("noindex", "nofollow", "nosnippet", "noarchive")
REDIRECT_MAX_DELAY_S = 5.0

_EXPANDS = {"none": ("noindex", "nofollow"), "noindex": ("noindex",), "nofollow": ("nofollow",),
            "nosnippet": ("nosnippet",), "noarchive": ("noarchive",), "max-snippet:0": ("nosnippet",)}
# Directives that carry a value after a colon: a header value starting with one of these has
# no user-agent prefix.
_VALUED = ("max-snippet", "max-image-preview", "max-video-preview", "unavailable_after")
# The HTML standard's shared declarative refresh steps: a delay (digits, then any digits and
# dots), an optional ";" or ",", an optional "url=", the target.
_REFRESH = re.compile(r"""^\s*(\d*)(?:\.[\d.]*)?\s*[;,]?\s*(?:url\s*=\s*)?(.*)$""", re.IGNORECASE | re.DOTALL)


def robots_directives(content: str) -> frozenset[str]:
    """The directives of a robots meta tag's ``content`` (or of a header value without its
    user agent) that Caffeine acts on."""
    out: set[str] = set()
    for part in content.split(","):
        word = re.sub(r"\s*:\s*", ":", part.strip().lower())  # "max-snippet: 0" is "max-snippet:0"
        out.update(_EXPANDS.get(word, ()))
    return frozenset(out)


def meta_applies(name: str) -> bool:
    """Does a ``<meta name=...>`` with this name speak to this crawler?"""
    return name.strip().lower() in ("robots", ROBOTS_TOKEN)


def header_directives(values: Iterable[str]) -> frozenset[str]:
    """The directives of a response's ``X-Robots-Tag`` header values that speak to this
    crawler (no user agent, or ``caffeinebot``)."""
    out: set[str] = set()
    for value in values:
        agent, colon, rest = value.partition(":")
        agent = agent.strip().lower()
        if colon and agent and " " not in agent and "," not in agent and agent not in _VALUED \
                and agent not in _EXPANDS:
            if agent != ROBOTS_TOKEN:
                continue
            value = rest
        out |= robots_directives(value)
    return frozenset(out)


def in_order(directives: Iterable[str]) -> list[str]:
    """``directives`` as stored: in ``DIRECTIVES`` order, each once."""
    present = set(directives)
    return [d for d in DIRECTIVES if d in present]


def parse_refresh(content: str) -> tuple[float, str] | None:
    """(delay in seconds, target as written) of a meta refresh's ``content``, or None when it
    names no target (a plain reload) or does not parse. The target may be quoted."""
    m = _REFRESH.match(content or "")
    if m is None:
        return None
    delay_text, target = m.group(1), m.group(2).strip()
    if not delay_text and not (content or "").lstrip().startswith("."):
        return None  # no delay: the standard ignores the tag
    if len(target) >= 2 and target[0] == target[-1] and target[0] in "'\"":
        target = target[1:-1].strip()
    elif target[:1] in "'\"":
        target = target[1:].strip()  # an opening quote never closed, as browsers read it
    if not target:
        return None
    return float(delay_text or 0), target
