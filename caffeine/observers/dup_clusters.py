"""The cluster observer: duplicates grouped by content fingerprint, near-duplicates linked by
sketch, one canonical per (near-duplicate) cluster.

Near-duplicates (docs/INDEXING.md, ``caffeine.index.neardup``): when a content (exact cluster)
gets its first page, ``add_node`` enters its sketch in its LSH bands (``~`` rows of ``dups``)
and links it (``near:<fp>``) to every near band-mate; when it loses its last page, ``remove_node`` takes it
out again and the clusters of its former neighbours are re-elected (a cluster may split).
``reelect`` always elects over the whole connected component (``near_cluster``).

Layer: observers. Two observers share this module:

- ``on_fingerprint`` observes ``repository/doc:fingerprint`` (strong): the page moves from its
  old cluster (if any) to its new one (if any) in the ``dups`` table, both are re-elected, its
  ``doc:anchors`` is written with its new cluster state, and a recount of its inlinks is
  notified for after this commit (a recount that ran meanwhile
  may have seen the page in no cluster yet, while this run's count may miss newer links).
- ``on_directives`` observes ``repository/doc:directives`` (strong): a member whose declared
  canonical (``<link rel="canonical">``) changed while its content did not gets its
  ``declares:<url>`` cell in its cluster's row updated, and the cluster re-elected.
- ``on_inlinks`` observes ``inlinks/in`` (weak; a popular page is notified by every page that
  links to it): recount the page's inlinks, update its member entry, re-elect its cluster,
  refresh ``docstats s:inlinks`` after commit, and write the page's ``doc:anchors`` (its
  incoming anchor text, ``caffeine.index.anchor_record``) when it changed, which has the
  export observer index it.

Each member's declared canonical is kept in its cluster's row (``declares:<url>``), written
when it joins and deleted when it leaves. Re-election applies the canonical rule
(``caffeine.index.elect_canonical``: a canonical some member declares, if it is a member; most
inlinks, then shortest URL, then lexicographic) to the cluster's members and declarations as
the transaction sees them, and
writes ``cluster:state`` ("1 <fp>" canonical, "0 <fp>" member, "0 -" none: the codec is
``caffeine.index.schema.encode_cluster_state``) on every member
whose state changed, which is what triggers the export observer. Concurrent re-elections of
one cluster conflict on ``canonical-url`` or on member cells, so one of them retries on the
newer membership: the election is always over a consistent snapshot.
"""

from __future__ import annotations

from caffeine.index import elect_canonical
from caffeine.index.documents import anchors_value
from caffeine.index.neardup import band_keys, cluster_pages, cluster_rows, is_near, overlap
from caffeine.index.schema import (
    BAND_MEMBERS,
    CANONICAL_URL,
    CLUSTER_STATE,
    DOC_ANCHORS,
    DOC_DIRECTIVES,
    DOC_FINGERPRINT,
    DOC_SKETCH,
    DOCSTATS,
    DUPS,
    INLINKS,
    INLINKS_NOTIFY,
    NO_CLUSTER,
    REPOSITORY,
    S_INLINKS,
    SKETCH,
    count_inlinks,
    decode_band,
    declares_column,
    decode_cluster_state,
    decode_directives,
    decode_fingerprint,
    decode_members,
    decode_near,
    encode_band,
    encode_cluster_state,
    encode_int,
    encode_near,
    member_column,
    near_column,
)
from caffeine.observers.serving_tables import serving_table


def set_state(txn, url: str, value: str) -> None:
    current = txn.get(REPOSITORY, url, CLUSTER_STATE)
    if current != value.encode():
        txn.set(REPOSITORY, url, CLUSTER_STATE, value)


def near_cluster(txn, fp: str) -> dict[str, dict[str, bytes]]:
    """The ``dups`` rows of the near-duplicate cluster of exact cluster ``fp``: every exact
    cluster joined to it by ``near:`` edges, ``fp`` first; one batched read per step."""
    return cluster_rows(fp, lambda fps: read_dups(txn, fps))


def read_dups(txn, fps: list[str]) -> dict[str, dict[str, bytes]]:
    """``{fp: cells}`` of the ``dups`` rows ``fps`` in ``txn``, in one batched read."""
    rows = txn.get_all_rows(DUPS, [fp.encode() for fp in fps])
    return {fp: rows[fp.encode()] for fp in fps}


