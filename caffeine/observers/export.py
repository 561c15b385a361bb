"""The export observer: canonical documents go into the inverted index, others come out.

Layer: observers. Observes ``repository/cluster:state`` (strong), and ``repository/doc:anchors``
(strong) as a second observer with the same code: a page is exported again when its incoming
anchor text changes, since the anchor text is one of its indexed fields.

Where the index lives and how it is written (docs/INDEXING.md): the ``postings`` serving table
holds one row per term and one cell per document (``p:<url>``), ``impacts`` the same postings
in impact order (``i:<level><url>``, ``caffeine.index.impacts``), ``docstats`` one row per
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

import base64
import functools
import hashlib

from caffeine.index import encode_posting
from caffeine.index.documents import DocumentIndex, docstats_of, document_index
from caffeine.index.impacts import impact_qualifier
from caffeine.index.schema import (
    CLUSTER_STATE,
    DOC_ANCHORS,
    DOC_PARSED,
    DOCSTATS,
    EXPORT_STATE,
    EXPORTED_STATS,
    IMPACTS,
    IMPACTS_FAMILY,
    POSTING_PREFIX,
    POSTINGS,
    REPOSITORY,
    S_DONE,
    decode_anchors,
    decode_cluster_state,
    decode_document,
    decode_export_state,
    decode_int,
    encode_export_state,
    encode_int,
    is_canonical,
)
from caffeine.observers.serving_tables import serving_table
from caffeine.percolator.serving import TOMBSTONE


def plan_export(url: str, canonical_doc: dict | None, fingerprint: str | None, previous: dict | None, done_seq: int, seq: int,
                anchors: list | None = None):
    """(new export:state, postings rows, impacts rows, docstats cells) for one run (pure).

    ``canonical_doc`` is the doc:parsed record if the page is canonical now, else None;
    ``anchors`` its ``doc:anchors`` record (``caffeine.index.anchor_record``), if any.
    """
    previous = previous or {"seq": 0, "terms": [], "removed": []}
    index = _document_index(url, canonical_doc, anchors)
    terms = index.terms if index is not None else {}
    carried = set(previous["terms"])
    unfinished = done_seq < previous["seq"]  # that run may not have written its tombstones
    if unfinished:
        carried |= set(previous["removed"])
    removed = sorted(carried - terms.keys())
    names = sorted(terms)
    levels = _levels(index, names)
    # The impacts cells this run leaves behind: every (term, level) the previous run wrote
    # that this one does not write again (a term gone, or its level changed).
    live = set(zip(names, levels))
    stale = set(zip(previous["terms"], previous.get("levels", ()))) - live
    if unfinished:
        stale |= {tuple(pair) for pair in previous.get("stale", ())}
    encoded = {term: encode_posting(terms[term]) for term in names}
    digests = [posting_digest(encoded[term]) for term in names]
    state = {"seq": seq, "terms": names, "levels": levels, "digests": encode_digests(digests), "removed": removed,
             "stale": [list(pair) for pair in sorted(stale - live)]}
    # What the index holds already: the previous run's postings, if its writes all landed
    # (s:done reached its seq). A posting whose value is the same is not written again; its
    # impacts cell neither, if its level is the same too. A popular page re-exported because
    # one linking page changed then writes the few postings that page's anchor text changed.
    same_postings: set[str] = set()
    same_impacts: set[str] = set()
    held_digests = decode_digests(previous.get("digests"))
    if not unfinished and len(held_digests) == len(previous["terms"]) == len(previous.get("levels", ())):
        held = {term: (digest, level) for term, digest, level
                in zip(previous["terms"], held_digests, previous.get("levels", ()))}
        for term, digest, level in zip(names, digests, levels):
            had = held.get(term)
            if had is not None and had[0] == digest:
                same_postings.add(term)
                if had[1] == level:
                    same_impacts.add(term)
    rows, impact_rows, stats = index_writes(url, canonical_doc, fingerprint, state, index, encoded=encoded,
                                            same_postings=same_postings, same_impacts=same_impacts)
    return state, rows, impact_rows, stats


DIGEST_BYTES = 6


def posting_digest(encoded: bytes) -> bytes:
    """A 48-bit digest of an encoded posting: what export:state records of each posting it
    wrote, to tell a later run which postings it need not write again."""
    return hashlib.blake2b(encoded, digest_size=DIGEST_BYTES).digest()


def encode_digests(digests: list[bytes]) -> str:
    """export:state's ``digests``: the terms' digests in order, as one base64 string (8
    characters a term: a popular page has thousands)."""
    return base64.b64encode(b"".join(digests)).decode("ascii")


def decode_digests(value: str | None) -> list[bytes]:
    """``encode_digests``' list; empty for a state recorded before digests (or a malformed one:
    the run then writes every posting)."""
    try:
        raw = base64.b64decode(value or "", validate=True)
    except (ValueError, TypeError):
        return []
    if len(raw) % DIGEST_BYTES:
        return []
    return [raw[i:i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES)]


def index_writes(url: str, canonical_doc: dict | None, fingerprint: str | None, state: dict,
                 index: DocumentIndex | None, *, encoded: dict[str, bytes] | None = None,
                 same_postings: set[str] = frozenset(), same_impacts: set[str] = frozenset()):
    """(postings rows, impacts rows, docstats cells) that carry export:state ``state`` into the
    index (pure).

    Only the terms ``state`` records are written: postings for those the document has,
    tombstones for the others and for ``state["removed"]``. So a redo over a document that
    changed since its state was recorded never writes a term that no later run would know to
    remove. Impacts likewise: each recorded term's posting at its recorded level, tombstones
    at the recorded stale (term, level) pairs. ``index``: the document's ``_document_index``
    (None when it is not canonical), ``encoded`` its postings encoded, if the caller has them.
    ``same_postings``/``same_impacts``: terms whose posting (and impacts cell) the index
    already holds with the same value (and level), left out.
    """
    terms = index.terms if index is not None else {}
    column = POSTING_PREFIX + url
    encoded = encoded or {}
    values = {term: (encoded.get(term) or encode_posting(terms[term])) if term in terms else TOMBSTONE
              for term in state["terms"]}
    rows = {term: {column: value} for term, value in values.items() if term not in same_postings}
    rows.update({term: {column: TOMBSTONE} for term in state["removed"]})
    impact_rows: dict[str, dict[str, bytes]] = {}
    # A page's terms share a few levels: each level's column is made once.
    impact_column = functools.cache(lambda level: f"{IMPACTS_FAMILY}:{impact_qualifier(level, url)}")
    for term, level in state.get("stale", ()):
        impact_rows.setdefault(term, {})[impact_column(level)] = TOMBSTONE
    for term, level in zip(state["terms"], state.get("levels", ())):
        if term not in same_impacts:
            impact_rows.setdefault(term, {})[impact_column(level)] = values[term]
    if index is not None:
        stats = docstats_of(canonical_doc, fingerprint, index.lengths, index.votes)
    else:
        stats = dict.fromkeys(EXPORTED_STATS, TOMBSTONE)
    stats[S_DONE] = encode_int(state["seq"])
    return rows, impact_rows, stats


def _levels(index: DocumentIndex | None, names: list[str]) -> list[int]:
    """The impact level (``caffeine.index.impacts``) of each of ``names``' postings."""
    if index is None:
        return []
    return index.impact_levels(names)


