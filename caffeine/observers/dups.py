"""Reading the duplicate clusters the cluster observer keeps in the ``dups`` table.

Layer: application. Reads through the transaction it is given (``caffeine.percolator``'s
public API), with the ``caffeine.index.schema`` names; writes nothing. ``caffeine dups`` and
``caffeine demo`` show what these return.
"""

from __future__ import annotations

from caffeine.index.schema import CANONICAL_URL, DUPS, decode_canonical_url, decode_members


def _canonical(cols: dict) -> str | None:
    return decode_canonical_url(cols.get(CANONICAL_URL) or None)


def read_cluster(txn, fp: str) -> dict | None:
    """The cluster with content fingerprint ``fp``: ``{"fingerprint", "canonical", "members"}``,
    members as {url: inlinks} by most inlinks, then shortest URL; None when it has no member."""
    key = fp.encode()
    for _, cols in txn.scan(DUPS, key, key + b"\x00"):
        members = decode_members(cols)
        if not members:
            return None
        return {"fingerprint": fp, "canonical": _canonical(cols),
                "members": dict(sorted(members.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0])))}
    return None


def largest_clusters(txn, top: int) -> tuple[list[dict], int, int]:
    """(the ``top`` largest clusters, number of clusters, number of member pages)."""
    clusters = []
    total_members = 0
    for fp, cols in txn.scan(DUPS):
        members = decode_members(cols)
        if not members:
            continue
        total_members += len(members)
        clusters.append({"fingerprint": fp.decode(), "canonical": _canonical(cols), "size": len(members)})
    clusters.sort(key=lambda c: (-c["size"], c["fingerprint"]))
    return clusters[:top], len(clusters), total_members


__all__ = ["largest_clusters", "read_cluster"]
