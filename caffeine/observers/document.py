"""The document observer: a crawled page becomes a parsed document, and its links are inverted.

Layer: observers. Imports ``caffeine.percolator`` public names via the transaction it is
given, and the pure ``caffeine.index`` core: ``derive`` computes what a page becomes,
``caffeine.index.schema`` names and encodes the cells. Observes ``repository/page:meta`` (strong).

Per run, on the page's row: decide what the fetch means (docs/INDEXING.md: 2xx HTML is
parsed; 404/410 or non-HTML removes the document; anything else keeps the last good version),
compute the new ``doc:parsed``, ``doc:outlinks``, ``doc:fingerprint``, ``doc:sketch`` and ``doc:directives``
(``derive``: a page that says ``noindex``, or is a meta-refresh redirect stub, is no document
and has no fingerprint, so the cluster observer takes it out of its cluster and the index;
a ``nofollow`` page has no outlinks), and write only what changed. Link inversion: for each target whose anchor text from this page changed, set (or
delete) ``inlinks[target] in:<this url>`` and put a weak notification on the target so the
cluster observer recounts its inlinks. An unchanged re-crawl writes nothing downstream.
"""

from __future__ import annotations

from caffeine.index.documents import derive, fetch_outcome
from caffeine.index.schema import (
    DOC_DIRECTIVES,
    DOC_FINGERPRINT,
    DOC_OUTLINKS,
    DOC_PARSED,
    DOC_SKETCH,
    INLINKS,
    INLINKS_NOTIFY,
    PAGE_CONTENT,
    PAGE_META,
    REPOSITORY,
    decode_outlinks,
    decode_page_meta,
    encode_outlinks,
    inlink_column,
)

# The page's columns a run reads (the worker fetches them with its first read of the row).
READS = (PAGE_META, PAGE_CONTENT, DOC_PARSED, DOC_OUTLINKS, DOC_FINGERPRINT, DOC_DIRECTIVES, DOC_SKETCH)


def observe(txn, row: bytes, column: str) -> None:
    url = row.decode("utf-8")
    cols = txn.get_row(REPOSITORY, row, READS)
    meta = decode_page_meta(cols[PAGE_META])
    outcome = fetch_outcome(meta)
    if outcome == "keep":
        return
    if outcome == "document":
        derived = derive(url, meta, cols[PAGE_CONTENT] or b"")
        record, outlinks, directives, sketch = derived.parsed, derived.outlinks, derived.directives, derived.sketch
        fp_bytes = derived.fingerprint.encode() if derived.fingerprint is not None else None
    else:
        record, outlinks, fp_bytes, directives, sketch = None, [], None, None, None

    _write_if_changed(txn, row, DOC_PARSED, cols[DOC_PARSED], record)
    # Before the fingerprint's notification runs the cluster observer, which reads it.
    _write_if_changed(txn, row, DOC_SKETCH, cols[DOC_SKETCH], sketch)
    _write_if_changed(txn, row, DOC_FINGERPRINT, cols[DOC_FINGERPRINT], fp_bytes)
    _write_if_changed(txn, row, DOC_DIRECTIVES, cols[DOC_DIRECTIVES], directives)
    old_links = {t: a for t, a in decode_outlinks(cols[DOC_OUTLINKS])}
    new_links = {t: a for t, a in outlinks}
    if old_links != new_links:
        _write_if_changed(txn, row, DOC_OUTLINKS, cols[DOC_OUTLINKS], encode_outlinks(outlinks))
        invert_links(txn, url, old_links, new_links)


def invert_links(txn, source: str, old: dict[str, str], new: dict[str, str]) -> None:
    """Update ``inlinks[target] in:<source>`` for every target whose anchor text changed."""
    column = inlink_column(source)
    for target in sorted(old.keys() | new.keys()):
        if old.get(target) == new.get(target):
            continue
        if target in new:
            txn.set(INLINKS, target, column, new[target])
        else:
            txn.delete(INLINKS, target, column)
        txn.notify(INLINKS, target, INLINKS_NOTIFY)


def _write_if_changed(txn, row: bytes, column: str, old: bytes | None, new: bytes | None) -> None:
    if old == new:
        return
    if new is None:
        txn.delete(REPOSITORY, row, column)
    else:
        txn.set(REPOSITORY, row, column, new)