def reelect(txn, fp: str) -> list[str]:
    """Elect the canonical of the near-duplicate cluster of exact cluster ``fp`` (over all
    the pages of all its exact clusters) and bring every member's state up to date; returns
    the cluster's exact fingerprints."""
    rows = near_cluster(txn, fp)
    members, declared, owner = cluster_pages(rows)
    new = elect_canonical(members, declared)
    # Written on every exact cluster of it, even when unchanged: every election of a
    # cluster then writes these cells, so concurrent elections of overlapping clusters
    # conflict and run one after the other. Otherwise two runs that each changed a different
    # member could both keep a canonical that neither would keep given both changes (write
    # skew, which snapshot isolation allows).
    for f, cells in rows.items():
        if new is None:
            if CANONICAL_URL in cells:
                txn.delete(DUPS, f, CANONICAL_URL)
        else:
            txn.set(DUPS, f, CANONICAL_URL, new)
    states = txn.get_rows(REPOSITORY, list(members), [CLUSTER_STATE])
    for url, f in owner.items():
        value = encode_cluster_state(f, url == new).encode()
        if states[url.encode()][CLUSTER_STATE] != value:
            txn.set(REPOSITORY, url, CLUSTER_STATE, value)
    return list(rows)


def reelect_all(txn, fps) -> None:
    """``reelect`` each near-duplicate cluster that holds one of ``fps``, once."""
    done: set[str] = set()
    for fp in fps:
        if fp not in done:
            done.update(reelect(txn, fp))


def add_node(txn, fp: str, sketch: bytes | None) -> None:
    """Exact cluster ``fp`` gets its first member, whose sketch is ``sketch``: store the
    sketch, enter it in its LSH bands (rows of ``dups``) and link it to every near-duplicate
    cluster found there.

    Every band it enters is rewritten (``encode_band``), so two clusters entered at once
    into a band they share conflict, and the one that retries sees the other: no pair
    that shares a band is ever missed."""
    if sketch is None:
        return
    txn.set(DUPS, fp, SKETCH, sketch)
    keys = band_keys(sketch)
    bands = txn.get_rows(DUPS, keys, [BAND_MEMBERS])
    candidates: set[str] = set()
    for key in keys:
        members = decode_band(bands[key.encode()][BAND_MEMBERS])
        candidates.update(members)
        txn.set(DUPS, key, BAND_MEMBERS, encode_band({*members, fp}))
    candidates.discard(fp)
    if not candidates:
        return
    # Whole rows: the election that follows walks the near ones again (read once, cached).
    rows = txn.get_all_rows(DUPS, sorted(candidates))
    for other in sorted(candidates):
        theirs = rows[other.encode()].get(SKETCH)
        pair = overlap(sketch, theirs) if theirs else (0, 0)
        if is_near(pair):
            txn.set(DUPS, fp, near_column(other), encode_near(pair))
            txn.set(DUPS, other, near_column(fp), encode_near(pair))


def remove_node(txn, fp: str, cells: dict[str, bytes]) -> list[str]:
    """Exact cluster ``fp`` (its ``dups`` row ``cells``) lost its last member: take it out of
    its bands and unlink it from its near-duplicates; returns the fingerprints it was linked
    to, whose clusters may have split."""
    sketch = cells.get(SKETCH)
    if sketch is None:
        return []
    txn.delete(DUPS, fp, SKETCH)
    keys = band_keys(sketch)
    bands = txn.get_rows(DUPS, keys, [BAND_MEMBERS])
    for key in keys:
        left = set(decode_band(bands[key.encode()][BAND_MEMBERS])) - {fp}
        if left:
            txn.set(DUPS, key, BAND_MEMBERS, encode_band(left))
        else:
            txn.delete(DUPS, key, BAND_MEMBERS)
    neighbours = sorted(decode_near(cells))
    for other in neighbours:
        txn.delete(DUPS, fp, near_column(other))
        txn.delete(DUPS, other, near_column(fp))
    return neighbours


# The page's columns ``on_fingerprint`` reads (the worker fetches them with its first read).
FINGERPRINT_READS = (DOC_FINGERPRINT, CLUSTER_STATE, DOC_ANCHORS, DOC_DIRECTIVES, DOC_SKETCH)


