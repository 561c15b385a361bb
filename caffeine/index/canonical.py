"""Canonical election within a duplicate cluster (the ``dups`` table's ``canonical-url``).

Layer: index. Pure; standard library only. The cluster observer and the Spark job
both call ``elect_canonical``, so they elect the same member by construction.

Rule (docs/INDEXING.md):

1. ``<link rel="canonical">`` is a hint, honoured within the cluster: the members that some
   member declares canonical (the declared URL is itself a member: fetched, a document, the
   same content) are the candidates, the one declared by most members first. A declared URL
   outside the cluster (another page, one not crawled, a noindex page) counts for nothing.
2. Among the candidates (every member when no declaration is honoured): the most inlinks;
   ties go to the shortest URL (in characters), then the lexicographically smallest
   (code-point order, which for str is also the order of the UTF-8 row keys).

The result depends only on the members, their counts and their declarations, never on the
order they arrive in, so re-running the election converges, and the Spark job computes the
same from the whole repository.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

__all__ = ["elect_canonical", "canonical_key"]


def canonical_key(url: str, inlinks: int) -> tuple[int, int, str]:
    """The sort key whose minimum is the canonical member among equally declared ones."""
    return (-inlinks, len(url), url)


def elect_canonical(members: Mapping[str, int], declared: Mapping[str, str] | None = None) -> str | None:
    """The canonical URL of a cluster ``{url: inlink count}`` whose members declare
    ``{member url: declared canonical URL}``; None for an empty cluster."""
    if not members:
        return None
    votes = Counter(target for source, target in (declared or {}).items() if source in members and target in members)
    if votes:
        return min(votes, key=lambda url: (-votes[url], *canonical_key(url, members[url])))
    return min(members, key=lambda url: canonical_key(url, members[url]))
