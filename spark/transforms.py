"""The batch job's logic: pure functions over Python objects, and their composition over RDDs.

Layer: spark. Pure. Imports ``caffeine.index`` only: the observers' pure
helpers (``caffeine.index.documents``: ``fetch_outcome``, ``derive``, ``anchors_value``,
``document_index``, ``docstats_cells``) and the data contract (``caffeine.index.schema``: column names and value
codecs), so batch and incremental derive and encode every value with the same code; no I/O,
no HBase, no SparkSession (``build_index`` takes an RDD and returns RDDs).
``spark.hbase_io`` feeds the input and writes the output.

The rules are docs/INDEXING.md's, applied to the whole repository at once:

* a page's *effective version* is its newest ``page:meta`` whose fetch outcome is not "keep"
  (5xx, timeouts and robots leave the last good version in place); a "document" outcome
  (2xx HTML) makes a ``Page`` (``derive``), "gone" (404/410, non-HTML) none. A page that
  says ``noindex`` or is a redirect stub is no document (no fingerprint, no cluster, not
  indexed), but its links count unless it says ``nofollow``;
* link inversion: every page's outlinks (``outlinks_record``: deduplicated, no
  self-links) give ``inlinks[target] in:<source> = anchor``; a page's inlink count is the
  number of distinct documents linking to it;
* clusters: documents grouped by fingerprint (exact clusters), each member with its inlink
  count and its declared canonical (``declares:<url>``); each exact cluster with a sketch
  (``caffeine.index.neardup``) enters its LSH bands (band rows), the pairs that share a band
  and are near (``is_near``) are linked (``near:<fp>`` on both rows), and the connected
  components of those links are the near-duplicate clusters; the canonical is elected over
  all the pages of one with ``elect_canonical`` and written on every exact cluster of it
  (``canonical-url``); ``cluster:state`` is "1 <fp>" for the canonical, "0 <fp>" for the
  others;
* anchor text: every document's ``doc:anchors`` is ``anchors_value`` of its ``in:*`` cells
  (the inlinks observer's value; ``[]`` when nothing links to it);
* the inverted index: canonical documents only, each one's ``document_index`` (the export
  observer's); ``postings[term] p:<url>`` is ``encode_posting`` of its postings (body,
  title, anchor text, URL words); ``impacts[term] i:<impact_qualifier(level, url)>`` is the
  same encoded posting, at the level the document's lengths and votes give it (the export
  observer's impacts row); ``docstats[url]`` has
  ``docstats_cells`` (length, title, fingerprint, field lengths, votes); every document
  (canonical or not) has its ``s:inlinks``, as the cluster observer's recounts write it for
  pages in a cluster.

Outputs are *logical tables*: ``(row, {column: bytes})`` with the incremental tables' row keys
and column names, so ``spark.verify`` compares them cell by cell:

    documents  url    -> doc:parsed, doc:outlinks (absent when no links), doc:fingerprint, doc:sketch,
                         cluster:state, doc:anchors (documents), doc:directives (absent
                         when the page says nothing to crawlers)
    inlinks    target -> in:<source> = anchor text
    dups       fp     -> member:<url> = inlinks (decimal), declares:<url> = declared canonical,
                         canonical-url, sketch, near:<fp> = shared/total shingles
    bands      ~key   -> members (the fingerprints in one LSH band, encode_band; in dups)
    postings   term   -> p:<url> = encoded posting
    impacts    term   -> i:<impact qualifier: level, url> = encoded posting
    docstats   url    -> s:length, s:title (absent when empty), s:fingerprint, s:fields,
                         s:votes (canonical documents), s:inlinks (documents; absent when 0)
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

from caffeine.index import encode_posting, normalize_url
from caffeine.index.documents import anchors_value, derive, docstats_cells, document_index, fetch_outcome
from caffeine.index.impacts import impact_qualifier
from caffeine.index.schema import (
    DOC_SKETCH,
    CANONICAL_URL,
    CLUSTER_STATE,
    DOC_ANCHORS,
    DOC_DIRECTIVES,
    DOC_FINGERPRINT,
    DOC_OUTLINKS,
    DOC_PARSED,
    EXPORTED_STATS,
    IMPACTS_FAMILY,
    NO_CLUSTER,
    POSTING_PREFIX,
    S_INLINKS,
    decode_anchors,
    decode_canonical_url,
    decode_directives,
    decode_document,
    decode_members,
    encode_cluster_state,
    encode_int,
    encode_outlinks,
    inlink_column,
    is_canonical,
)
from spark.clusters import cluster_tables

__all__ = [
    "LOGICAL_TABLES",
    "DOCUMENT_COLUMNS",
    "DOCSTATS_COLUMNS",
    "Document",
    "BatchResult",
    "split_points",
    "key_ranges",
    "effective_version",
    "page_document",
    "link_pairs",
    "member_states",
    "document_row",
    "index_cells",
    "cells_with_prefix",
    "docstats_row",
    "new_cells",
    "add_cell",
    "merge_cells",
    "build_index",
]

LOGICAL_TABLES = ("documents", "inlinks", "dups", "postings", "impacts", "docstats", "bands")
# The columns of the two logical tables that are not whole rows of their incremental table:
# what ``spark.verify`` reads of ``repository`` and ``docstats`` (s:done has no batch side).
DOCUMENT_COLUMNS = (DOC_PARSED, DOC_OUTLINKS, DOC_FINGERPRINT, CLUSTER_STATE, DOC_ANCHORS, DOC_DIRECTIVES, DOC_SKETCH)
DOCSTATS_COLUMNS = (*EXPORTED_STATS, S_INLINKS)
IMPACT_PREFIX = IMPACTS_FAMILY + ":"

NO_ANCHORS = anchors_value({})  # the doc:anchors value of a page nothing links to

Cells = dict  # {column: bytes}


class Document(NamedTuple):
    """One fetched HTML page in this snapshot, with what the document observer derives: a
    document of the index when ``fingerprint`` is set (``is_document``)."""

    url: str
    parsed: bytes | None       # the doc:parsed value (JSON, sort_keys), byte for byte; None: no document
    outlinks: list             # [[target, anchor], ...] as outlinks_record returns it
    fingerprint: str | None
    record: dict | None        # decode_document(parsed): title, text, canonical, length
    directives: bytes | None = None  # the doc:directives value, when the page says anything
    sketch: bytes | None = None      # the doc:sketch value (documents of 3 words or more)

    @property
    def is_document(self) -> bool:
        return self.fingerprint is not None

    @property
    def declared(self) -> str | None:
        """The canonical URL the page declares (``<link rel="canonical">``), or None."""
        return decode_directives(self.directives).get("canonical")


class BatchResult(NamedTuple):
    """The job's outputs, one RDD of ``(row: str, {column: bytes})`` per logical table."""

    documents: object
    inlinks: object
    dups: object
    postings: object
    impacts: object
    docstats: object
    bands: object

    def tables(self) -> dict:
        return dict(zip(self._fields, self))

    def tagged(self, context):
        """All of them as one RDD of ``(table, (row, cells))``: one Spark job computes (and
        writes, or collects) everything, sharing the stages the tables have in common."""
        return context.union([rdd.map(_tagger(name)) for name, rdd in self.tables().items()])