def on_fingerprint(txn, row: bytes, column: str) -> None:
    url = row.decode("utf-8")
    cols = txn.get_row(REPOSITORY, row, FINGERPRINT_READS)
    fp = decode_fingerprint(cols[DOC_FINGERPRINT])
    old_fp = decode_cluster_state(cols[CLUSTER_STATE]).fingerprint
    if fp == old_fp:
        return
    inlinks = txn.get_all(INLINKS, row)
    count = count_inlinks(inlinks)
    # Inlinks committed after this snapshot notified a recount that may already have run
    # and seen this page in no cluster (or the old one); one more recount after this
    # commit settles it. Cheaper than making the two always conflict.
    txn.notify(INLINKS, row, INLINKS_NOTIFY)
    if old_fp is not None:
        txn.delete(DUPS, old_fp, member_column(url))
        txn.delete(DUPS, old_fp, declares_column(url))
        old_cells = txn.get_all(DUPS, old_fp)
        # The old cluster's near-duplicate cluster is re-elected as a whole, or, when this
        # was the last page of that content, each part it may have split into.
        if decode_members(old_cells):
            reelect(txn, old_fp)
        else:
            reelect_all(txn, remove_node(txn, old_fp, old_cells))
            if CANONICAL_URL in old_cells:
                txn.delete(DUPS, old_fp, CANONICAL_URL)
    if fp is None:
        set_state(txn, url, NO_CLUSTER)
        return
    if not decode_members(txn.get_all(DUPS, fp)):
        add_node(txn, fp, cols[DOC_SKETCH])
    txn.set(DUPS, fp, member_column(url), encode_int(count))
    declared = decode_directives(cols[DOC_DIRECTIVES]).get("canonical")
    if declared is not None:
        txn.set(DUPS, fp, declares_column(url), declared)
    # The anchor text now, with the cluster state: the export of a new document then indexes
    # it at once, and the run the anchors' own notification starts finds nothing to change.
    set_anchors(txn, row, inlinks)
    reelect(txn, fp)


# The page's columns ``on_directives`` reads.
DIRECTIVES_READS = (DOC_DIRECTIVES, CLUSTER_STATE)


def on_directives(txn, row: bytes, column: str) -> None:
    url = row.decode("utf-8")
    cols = txn.get_row(REPOSITORY, row, DIRECTIVES_READS)
    fp = decode_cluster_state(cols[CLUSTER_STATE]).fingerprint
    if fp is None:
        return  # in no cluster: on_fingerprint writes its declaration when it joins one
    declared = decode_directives(cols[DOC_DIRECTIVES]).get("canonical")
    current = txn.get(DUPS, fp, declares_column(url))
    if current == (declared.encode() if declared is not None else None):
        return
    if declared is None:
        txn.delete(DUPS, fp, declares_column(url))
    else:
        txn.set(DUPS, fp, declares_column(url), declared)
    reelect(txn, fp)


def set_anchors(txn, row: bytes, inlinks: dict[str, bytes]) -> None:
    """Write the page's ``doc:anchors`` from its ``in:*`` cells, if it changed."""
    anchors = anchors_value(inlinks)
    if txn.get(REPOSITORY, row, DOC_ANCHORS) != anchors:
        txn.set(REPOSITORY, row, DOC_ANCHORS, anchors)


def on_inlinks(txn, row: bytes, column: str) -> None:
    url = row.decode("utf-8")
    fp = decode_cluster_state(txn.get(REPOSITORY, row, CLUSTER_STATE)).fingerprint
    if fp is None:
        return  # not a document (yet): its cluster observer counts when it becomes one
    inlinks = txn.get_all(INLINKS, row)
    count = count_inlinks(inlinks)
    set_anchors(txn, row, inlinks)
    member = member_column(url)
    value = encode_int(count)
    if txn.get(DUPS, fp, member) != value.encode():
        txn.set(DUPS, fp, member, value)
        reelect(txn, fp)
    docstats = serving_table(txn.cluster, DOCSTATS)
    seq = txn.start_ts
    txn.on_commit(lambda: docstats.put({row: {S_INLINKS: value}}, ts=seq))