# The page's columns a run reads (the worker fetches them with its first read of the row).
READS = (CLUSTER_STATE, DOC_PARSED, EXPORT_STATE, DOC_ANCHORS)


def _document_index(url: str, canonical_doc: dict | None, anchors: list | None) -> DocumentIndex | None:
    """What the run indexes (``document_index``: each field tokenized once for the postings,
    the impact levels and the docstats), or None when the page is not canonical."""
    if not canonical_doc:
        return None
    return document_index(url, canonical_doc, anchors)


# Changes whenever what an export writes for the same inputs changes (the posting encoding,
# the fields indexed), so that unchanged inputs are re-exported once after such a change.
EXPORT_FORMAT = b"fields-1 impacts-3 grid-2"


def inputs_digest(cluster_state: bytes | None, parsed: bytes | None, anchors: bytes | None) -> str:
    """A digest of everything an export's writes depend on (pure): the page's cluster state,
    its document if it is canonical, its anchor text, and ``EXPORT_FORMAT``."""
    canonical = is_canonical(cluster_state)
    digest = hashlib.blake2b(digest_size=16)
    for part in (EXPORT_FORMAT, cluster_state or b"", parsed if canonical and parsed else b"", anchors or b""):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()


def up_to_date(previous: dict | None, inputs: str, done_seq: int) -> bool:
    """Does the index already hold exactly what a run over ``inputs`` would write? Yes when
    the last run had the same inputs and its writes landed (``s:done`` reached its seq)."""
    return previous is not None and previous.get("inputs") == inputs and done_seq >= previous["seq"]


