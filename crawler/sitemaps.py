"""Sitemaps (sitemaps.org protocol 0.9): the page URLs a site lists, for ``crawl --sitemaps``.

Layer: crawler. Imports ``crawler.fetch``, ``caffeine.index.urls`` and lxml; no HBase.

``sitemap_urls(fetcher, sitemap_urls, may_fetch, follow)`` fetches each sitemap (the
``Sitemap:`` lines of robots.txt), follows ``<sitemapindex>`` files to nested sitemaps, and
returns the ``<loc>`` URLs of every ``<urlset>``, normalized, deduplicated, in document order.

Rules:

* ``follow`` (the crawl's ``crawler.scope.Scope.refusal``) is asked of every sitemap before
  it is fetched, of every redirect hop, and of every page URL listed: a robots.txt that
  names a sitemap on another site (or one past a trap limit) gets nothing fetched there;

* a sitemap may list only URLs of its own origin (the protocol's rule); others are dropped;
* a gzip-compressed sitemap (``.xml.gz``, or a body starting with the gzip magic) is
  decompressed, up to the protocol's 50 MB;
* at most ``MAX_SITEMAPS`` sitemap files and ``MAX_URLS`` URLs are read, nested indexes at
  most ``MAX_NESTING`` deep: a site cannot make the crawler read forever;
* nothing raises: an unreachable, forbidden (``may_fetch``) or unparsable sitemap is skipped.
"""

from __future__ import annotations

import gzip
import io
import logging
import urllib.parse

from caffeine.index.urls import normalize_url
from crawler.fetch import Fetcher, MayFetch

__all__ = ["sitemap_urls", "parse_sitemap", "MAX_SITEMAPS", "MAX_URLS"]

log = logging.getLogger(__name__)

MAX_SITEMAPS = 50
MAX_URLS = 50_000
MAX_NESTING = 2
_MAX_BYTES = 50 * 1024 * 1024


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def parse_sitemap(body: bytes) -> tuple[str, list[str]]:
    """("urlset" | "sitemapindex" | "", the raw ``<loc>`` texts) of one sitemap file."""
    from lxml import etree

    if body[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(body)) as f:
                body = f.read(_MAX_BYTES)
        except (OSError, EOFError):
            return "", []
    parser = etree.XMLParser(resolve_entities=False, no_network=True, recover=True, huge_tree=False)
    try:
        root = etree.fromstring(body, parser)
    except etree.XMLSyntaxError:
        return "", []
    if root is None:
        return "", []
    kind = etree.QName(root).localname
    locs = [(el.text or "").strip() for el in root.iter() if isinstance(el.tag, str) and etree.QName(el).localname == "loc"]
    return (kind if kind in ("urlset", "sitemapindex") else ""), [loc for loc in locs if loc]


def sitemap_urls(fetcher: Fetcher, sitemaps: list[str], may_fetch: MayFetch | None = None,
                 follow: MayFetch | None = None) -> list[str]:
    """Page URLs listed by ``sitemaps`` (see the module docstring)."""
    found: dict[str, None] = {}
    todo = [(u, 0) for u in (normalize_url(s) for s in sitemaps) if u]
    seen: set[str] = set()
    while todo and len(seen) < MAX_SITEMAPS and len(found) < MAX_URLS:
        url, nesting = todo.pop(0)
        if url in seen:
            continue
        seen.add(url)
        refused = follow(url) if follow else None
        if refused is not None:
            log.info("sitemap %s not fetched: %s", url, refused)
            continue
        result = fetcher.fetch(url, may_fetch, follow=follow, html_only=False, max_bytes=_MAX_BYTES)
        if not result.ok or result.content is None:
            log.info("sitemap %s skipped: %s", url, result.error or f"status {result.status}")
            continue
        kind, locs = parse_sitemap(result.content)
        origin = _origin(result.final_url)
        for loc in locs:
            target = normalize_url(loc, result.final_url)
            if target is None:
                continue
            if kind == "sitemapindex":
                if nesting < MAX_NESTING:
                    todo.append((target, nesting + 1))
            elif kind == "urlset" and _origin(target) == origin and len(found) < MAX_URLS:
                if follow is None or follow(target) is None:
                    found[target] = None
    return list(found)