def _tagger(name: str):
    return lambda row: (name, row)


# -- key ranges ----------------------------------------------------------------------------

def split_points(sorted_keys: list[bytes], n: int) -> list[bytes]:
    """At most ``n - 1`` distinct boundaries that cut ``sorted_keys`` into ``n`` near-equal runs."""
    if n <= 1 or not sorted_keys:
        return []
    points = []
    for i in range(1, n):
        key = sorted_keys[(i * len(sorted_keys)) // n]
        if key and (not points or key > points[-1]):
            points.append(key)
    return points


def key_ranges(points: list[bytes]) -> list[tuple[bytes, bytes | None]]:
    """``[start, stop)`` ranges covering the whole key space, cut at ``points`` (stop None = end)."""
    bounds = [b"", *points]
    return [(start, bounds[i + 1] if i + 1 < len(bounds) else None) for i, start in enumerate(bounds)]


# -- per page --------------------------------------------------------------------------------

def effective_version(versions: Iterable[tuple[dict | None, bytes | None]]) -> tuple[dict, bytes | None] | None:
    """The newest ``(meta, content)`` whose fetch outcome is not "keep", or None.

    ``versions`` runs newest first and may be lazy (the reader walks back through older
    snapshots only while the outcomes say "keep"): a 5xx after a good fetch keeps the good one,
    exactly as the document observer leaves its last ``doc:*`` values in place.
    """
    for meta, content in versions:
        if fetch_outcome(meta) != "keep":
            return meta, content
    return None


def page_document(url: str, meta: dict | None, content: bytes | None) -> Document | None:
    """The Document a page's effective version makes, or None (gone, not HTML, no version)."""
    if fetch_outcome(meta) != "document":
        return None
    derived = derive(url, meta, content or b"")
    return Document(url, derived.parsed, derived.outlinks, derived.fingerprint, decode_document(derived.parsed),
                    derived.directives, derived.sketch)


def link_pairs(doc: Document) -> list[tuple[str, tuple[str, str]]]:
    """``(target, (source, anchor))`` for every link the document observer would invert."""
    return [(target, (doc.url, anchor)) for target, anchor in doc.outlinks if normalize_url(target) is not None]


def member_states(fp: str, cells: Cells) -> list[tuple[str, str]]:
    """``(url, cluster:state)`` for every member of a ``dups`` row."""
    canonical = decode_canonical_url(cells.get(CANONICAL_URL))
    return [(url, encode_cluster_state(fp, url == canonical)) for url in decode_members(cells)]


def document_row(doc: Document, state: str | None, anchors: bytes = NO_ANCHORS) -> tuple[str, Cells]:
    """The ``repository`` columns the document, cluster and inlinks observers write for a
    page (a page that is no document: only its outlinks and directives)."""
    cells = {}
    if doc.is_document:
        cells = {DOC_PARSED: doc.parsed, DOC_FINGERPRINT: doc.fingerprint.encode(), DOC_ANCHORS: anchors}
        if doc.sketch is not None:
            cells[DOC_SKETCH] = doc.sketch
    outlinks = encode_outlinks(doc.outlinks)
    if outlinks is not None:  # the observer deletes doc:outlinks rather than store an empty list
        cells[DOC_OUTLINKS] = outlinks
    if doc.directives is not None:
        cells[DOC_DIRECTIVES] = doc.directives
    if state is not None and state != NO_CLUSTER:
        cells[CLUSTER_STATE] = state.encode()
    return doc.url, cells


def index_cells(doc: Document, anchors: bytes = NO_ANCHORS) -> list[tuple[str, tuple[str, bytes]]]:
    """``(term, (column, encoded posting))`` for every term of a canonical document, twice:
    its ``postings`` cell (``p:<url>``) and its ``impacts`` cell (``i:<impact qualifier>``,
    the level computed from the posting's field counts and the document's lengths and votes,
    as the export observer does). The two tables' cells start with different prefixes, so
    ``build_index`` shuffles them together and splits them by prefix."""
    index = document_index(doc.url, doc.record, decode_anchors(anchors))
    posting_column = POSTING_PREFIX + doc.url
    cells = []
    for (term, p), level in zip(index.terms.items(), index.impact_levels(index.terms)):
        value = encode_posting(p)
        cells.append((term, (posting_column, value)))
        cells.append((term, (IMPACT_PREFIX + impact_qualifier(level, doc.url), value)))
    return cells


def cells_with_prefix(prefix: str) -> Callable[[Cells], Cells]:
    """The cells of a row whose column starts with ``prefix`` (one table of ``index_cells``)."""
    return lambda cells: {column: value for column, value in cells.items() if column.startswith(prefix)}


def docstats_row(url: str, doc: Document | None, inlinks: int | None, anchors: bytes = NO_ANCHORS) -> tuple[str, Cells]:
    """``docstats`` cells of a document: the export's (``doc`` given when it is canonical) and
    its inlink count (left out when 0).

    Empty values are left out: the serving tables store "" as a tombstone, so an empty title
    reads as absent on the incremental side too.
    """
    cells = {}
    if doc is not None:
        exported = docstats_cells(url, doc.record, doc.fingerprint, decode_anchors(anchors))
        cells = {column: value.encode() for column, value in exported.items() if value}
    if inlinks:
        cells[S_INLINKS] = encode_int(inlinks).encode()
    return url, cells


def new_cells(cell: tuple[str, bytes]) -> Cells:
    return {cell[0]: cell[1]}


def add_cell(cells: Cells, cell: tuple[str, bytes]) -> Cells:
    """Spark's combiners may update their first argument in place (no copy per element)."""
    cells[cell[0]] = cell[1]
    return cells


def merge_cells(a: Cells, b: Cells) -> Cells:
    a.update(b)
    return a


# -- the whole job over RDDs -----------------------------------------------------------------

def build_index(pages, num_partitions: int | None = None, *, persist: Callable | None = None) -> BatchResult:
    """All six logical tables from an RDD of ``(url, meta, content)`` effective versions.

    ``pages`` holds each page's effective version (``effective_version``) or is the raw
    newest version of pages that never erred; pages without a document drop out here.
    ``persist`` (e.g. ``lambda rdd: rdd.cache()``) is applied to the RDDs that several
    outputs reuse (documents, inlinks, dups, placed documents, the terms' postings and
    impacts cells), so a job that writes all six outputs reads and parses the repository once,
    and indexes each canonical document (``document_index``) once.
    """
    n = num_partitions
    parsed_pages = pages.map(lambda p: page_document(*p)).filter(lambda d: d is not None)
    if persist is not None:
        parsed_pages = persist(parsed_pages)
    docs = parsed_pages.filter(lambda d: d.is_document)
    by_url = docs.map(lambda d: (d.url, d))

    keep = persist or (lambda rdd: rdd)
    links = parsed_pages.flatMap(link_pairs).mapValues(lambda sa: (inlink_column(sa[0]), sa[1].encode()))
    inlinks = keep(links.combineByKey(new_cells, add_cell, merge_cells, n))
    # target -> (inlink count, doc:anchors value)
    counts = inlinks.mapValues(lambda cells: (len(cells), anchors_value(cells)))

    # url -> (doc, inlinks, anchors)
    doc_counts = by_url.leftOuterJoin(counts, n).mapValues(
        lambda dc: (dc[0], dc[1][0], dc[1][1]) if dc[1] else (dc[0], 0, NO_ANCHORS))
    members = doc_counts.map(lambda kv: (kv[1][0].fingerprint, (kv[0], kv[1][1], kv[1][0].declared)))
    dups, bands = cluster_tables(docs, members.groupByKey(n).mapValues(list), n, keep)
    states = dups.flatMap(lambda row: member_states(*row))

    # url -> ((doc, inlinks, anchors), cluster:state): every document is in exactly one cluster.
    placed = keep(doc_counts.join(states, n))
    # Pages that are no document (noindex, redirect stubs): their links and directives.
    others = parsed_pages.filter(lambda d: not d.is_document).map(lambda d: document_row(d, None)) \
        .filter(lambda row: row[1])
    documents = placed.map(lambda kv: document_row(kv[1][0][0], kv[1][1], kv[1][0][2])).union(others)
    canonical = placed.filter(lambda kv: is_canonical(kv[1][1])).map(lambda kv: (kv[1][0][0], kv[1][0][2]))
    # term -> its postings and impacts cells: one shuffle for both tables.
    index_rows = keep(canonical.flatMap(lambda da: index_cells(*da)).combineByKey(new_cells, add_cell, merge_cells, n))
    postings_rows = index_rows.mapValues(cells_with_prefix(POSTING_PREFIX))
    impacts_rows = index_rows.mapValues(cells_with_prefix(IMPACT_PREFIX))
    docstats = placed.map(
        lambda kv: docstats_row(kv[0], kv[1][0][0] if is_canonical(kv[1][1]) else None, kv[1][0][1], kv[1][0][2])
    ).filter(lambda row: row[1])
    return BatchResult(documents, inlinks, dups, postings_rows, impacts_rows, docstats, bands)
