"""The batch job's duplicate clusters: exact clusters, their near-duplicate links and the
connected components those make, with one canonical each (the logical ``dups`` and ``bands``
tables; the band rows are in the ``dups`` table).

Layer: spark. Pure: ``caffeine.index`` only, no I/O; ``cluster_tables`` takes
RDDs and returns RDDs. The rule is docs/INDEXING.md's ("Duplicates" and "Near-duplicates"),
the cluster observer's, applied to the whole repository at once:

* each exact cluster (documents with one fingerprint) with a sketch (``caffeine.index.neardup``)
  enters its LSH bands (band rows, ``~<key>``; the logical table ``bands``);
* the pairs of exact clusters that share a band and are near (``is_near``) are linked
  (``near:<fp>`` = shared/total shingles, on both rows);
* the connected components of those links are the near-duplicate clusters: the canonical
  is elected over all the pages of one (``elect_canonical``) and written on each of its
  exact clusters (``canonical-url``).

The links are only the near-duplicate pairs (a small fraction of the pages), so the
components are computed on the driver (union-find) and shipped with the tasks' closures.
"""

from __future__ import annotations

from itertools import combinations
from typing import Iterable

from caffeine.index import elect_canonical
from caffeine.index.neardup import band_keys, cluster_pages, is_near, overlap
from caffeine.index.schema import (
    BAND_MEMBERS,
    CANONICAL_URL,
    SKETCH,
    declares_column,
    encode_band,
    encode_int,
    encode_near,
    member_column,
    near_column,
)

__all__ = ["cluster_rows", "near_components", "near_cluster_rows", "cluster_tables"]

Cells = dict  # {column: bytes}


def cluster_rows(fp: str, members: Iterable[tuple[str, int, str | None]]) -> tuple[str, Cells]:
    """The ``dups`` row of one cluster: ``(url, inlinks, declared canonical or None)`` of each
    member give its members with their inlink counts, their declarations and the canonical."""
    members = list(members)
    counts = {url: n for url, n, _ in members}
    declared = {url: d for url, _, d in members if d is not None}
    cells = {member_column(url): encode_int(n).encode() for url, n in counts.items()}
    cells.update({declares_column(url): d.encode() for url, d in declared.items()})
    canonical = elect_canonical(counts, declared)
    if canonical is not None:
        cells[CANONICAL_URL] = canonical.encode()
    return fp, cells


def near_components(edges: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{fingerprint: its component's smallest fingerprint}`` for every fingerprint on an
    edge of the near-duplicate graph (union-find; the result does not depend on the order)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in edges:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return {x: root(x) for x in parent}


def near_cluster_rows(nodes: Iterable[tuple[str, list[tuple[str, int, str | None]]]]) -> list[tuple[str, Cells]]:
    """The ``dups`` rows (members, declarations, canonical) of the exact clusters of one
    near-duplicate cluster, ``(fp, [(url, inlinks, declared canonical or None), ...])`` each:
    the canonical is elected over all their pages and written on each of them."""
    rows = [cluster_rows(fp, members) for fp, members in nodes]
    counts, declared, _ = cluster_pages(dict(rows))
    canonical = elect_canonical(counts, declared)
    for _, cells in rows:
        cells.pop(CANONICAL_URL, None)
        if canonical is not None:
            cells[CANONICAL_URL] = canonical.encode()
    return rows


def cluster_tables(docs, exact, n: int | None, keep):
    """``(dups, bands)`` RDDs of ``(row, cells)``: from the documents (``spark.transforms.
    Document``) and ``exact``, ``(fp, [(url, inlinks, declared canonical or None), ...])``
    per exact cluster. ``keep`` persists an RDD that several stages reuse."""
    # One sketch per exact cluster: its pages share it (the fingerprint covers what it is of).
    sketches = keep(docs.filter(lambda d: d.sketch is not None).map(lambda d: (d.fingerprint, d.sketch))
                    .reduceByKey(lambda a, b: a, n))
    band_members = keep(sketches.flatMap(lambda fs: [(key, fs[0]) for key in band_keys(fs[1])])
                        .groupByKey(n).mapValues(sorted))
    bands = band_members.mapValues(lambda fps: {BAND_MEMBERS: encode_band(fps).encode()})
    pairs = band_members.flatMap(lambda kv: combinations(kv[1], 2)).distinct(n)
    edges = pairs.join(sketches, n).map(lambda kv: (kv[1][0], (kv[0], kv[1][1]))).join(sketches, n) \
        .map(lambda kv: (kv[1][0][0], kv[0], overlap(kv[1][0][1], kv[1][1]))) \
        .filter(lambda e: is_near(e[2])).collect()
    component = near_components((a, b) for a, b, _ in edges)
    near_cells: dict[str, Cells] = {}
    for a, b, pair in edges:
        near_cells.setdefault(a, {})[near_column(b)] = encode_near(pair).encode()
        near_cells.setdefault(b, {})[near_column(a)] = encode_near(pair).encode()
    clusters = exact.map(lambda kv: (component.get(kv[0], kv[0]), kv)).groupByKey(n) \
        .flatMap(lambda kv: near_cluster_rows(kv[1]))
    dups = keep(clusters.leftOuterJoin(sketches, n).map(
        lambda kv: (kv[0], {**kv[1][0], **({SKETCH: kv[1][1]} if kv[1][1] is not None else {}),
                            **near_cells.get(kv[0], {})})))
    return dups, bands
