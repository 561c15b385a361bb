"""The export observer: canonical documents go into the inverted index, others come out.

Layer: application. Observes ``repository/cluster:state`` (strong).

Where the index lives and how it is written (docs/INDEXING.md): the ``postings`` serving table
holds one row per term and one cell per document (``p:<url>``), ``docstats`` one row per
document. They are written with idempotent timestamped puts *after* this run's transaction
committed (``txn.on_commit``), in one round trip, at sequence number = the run's start_ts:

- different documents write different cells, so a popular term is no conflict hot spot and
  needs no lock at all;
- a replay rewrites the same cells; an older run's late writes land below newer ones;
- the transaction itself only records ``export:state`` = {seq, terms, removed}: what this run
  is about to write. Runs for one page conflict on it, so they are serialized; a run whose
  post-commit writes never completed (a crash) left ``docstats s:done`` behind its seq, and
  the next run tombstones that run's removals again (``removed`` is carried until done);
- writes that fail after the commit (or a worker killed then) leave the notification in place,
  and the worker calls ``redo``, which writes that run's recorded state again at its seq.
"""

from __future__ import annotations

import json

from caffeine.index import encode_posting, postings, tokenize
from caffeine.observers.schema import (
    CLUSTER_STATE,
    DOC_PARSED,
    DOCSTATS,
    DOCSTATS_FAMILY,
    EXPORT_STATE,
    POSTINGS,
    POSTINGS_FAMILY,
    REPOSITORY,
)
from caffeine.percolator.serving import TOMBSTONE


def plan_export(url: str, canonical_doc: dict | None, fingerprint: str | None, previous: dict | None, done_seq: int, seq: int):
    """(new export:state, postings rows, docstats cells) for one run (pure).

    ``canonical_doc`` is the doc:parsed record if the page is canonical now, else None.
    """
    previous = previous or {"seq": 0, "terms": [], "removed": []}
    terms = _terms(canonical_doc)
    carried = set(previous["terms"])
    if done_seq < previous["seq"]:
        carried |= set(previous["removed"])  # that run may not have written its tombstones
    removed = sorted(carried - terms.keys())
    state = {"seq": seq, "terms": sorted(terms), "removed": removed}
    rows, stats = index_writes(url, canonical_doc, fingerprint, state, terms)
    return state, rows, stats


def index_writes(url: str, canonical_doc: dict | None, fingerprint: str | None, state: dict,
                 terms: dict | None = None):
    """(postings rows, docstats cells) that carry export:state ``state`` into the index (pure).

    Only the terms ``state`` records are written: postings for those the document has,
    tombstones for the others and for ``state["removed"]``. So a redo over a document that
    changed since its state was recorded never writes a term that no later run would know to
    remove. ``terms``: the document's postings, when the caller has them already.
    """
    terms = _terms(canonical_doc) if terms is None else terms
    column = f"{POSTINGS_FAMILY}:{url}"
    rows = {term: {column: encode_posting(terms[term]) if term in terms else TOMBSTONE} for term in state["terms"]}
    rows.update({term: {column: TOMBSTONE} for term in state["removed"]})
    if canonical_doc:
        stats = {
            "s:length": str(canonical_doc["length"]),
            "s:title": canonical_doc.get("title") or "",
            "s:fingerprint": fingerprint or "",
        }
    else:
        stats = {"s:length": TOMBSTONE, "s:title": TOMBSTONE, "s:fingerprint": TOMBSTONE}
    stats["s:done"] = str(state["seq"])
    return rows, stats


# The page's columns a run reads (the worker fetches them with its first read of the row).
READS = (CLUSTER_STATE, DOC_PARSED, EXPORT_STATE)


def _terms(canonical_doc: dict | None) -> dict:
    return postings(tokenize(canonical_doc["text"])) if canonical_doc else {}


def _read(txn, row: bytes):
    """(canonical doc or None, fingerprint, export:state or None, s:done) of a page."""
    cols = txn.get_row(REPOSITORY, row, READS)
    state = (cols[CLUSTER_STATE] or b"0 -").decode()
    flag, _, fp = state.partition(" ")
    canonical_doc = json.loads(cols[DOC_PARSED]) if flag == "1" and cols[DOC_PARSED] else None
    previous = json.loads(cols[EXPORT_STATE]) if cols[EXPORT_STATE] else None
    done = 0
    if canonical_doc or previous:
        done = int(txn.cluster.serving(DOCSTATS, [DOCSTATS_FAMILY]).get(row, ["s:done"]).get("s:done") or 0)
    return canonical_doc, fp, previous, done


def _write_after_commit(txn, row: bytes, rows: dict, stats: dict, seq: int) -> None:
    postings_table = txn.cluster.serving(POSTINGS, [POSTINGS_FAMILY])
    docstats = txn.cluster.serving(DOCSTATS, [DOCSTATS_FAMILY])

    def write_index():
        # Postings first, then docstats with s:done: "done" is only claimed once the
        # postings are in.
        postings_table.put(rows, ts=seq)
        docstats.put({row: stats}, ts=seq)

    txn.on_commit(write_index)


def observe(txn, row: bytes, column: str) -> None:
    url = row.decode("utf-8")
    canonical_doc, fp, previous, done = _read(txn, row)
    if canonical_doc is None and previous is None:
        return  # never exported, nothing to export
    seq = txn.start_ts
    new_state, rows, stats = plan_export(url, canonical_doc, fp, previous, done, seq)
    txn.set(REPOSITORY, row, EXPORT_STATE, json.dumps(new_state, ensure_ascii=False))
    _write_after_commit(txn, row, rows, stats, seq)


def redo(txn, row: bytes, column: str) -> None:
    """The committed run's index writes again, at its sequence number, unless its s:done
    shows they landed (the worker calls this when that run's notification outlived it)."""
    canonical_doc, fp, state, done = _read(txn, row)
    if state is None or done >= state["seq"]:
        return
    rows, stats = index_writes(row.decode("utf-8"), canonical_doc, fp, state)
    _write_after_commit(txn, row, rows, stats, state["seq"])
