"""Reading the duplicate clusters the cluster observer keeps in the ``dups`` table.

Layer: observers. Reads through the transaction it is given (``caffeine.percolator``'s
public API), with the ``caffeine.index.schema`` names; writes nothing. ``caffeine dups`` and
``caffeine demo`` show what these return.

A cluster is a near-duplicate cluster: one or more exact clusters (pages with the same
content fingerprint) joined by ``near:`` edges (``caffeine.index.neardup``), with one
canonical for all their pages.
"""

from __future__ import annotations

from caffeine.index.neardup import cluster_rows, component, similarity
from caffeine.index.schema import CANONICAL_URL, DUPS, DUPS_BANDS_START, decode_canonical_url, decode_members, decode_near


def _canonical(cols: dict) -> str | None:
    return decode_canonical_url(cols.get(CANONICAL_URL) or None)


def _by_rank(members: dict[str, int]) -> dict[str, int]:
    return dict(sorted(members.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0])))


def read_cluster(txn, fp: str) -> dict | None:
    """The cluster of exact cluster ``fp``: ``{"fingerprint", "canonical", "members",
    "exact"}``; members as {url: inlinks} by most inlinks, then shortest URL, over all its
    exact clusters; ``exact`` lists each exact cluster (``fingerprint``, ``members``, and
    ``near``: {fingerprint: Jaccard similarity} of its near-duplicate edges), ``fp``
    first. None when ``fp`` has no member."""
    def read(fps):
        rows = txn.get_all_rows(DUPS, [f.encode() for f in fps])
        return {f: rows[f.encode()] for f in fps}

    rows = cluster_rows(fp, read)
    if not decode_members(rows[fp]):
        return None
    members: dict[str, int] = {}
    exact = []
    for f, cells in rows.items():
        found = decode_members(cells)
        members.update(found)
        exact.append({"fingerprint": f, "members": _by_rank(found),
                      "near": {other: similarity(n) for other, n in sorted(decode_near(cells).items())}})
    return {"fingerprint": fp, "canonical": _canonical(rows[fp]), "members": _by_rank(members), "exact": exact}


def largest_clusters(txn, top: int) -> tuple[list[dict], int, int]:
    """(the ``top`` largest clusters, number of clusters, number of member pages). Each is
    ``{"fingerprint"`` (its smallest exact fingerprint), ``"canonical", "size", "exact"`` (how
    many exact clusters it joins)``}``."""
    sizes: dict[str, int] = {}
    canonical: dict[str, str | None] = {}
    near: dict[str, list[str]] = {}
    for fp, cols in txn.scan(DUPS, b"", DUPS_BANDS_START):  # the clusters' rows, not the bands'
        members = decode_members(cols)
        if not members:
            continue
        key = fp.decode()
        sizes[key] = len(members)
        canonical[key] = _canonical(cols)
        near[key] = list(decode_near(cols))
    clusters = []
    seen: set[str] = set()
    for fp in sorted(sizes):
        if fp in seen:
            continue
        parts = component(fp, lambda fps: {f: near.get(f, ()) for f in fps})
        seen.update(parts)
        clusters.append({"fingerprint": min(parts), "canonical": canonical[fp],
                         "size": sum(sizes.get(f, 0) for f in parts), "exact": len(parts)})
    clusters.sort(key=lambda c: (-c["size"], c["fingerprint"]))
    return clusters[:top], len(clusters), sum(sizes.values())


__all__ = ["largest_clusters", "read_cluster"]
