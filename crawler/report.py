"""What a crawl run reports: one ``Outcome`` per URL tried, and the run's ``CrawlReport``.

Layer: crawler. Imports ``crawler.addresses``, ``crawler.robots`` and ``crawler.traps`` for
the labels and limit names; no I/O. ``crawler.crawl`` fills them; ``crawler.ingest`` reuses
``Outcome`` for its records.

An outcome's ``label`` is what the summary counts: the status, ``robots.txt`` for a URL
robots.txt forbids, ``address refused`` for one whose address (or whose redirect target's)
the crawl may not connect to (``crawler.addresses``), ``error`` for another failure without
a response, ``not recorded`` for a failed transaction. The summary also names, per site,
the crawler-trap limits hit and what they cut (``crawler.traps``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from crawler.addresses import ADDRESS_REFUSED
from crawler.robots import ROBOTS_DISALLOWED
from crawler.traps import LimitCounts

__all__ = ["Outcome", "CrawlReport"]


@dataclass(frozen=True)
class Outcome:
    url: str
    status: int
    error: str | None
    recorded: bool = True        # False: the transaction failed; the URL stays queued
    truncated: bool = False
    content_type: str | None = None

    @property
    def label(self) -> str:
        if not self.recorded:
            return "not recorded"
        if self.error is not None and self.error.startswith(ROBOTS_DISALLOWED):
            return "robots.txt"
        if self.error is not None and (self.error.startswith(ADDRESS_REFUSED)
                                       or f"not followed: {ADDRESS_REFUSED}" in self.error):
            return "address refused"
        if self.error is not None:
            return "error" if self.status == 0 else f"{self.status} (error)"
        return str(self.status)


@dataclass
class CrawlReport:
    run: str
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    invalid_seeds: list[str] = field(default_factory=list)
    queued_left: int = 0
    stopped: str | None = None   # "max-pages", "interrupted" or None (frontier exhausted)
    elapsed_s: float = 0.0
    paced_s: float = 0.0         # fetch threads' time spent waiting for the observers (back-pressure)
    limits: Counter = field(default_factory=Counter)  # (site, trap-limit flag) -> URLs/links not followed
    addresses: str = ""          # the address policy the crawl ran with

    def limit_lines(self) -> list[str]:
        """Per site, the trap limits it hit and how much each cut."""
        counts = LimitCounts()
        for (site, flag), n in self.limits.items():
            counts.hit(site, flag, n)
        return counts.lines()

    def counts(self) -> Counter:
        return Counter(o.label for o in self.outcomes.values())

    def errors(self) -> list[Outcome]:
        return sorted((o for o in self.outcomes.values() if o.error is not None or not o.recorded), key=lambda o: o.url)

    def summary(self, max_errors: int = 100) -> str:
        lines = [f"crawl run {self.run}: {len(self.outcomes)} URLs in {self.elapsed_s:.1f}s"]
        if self.paced_s >= 0.05:
            lines.append(f"  paced {self.paced_s:.1f} thread-seconds so the observers' backlog stayed fresh")
        for label, n in sorted(self.counts().items()):
            lines.append(f"  {label:>14}: {n}")
        truncated = sum(o.truncated for o in self.outcomes.values())
        if truncated:
            lines.append(f"  {'truncated':>14}: {truncated} (body cut at --max-bytes)")
        if self.counts()["address refused"]:
            lines.append(f"  connections allowed to {self.addresses} (--allow-private-addresses for every address)")
        limit_lines = self.limit_lines()
        if limit_lines:
            lines.append("crawler-trap limits hit (URLs and links not followed, per site):")
            lines += [f"  {line}" for line in limit_lines]
        errors = self.errors()
        if errors:
            lines.append("errors:")
            for o in errors[:max_errors]:
                lines.append(f"  {o.url}  [{o.label}] {o.error}")
            if len(errors) > max_errors:
                lines.append(f"  ... and {len(errors) - max_errors} more")
        for seed in self.invalid_seeds:
            lines.append(f"  not an http(s) URL, skipped: {seed!r}")
        if self.stopped:
            lines.append(f"stopped ({self.stopped}); {self.queued_left} URLs still queued: "
                         "continue with `caffeine crawl --resume`")
        return "\n".join(lines)