def planned_here(previous: dict | None, inputs: str, start_ts: int) -> bool:
    """Did an earlier run in this same transaction (an inline run: both export observers
    run inline after the cluster observer) already plan the writes of ``inputs``? Its
    writes are waiting for the commit, so ``s:done`` cannot show them yet."""
    return previous is not None and previous["seq"] == start_ts and previous.get("inputs") == inputs


def _read(txn, row: bytes):
    """(canonical doc or None, fingerprint, export:state or None, s:done, anchors, inputs
    digest) of a page."""
    cols = txn.get_row(REPOSITORY, row, READS)
    anchors = decode_anchors(cols[DOC_ANCHORS])
    state = decode_cluster_state(cols[CLUSTER_STATE])
    canonical_doc = decode_document(cols[DOC_PARSED]) if state.canonical else None
    previous = decode_export_state(cols[EXPORT_STATE])
    done = 0
    if canonical_doc or previous:
        done = decode_int(serving_table(txn.cluster, DOCSTATS).get(row, [S_DONE]).get(S_DONE))
    inputs = inputs_digest(cols[CLUSTER_STATE], cols[DOC_PARSED], cols[DOC_ANCHORS])
    return canonical_doc, state.fingerprint, previous, done, anchors, inputs


def _write_after_commit(txn, row: bytes, rows: dict, impact_rows: dict, stats: dict, seq: int) -> None:
    postings_table = serving_table(txn.cluster, POSTINGS)
    impacts = serving_table(txn.cluster, IMPACTS)
    docstats = serving_table(txn.cluster, DOCSTATS)

    def write_index():
        # Postings and impacts first, then docstats with s:done: "done" is only claimed once
        # both are in.
        postings_table.put(rows, ts=seq)
        impacts.put(impact_rows, ts=seq)
        docstats.put({row: stats}, ts=seq)

    txn.on_commit(write_index)


def observe(txn, row: bytes, column: str) -> None:
    url = row.decode("utf-8")
    canonical_doc, fp, previous, done, anchors, inputs = _read(txn, row)
    if canonical_doc is None and previous is None:
        return  # never exported, nothing to export
    if up_to_date(previous, inputs, done) or planned_here(previous, inputs, txn.start_ts):
        # Both export observers see most changes (a new document's cluster state and anchor
        # text are written together): the second run has nothing to add.
        return
    seq = txn.start_ts
    new_state, rows, impact_rows, stats = plan_export(url, canonical_doc, fp, previous, done, seq, anchors)
    new_state["inputs"] = inputs
    txn.set(REPOSITORY, row, EXPORT_STATE, encode_export_state(new_state))
    _write_after_commit(txn, row, rows, impact_rows, stats, seq)


def redo_writes(url: str, canonical_doc: dict | None, fingerprint: str | None, state: dict | None, done_seq: int,
                anchors: list | None, inputs: str):
    """(postings rows, impacts rows, docstats cells) of ``redo`` (pure), or None when the
    recorded run's writes landed (``s:done`` at its seq).

    A redo writes the page as it is now. When its ``inputs`` differ from the recorded run's
    (the page changed since; that change's own run is on its way), those writes are not the
    postings the recorded digests describe, so the redo does not claim ``s:done``: the next
    run then counts the recorded one unfinished and writes every posting again."""
    if state is None or done_seq >= state["seq"]:
        return None
    rows, impact_rows, stats = index_writes(url, canonical_doc, fingerprint, state,
                                            _document_index(url, canonical_doc, anchors))
    if state.get("inputs") != inputs:
        stats.pop(S_DONE, None)
    return rows, impact_rows, stats


def redo(txn, row: bytes, column: str) -> None:
    """The committed run's index writes again, at its sequence number, unless its s:done
    shows they landed (the worker calls this when that run's notification outlived it)."""
    canonical_doc, fp, state, done, anchors, inputs = _read(txn, row)
    writes = redo_writes(row.decode("utf-8"), canonical_doc, fp, state, done, anchors, inputs)
    if writes is not None:
        _write_after_commit(txn, row, *writes, state["seq"])
