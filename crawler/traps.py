"""Crawler-trap limits: what one site can make a crawl run hold, and what was cut.

Layer: crawler. Imports the standard library only; pure bookkeeping, no I/O.

A site can generate URLs without end: an endless calendar (``?month=`` links to the next
month forever), a fresh session id in every link (``caffeine.index.urls`` drops the known
session-id parameters), relative links that make paths ever deeper (``a/b/a/b/...``),
thousands of links per page, a 100 KB URL. ``TrapLimits`` bounds each, with a documented
default and a ``caffeine crawl`` flag (``FLAGS``); 0 turns a limit off:

==========================  =========  ==================================================
limit (flag)                default    a URL or link is not followed when
==========================  =========  ==================================================
``--max-url-length``        2048       the normalized URL is longer (characters)
``--max-path-depth``        20         its path has more segments (``/a/b/c.html``: 3)
``--max-path-repeats``      2          a run of path segments repeats back to back more
                                       often (``/a/a/a/``, ``/a/b/a/b/a/b/``: 3 times;
                                       among the last 256 segments)
``--max-query-params``      16         its query has more ``&``-separated parameters
``--max-links-per-page``    5000       a page links to more distinct followable URLs:
                                       the first ones in document order are kept
``--max-host-pages``        100000     its site (host and port) already has this many
                                       URLs in the crawl run
==========================  =========  ==================================================

The first four are properties of one URL (``url_limit``) and apply wherever the crawl meets
a URL it did not get from its user: links, redirect targets, sitemap entries
(``crawler.scope``). The last two bound what a page and a site add to the frontier
(``crawler.crawl``). ``LimitCounts`` counts, per site and limit, the URLs and links not
followed, for the progress line and the crawl's summary.
"""

from __future__ import annotations

import threading
import urllib.parse
from collections import Counter
from dataclasses import dataclass, fields
from typing import Iterable

__all__ = ["TrapLimits", "LimitCounts", "HostBudget", "FLAGS", "site_of"]

# limit field -> the caffeine crawl flag that sets it (and names it in reports)
FLAGS = {
    "max_url_length": "--max-url-length",
    "max_path_depth": "--max-path-depth",
    "max_path_repeats": "--max-path-repeats",
    "max_query_params": "--max-query-params",
    "max_links_per_page": "--max-links-per-page",
    "max_host_pages": "--max-host-pages",
}


def site_of(url: str) -> str:
    """The site of a normalized URL: its host and port (``127.0.0.1:8800``, ``example.org``)."""
    return urllib.parse.urlsplit(url).netloc


@dataclass(frozen=True)
class TrapLimits:
    max_url_length: int = 2048
    max_path_depth: int = 20
    max_path_repeats: int = 2
    max_query_params: int = 16
    max_links_per_page: int = 5000
    max_host_pages: int = 100_000

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) < 0:
                raise ValueError(f"{FLAGS[f.name]} must be 0 (no limit) or more")

    def url_limit(self, url: str) -> str | None:
        """The flag of the first per-URL limit a normalized ``url`` exceeds, or None."""
        if self.max_url_length and len(url) > self.max_url_length:
            return FLAGS["max_url_length"]
        parts = urllib.parse.urlsplit(url)
        segments = [s for s in parts.path.split("/") if s]
        if self.max_path_depth and len(segments) > self.max_path_depth:
            return FLAGS["max_path_depth"]
        if self.max_path_repeats and _repeats_over(segments, self.max_path_repeats):
            return FLAGS["max_path_repeats"]
        if self.max_query_params and sum(1 for p in parts.query.split("&") if p) > self.max_query_params:
            return FLAGS["max_query_params"]
        return None

    def describe(self) -> str:
        return ", ".join(f"{FLAGS[f.name]} {getattr(self, f.name) or 'off'}" for f in fields(self))


# The path-repeat check looks at this many segments at most, the last ones (a trap's repeats
# grow at the end of its paths): with the depth limit off a path can have thousands.
MAX_REPEAT_SEGMENTS = 256


def _repeats_over(segments: list[str], limit: int) -> bool:
    """Whether a run of segments occurs back to back more than ``limit`` times (``a b a b a b``:
    3 times) among the last ``MAX_REPEAT_SEGMENTS`` segments.

    A run of ``size`` segments repeated ``limit + 1`` times is a stretch of ``size * limit``
    positions ``i`` where ``segments[i] == segments[i + size]``: one pass per size, stopping
    at the first such stretch, so at most ``n * n / (limit + 1)`` comparisons (n <= 256)."""
    tail = segments[-MAX_REPEAT_SEGMENTS:]
    n = len(tail)
    for size in range(1, n // (limit + 1) + 1):
        need = size * limit
        run = 0
        for i in range(n - size):
            if tail[i] == tail[i + size]:
                run += 1
                if run >= need:
                    return True
            else:
                run = 0
    return False


class LimitCounts:
    """Thread-safe counts of what the limits cut: (site, flag) -> URLs or links."""

    def __init__(self) -> None:
        self._counts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def hit(self, site: str, flag: str, n: int = 1) -> None:
        if n > 0:
            with self._lock:
                self._counts[(site, flag)] += n

    def counts(self) -> Counter:
        with self._lock:
            return Counter(self._counts)

    def sites(self) -> list[str]:
        """Sites that hit a limit, the most cut first."""
        per_site: Counter[str] = Counter()
        for (site, _), n in self.counts().items():
            per_site[site] += n
        return [site for site, _ in per_site.most_common()]

    def most_cut_by(self, site: str) -> str | None:
        """The flag of the limit that cut the most for ``site``."""
        hits = [(n, flag) for (s, flag), n in self.counts().items() if s == site]
        return max(hits)[1] if hits else None

    def lines(self) -> list[str]:
        """One line per site: ``127.0.0.1:8800: --max-path-repeats 12, --max-host-pages 40``."""
        by_site: dict[str, list[tuple[str, int]]] = {}
        for (site, flag), n in sorted(self.counts().items()):
            by_site.setdefault(site, []).append((flag, n))
        return [f"{site}: " + ", ".join(f"{flag} {n}" for flag, n in hits)
                for site, hits in sorted(by_site.items(), key=lambda item: -sum(n for _, n in item[1]))]


class HostBudget:
    """``max_host_pages``: how many URLs each site may have in a crawl run. Thread-safe.

    ``take`` reserves room for URLs about to be queued and returns those that fit (the rest
    are counted as cut); ``give_back`` returns the room of reserved URLs that were not
    queued after all (another page queued them first, the transaction failed)."""

    def __init__(self, limit: int, counts: LimitCounts, known: Iterable[str] = ()) -> None:
        self.limit = limit
        self.counts = counts
        self._used: Counter[str] = Counter(site_of(u) for u in known)
        self._lock = threading.Lock()

    def take(self, urls: list[str]) -> list[str]:
        if not self.limit:
            return list(urls)
        kept, cut = [], Counter()
        with self._lock:
            for url in urls:
                site = site_of(url)
                if self._used[site] < self.limit:
                    self._used[site] += 1
                    kept.append(url)
                else:
                    cut[site] += 1
        for site, n in cut.items():
            self.counts.hit(site, FLAGS["max_host_pages"], n)
        return kept

    def give_back(self, urls: Iterable[str]) -> None:
        if not self.limit:
            return
        with self._lock:
            for url in urls:
                self._used[site_of(url)] -= 1
