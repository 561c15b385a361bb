"""The cluster observer: duplicates grouped by content fingerprint, one canonical per group.

Layer: application. Two observers share this module:

- ``on_fingerprint`` observes ``repository/doc:fingerprint`` (strong): the page moves from its
  old cluster (if any) to its new one (if any) in the ``dups`` table, both are re-elected, its
  ``doc:anchors`` is written with its new cluster state, and a recount of its inlinks is
  notified for after this commit (a recount that ran meanwhile
  may have seen the page in no cluster yet, while this run's count may miss newer links).
- ``on_inlinks`` observes ``inlinks/in`` (weak; a popular page is notified by every page that
  links to it): recount the page's inlinks, update its member entry, re-elect its cluster,
  refresh ``docstats s:inlinks`` after commit, and write the page's ``doc:anchors`` (its
  incoming anchor text, ``caffeine.index.anchor_record``) when it changed, which has the
  export observer index it.

Re-election applies the canonical rule (``caffeine.index.elect_canonical``: most inlinks, then
shortest URL, then lexicographic) to the cluster's members as the transaction sees them, and
writes ``cluster:state`` ("1 <fp>" canonical, "0 <fp>" member, "0 -" none: the codec is
``caffeine.index.schema.encode_cluster_state``) on every member
whose state changed, which is what triggers the export observer. Concurrent re-elections of
one cluster conflict on ``canonical-url`` or on member cells, so one of them retries on the
newer membership: the election is always over a consistent snapshot.
"""

from __future__ import annotations

from caffeine.index import elect_canonical
from caffeine.index.documents import anchors_value
from caffeine.index.schema import (
    CANONICAL_URL,
    CLUSTER_STATE,
    DOC_ANCHORS,
    DOC_FINGERPRINT,
    DOCSTATS,
    DOCSTATS_FAMILY,
    DUPS,
    INLINKS,
    INLINKS_NOTIFY,
    NO_CLUSTER,
    REPOSITORY,
    S_INLINKS,
    count_inlinks,
    decode_canonical_url,
    decode_cluster_state,
    decode_fingerprint,
    decode_members,
    encode_cluster_state,
    encode_int,
    member_column,
)


def cluster_members(txn, fp: str) -> tuple[dict[str, int], str | None]:
    """({member url: inlinks}, current canonical) of one cluster, as this transaction sees it."""
    cells = txn.get_all(DUPS, fp.encode())
    return decode_members(cells), decode_canonical_url(cells.get(CANONICAL_URL))


def set_state(txn, url: str, value: str) -> None:
    current = txn.get(REPOSITORY, url, CLUSTER_STATE)
    if current != value.encode():
        txn.set(REPOSITORY, url, CLUSTER_STATE, value)


def reelect(txn, fp: str) -> None:
    """Elect the canonical of cluster ``fp`` and bring every member's state up to date."""
    members, old = cluster_members(txn, fp)
    new = elect_canonical(members)
    key = fp.encode()
    # Written even when unchanged: every election of a cluster then writes this one cell,
    # so concurrent elections conflict and run one after the other. Otherwise two runs that
    # each changed a different member could both keep a canonical that neither would keep
    # given both changes (write skew, which snapshot isolation allows).
    if new is None:
        if old is not None:
            txn.delete(DUPS, key, CANONICAL_URL)
    else:
        txn.set(DUPS, key, CANONICAL_URL, new)
    states = txn.get_rows(REPOSITORY, list(members), [CLUSTER_STATE])
    for url in members:
        value = encode_cluster_state(fp, url == new).encode()
        if states[url.encode()][CLUSTER_STATE] != value:
            txn.set(REPOSITORY, url, CLUSTER_STATE, value)


# The page's columns ``on_fingerprint`` reads (the worker fetches them with its first read).
FINGERPRINT_READS = (DOC_FINGERPRINT, CLUSTER_STATE, DOC_ANCHORS)


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
        reelect(txn, old_fp)
    if fp is None:
        set_state(txn, url, NO_CLUSTER)
        return
    txn.set(DUPS, fp, member_column(url), encode_int(count))
    # The anchor text now, with the cluster state: the export of a new document then indexes
    # it at once, and the run the anchors' own notification starts finds nothing to change.
    set_anchors(txn, row, inlinks)
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
    docstats = txn.cluster.serving(DOCSTATS, [DOCSTATS_FAMILY])
    seq = txn.start_ts
    txn.on_commit(lambda: docstats.put({row: {S_INLINKS: value}}, ts=seq))
