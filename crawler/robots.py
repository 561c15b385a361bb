"""robots.txt: fetched once per origin, cached, consulted before every request.

Layer: crawler. Imports ``crawler.fetch`` and ``protego``, Scrapy's RFC 9309 parser.

Rules follow RFC 9309:

* a 2xx robots.txt is parsed (at most 512 KiB are read, the RFC's minimum) by ``protego``:
  the group of the most specific matching user-agent (``CaffeineBot``, else ``*``) applies;
  ``*`` matches any run of characters and a trailing ``$`` anchors the end of the path
  (``Disallow: /*?``, ``Disallow: /*.pdf$``); the longest matching rule decides, and
  ``Allow`` wins a tie; percent-escapes compare case-insensitively and against their
  decoded form (``/a%3cd`` matches ``/a%3Cd`` and ``/a<d``);
* any 4xx (401 and 403 included), or a redirect chain that fails, means no rules: all
  allowed; a redirect hop is followed only if ``follow`` (the crawl's scope) admits it, so a
  robots.txt that redirects off the crawl's sites gets no other site asked (no rules then);
* a 5xx, or no answer at all (refused, timeout), means the origin is unreachable: nothing
  is allowed. The page is recorded with the reason instead of being requested; an origin
  whose address the crawl may not connect to (``crawler.addresses``) is not asked at all,
  and its pages are recorded with that refusal (``address refused: ...``);
* ``Crawl-delay`` (fractions too: ``0.5``) is honoured as a per-origin politeness delay,
  capped at ``MAX_CRAWL_DELAY_S`` (a site cannot stall the crawler for hours);
* ``Sitemap`` lines are kept (``sitemaps(origin)``) for ``crawl --sitemaps``.

Entries live ``ttl_s`` seconds (one hour by default; the RFC allows caching up to a day).
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from dataclasses import dataclass

from protego import Protego

from crawler.addresses import ADDRESS_REFUSED
from crawler.fetch import ROBOTS_AGENT, Fetcher, MayFetch

__all__ = ["RobotsCache", "origin_of", "MAX_CRAWL_DELAY_S", "ROBOTS_DISALLOWED"]

MAX_CRAWL_DELAY_S = 30.0
ROBOTS_DISALLOWED = "disallowed by robots.txt"  # the recorded error of a forbidden URL
_ROBOTS_MAX_BYTES = 512 * 1024


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a normalized URL (the unit of robots.txt and politeness)."""
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


@dataclass
class _Rules:
    parser: Protego | None  # None with allow_all/deny_reason deciding
    deny_reason: str | None
    fetched_monotonic: float

    def check(self, url: str, agent: str) -> str | None:
        if self.deny_reason is not None:
            return self.deny_reason
        if self.parser is not None and not self.parser.can_fetch(url, agent):
            return ROBOTS_DISALLOWED
        return None

    def crawl_delay(self, agent: str) -> float | None:
        if self.parser is None:
            return None
        try:
            delay = self.parser.crawl_delay(agent)
        except (TypeError, ValueError):
            return None
        return None if delay is None else min(max(float(delay), 0.0), MAX_CRAWL_DELAY_S)

    def sitemaps(self) -> list[str]:
        return list(self.parser.sitemaps) if self.parser is not None else []


class RobotsCache:
    """Thread-safe; each origin's robots.txt is fetched by one thread while others wait."""

    def __init__(self, fetcher: Fetcher, *, agent: str = ROBOTS_AGENT, ttl_s: float = 3600.0,
                 follow: MayFetch | None = None) -> None:
        """``follow``: asked before every redirect hop of a robots.txt fetch (the crawl's
        ``crawler.scope.Scope.refusal``), as for any other fetch of the crawl."""
        self.fetcher = fetcher
        self.follow = follow
        self.agent = agent
        self.ttl_s = ttl_s
        self._rules: dict[str, _Rules] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def check(self, url: str) -> str | None:
        """None if ``url`` may be fetched, else the reason it may not."""
        return self._rules_for(origin_of(url)).check(url, self.agent)

    def crawl_delay(self, origin: str) -> float | None:
        """The origin's Crawl-delay if its robots.txt was already read (never fetches)."""
        rules = self._rules.get(origin)
        return rules.crawl_delay(self.agent) if rules else None

    def known(self, origin: str) -> bool:
        """Whether the origin's robots.txt was already read (so its Crawl-delay is known)."""
        return origin in self._rules

    def sitemaps(self, origin: str) -> list[str]:
        """The Sitemap URLs the origin's robots.txt lists (fetches it if need be)."""
        return self._rules_for(origin).sitemaps()

    def _rules_for(self, origin: str) -> _Rules:
        rules = self._rules.get(origin)
        if rules is not None and time.monotonic() - rules.fetched_monotonic < self.ttl_s:
            return rules
        with self._guard:
            lock = self._locks.setdefault(origin, threading.Lock())
        with lock:
            rules = self._rules.get(origin)
            if rules is None or time.monotonic() - rules.fetched_monotonic >= self.ttl_s:
                rules = self._fetch(origin)
                self._rules[origin] = rules
            return rules

    def _fetch(self, origin: str) -> _Rules:
        result = self.fetcher.fetch(origin + "/robots.txt", follow=self.follow, html_only=False,
                                    max_bytes=_ROBOTS_MAX_BYTES)
        now = time.monotonic()
        if result.status == 0 and (result.error or "").startswith(ADDRESS_REFUSED):
            return _Rules(None, result.error, now)  # never connected: its pages get the same refusal
        if result.status == 0 or 500 <= result.status < 600:
            why = result.error or f"status {result.status}"
            return _Rules(None, f"robots.txt unreachable ({why}): origin treated as disallowed", now)
        if result.error is not None or not 200 <= result.status < 300 or result.content is None:
            return _Rules(None, None, now)  # 3xx failures and 4xx: no rules apply
        try:
            parser = Protego.parse(result.content.decode("utf-8", errors="replace"))
        except Exception:  # protego is lenient; a parser bug on junk must not stop the crawl
            return _Rules(None, None, now)
        return _Rules(parser, None, now)
