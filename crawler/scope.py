"""A crawl's scope: which URLs it meets may it follow. One rule for links, redirects, sitemaps.

Layer: crawler. Imports ``crawler.traps``; pure, no I/O.

``Scope.refusal(url)`` is None when the crawl may follow ``url``, else why not:

* outside the scope: the URL's site (host and port, over http or https alike) is not one
  of the seeds' sites, and the crawl does not follow every site (``--any-host``);
* a trap limit: the URL exceeds one of ``crawler.traps.TrapLimits``' per-URL limits (length,
  path depth, repeated path segments, query parameters); the hit is counted for its site.

The crawler asks it of every link it would queue, every redirect target before the hop is
requested (so no request, robots.txt included, goes to a site outside the scope), every
sitemap a robots.txt lists and every ``<loc>`` of a sitemap. The seeds themselves are the
user's: they define the scope and are not checked. Which addresses a request may reach is
the other, independent rule (``crawler.addresses``), applied where connections are made.
"""

from __future__ import annotations

from typing import Iterable

from crawler.traps import LimitCounts, TrapLimits, site_of

__all__ = ["Scope", "OUT_OF_SCOPE"]

OUT_OF_SCOPE = "outside the crawl's scope (not a seed's site; --any-host follows every site)"


class Scope:
    """Thread-safe (immutable but for the counts)."""

    def __init__(self, seeds: Iterable[str], *, any_host: bool = False, limits: TrapLimits | None = None,
                 counts: LimitCounts | None = None) -> None:
        """``seeds``: URLs or origins (``http://host:port``) whose sites make the scope."""
        self.sites = frozenset(site_of(s) for s in seeds)
        self.any_host = any_host
        self.limits = limits if limits is not None else TrapLimits()
        self.counts = counts if counts is not None else LimitCounts()

    def in_scope(self, url: str) -> bool:
        return self.any_host or site_of(url) in self.sites

    def refusal(self, url: str) -> str | None:
        """None if ``url`` (normalized) may be followed, else the reason (see the module)."""
        if not self.in_scope(url):
            return OUT_OF_SCOPE
        flag = self.limits.url_limit(url)
        if flag is None:
            return None
        self.counts.hit(site_of(url), flag)
        return f"crawler-trap limit {flag} exceeded"
