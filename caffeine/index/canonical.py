"""Canonical election within a duplicate cluster (the ``dups`` table's ``canonical-url``).

Layer: caffeine.index (pure; standard library only). The cluster observer and the Spark job
both call ``elect_canonical``, so they elect the same member by construction.

Rule (docs/INDEXING.md): the member with the most inlinks; ties go to the shortest URL (in
characters), then the lexicographically smallest (code-point order, which for str is also
the order of the UTF-8 row keys). The result depends only on the members and their counts,
never on the order they arrive in, so re-running the election converges.
"""

from __future__ import annotations

from typing import Mapping

__all__ = ["elect_canonical", "canonical_key"]


def canonical_key(url: str, inlinks: int) -> tuple[int, int, str]:
    """The sort key whose minimum is the canonical member."""
    return (-inlinks, len(url), url)


def elect_canonical(members: Mapping[str, int]) -> str | None:
    """The canonical URL of a cluster ``{url: inlink count}``; None for an empty cluster."""
    if not members:
        return None
    return min(members, key=lambda url: canonical_key(url, members[url]))
