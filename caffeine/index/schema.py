"""The indexing application's data contract: table and column names, and their values' codecs.

Layer: index. Pure: standard library only; no I/O, no HBase, no caffeine.percolator.
docs/INDEXING.md describes the contract in prose; this module is it in code. The crawler, the
observers (incremental), the Spark job (batch), the search API and the benchmarks all take
names from here and encode or decode a stored value only through the functions here, so the
writers and the readers of a cell cannot drift apart.

    names        REPOSITORY, DOC_PARSED, CLUSTER_STATE, S_LENGTH, ... (tables, columns)
    keys         decode_key (a row key or qualifier read back: URL, term, fingerprint)
    page:meta    encode_page_meta / decode_page_meta
    doc:parsed   encode_document / decode_document
    doc:outlinks encode_outlinks / decode_outlinks
    doc:anchors  encode_anchors / decode_anchors
    doc:directives encode_directives / decode_directives
    doc:fingerprint                decode_fingerprint
    cluster:state  ClusterState, encode_cluster_state / decode_cluster_state, is_canonical
    export:state encode_export_state / decode_export_state
    docstats     DocStats, encode_docstats / decode_docstats (s:length, s:title,
                 s:fingerprint, s:fields, s:votes, and s:inlinks, s:done when read)
    decimals     encode_int / decode_int (s:inlinks, s:done, dups member:<url>)
    inlinks      decode_inlinks (in:<source> = anchor)
    dups         decode_members (member:<url> = inlinks), decode_declared (declares:<url> =
                 declared canonical), decode_canonical_url, near_column, encode_near /
                 decode_near (near:<fp> = shared/total shingles)
    dups ~bands  encode_band / decode_band (members = the fingerprints in one LSH band)
    postings     posting_column / posting_cells (p:<url> = encoded posting)
    regions      split_points (where each table is cut into regions: SPLIT_POLICIES)

Invariants: an encoder's output is the exact value stored (byte for byte what the writers
have always written: JSON key order, separators and ``ensure_ascii`` are part of the
contract, since observers compare stored bytes to decide whether anything changed). A decoder
maps a missing cell and an empty value (a serving table's tombstone, or a cell never
written) to the same documented "absent" answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = [
    # tables
    "REPOSITORY", "INLINKS", "DUPS", "POSTINGS", "IMPACTS", "DOCSTATS", "PERCOLATOR_TABLES",
    # repository columns
    "PAGE_META", "PAGE_CONTENT", "PAGE_ERROR", "DOC_PARSED", "DOC_OUTLINKS", "DOC_FINGERPRINT", "DOC_SKETCH",
    "DOC_ANCHORS", "DOC_DIRECTIVES", "CLUSTER_STATE", "EXPORT_STATE",
    # inlinks, dups
    "INLINK_PREFIX", "INLINKS_NOTIFY", "MEMBER_PREFIX", "DECLARES_PREFIX", "CANONICAL_URL",
    "NEAR_PREFIX", "SKETCH", "BAND_MEMBERS", "BAND_ROW_PREFIX", "DUPS_BANDS_START",
    # serving tables
    "POSTINGS_FAMILY", "POSTING_PREFIX", "IMPACTS_FAMILY", "DOCSTATS_FAMILY",
    "COUNTED_FAMILIES", "counted_families",
    "S_LENGTH", "S_TITLE", "S_FINGERPRINT", "S_FIELDS", "S_VOTES", "S_IMPACTS", "S_INLINKS", "S_DONE",
    "EXPORTED_STATS",
    # codecs
    "encode_page_meta", "decode_page_meta",
    "encode_document", "decode_document",
    "encode_outlinks", "decode_outlinks",
    "encode_anchors", "decode_anchors",
    "encode_directives", "decode_directives",
    "decode_fingerprint",
    "NO_CLUSTER", "ClusterState", "encode_cluster_state", "decode_cluster_state", "is_canonical",
    "encode_export_state", "decode_export_state",
    "DocStats", "encode_docstats", "decode_docstats",
    "encode_int", "decode_int",
    "decode_key", "decode_inlinks", "decode_members", "decode_declared", "declares_column", "decode_canonical_url",
    "member_column", "near_column", "encode_near", "decode_near", "encode_band", "decode_band",
    "posting_column", "posting_cells",
    "posting_qualifier_cells",
    # regions
    "SPLIT_POLICIES", "split_points",
]

# -- tables ----------------------------------------------------------------------------------

REPOSITORY = "repository"
INLINKS = "inlinks"
DUPS = "dups"
POSTINGS = "postings"      # serving table, family "p"
IMPACTS = "impacts"        # serving table, family "i": the postings in impact order
DOCSTATS = "docstats"      # serving table, family "s"

PERCOLATOR_TABLES = (REPOSITORY, INLINKS, DUPS)

# -- repository columns ----------------------------------------------------------------------

PAGE_META = "page:meta"
PAGE_CONTENT = "page:content"
PAGE_ERROR = "page:error"     # the last transient fetch failure (not observed)
DOC_PARSED = "doc:parsed"
DOC_OUTLINKS = "doc:outlinks"
DOC_FINGERPRINT = "doc:fingerprint"
DOC_SKETCH = "doc:sketch"      # the page's near-duplicate sketch (caffeine.index.neardup.sketch)
DOC_ANCHORS = "doc:anchors"   # the anchor text of links to the page (inlinks observer)
DOC_DIRECTIVES = "doc:directives"  # what the page says to crawlers (robots, meta refresh)
CLUSTER_STATE = "cluster:state"
EXPORT_STATE = "export:state"

# -- inlinks and dups ------------------------------------------------------------------------

INLINK_PREFIX = "in:"       # inlinks[target] in:<source-url> = anchor text
INLINKS_NOTIFY = "in"       # weak notification column on inlinks[target]
MEMBER_PREFIX = "member:"   # dups[fingerprint] member:<url> = inlink count
DECLARES_PREFIX = "declares:"  # dups[fingerprint] declares:<url> = the member's declared canonical URL
CANONICAL_URL = "canonical-url"
NEAR_PREFIX = "near:"       # dups[fingerprint] near:<fp> = "shared/total" shingles of a near-duplicate content
SKETCH = "sketch"           # dups[fingerprint] sketch = its pages' sketch (absent: below 3 words)
BAND_MEMBERS = "members"    # dups[~<band key>] members = the fingerprints in the band (encode_band)
# Near-duplicate candidates, one row per LSH band (caffeine.index.neardup.band_keys), live in
# the dups table under this prefix, after every fingerprint row ("~" sorts after the hex
# digits): a transaction's commit costs calls per table it writes, and a content's first page
# writes its dups row and its bands together. Scans of clusters stop at DUPS_BANDS_START.
BAND_ROW_PREFIX = "~"
DUPS_BANDS_START = BAND_ROW_PREFIX.encode()

# -- serving tables --------------------------------------------------------------------------

POSTINGS_FAMILY = "p"
POSTING_PREFIX = POSTINGS_FAMILY + ":"   # postings[term] p:<url> = encoded posting
IMPACTS_FAMILY = "i"       # impacts[term] i:<level><url> = the same posting (caffeine.index.impacts)
DOCSTATS_FAMILY = "s"

# The serving families whose live cells the store counts per row (``FamilySpec.counted``),
# by table: a term's impacts row then tells its document frequency without being walked (the
# search service's cold path, docs/RANKING.md "Cold queries"). Whatever creates these tables
# asks ``counted_families``.
COUNTED_FAMILIES: dict[str, tuple[str, ...]] = {IMPACTS: (IMPACTS_FAMILY,)}


def counted_families(table: str) -> tuple[str, ...]:
    """The counted families of serving table ``table`` (its logical name), to create it with."""
    return COUNTED_FAMILIES.get(table, ())

S_LENGTH = "s:length"
S_TITLE = "s:title"
S_FINGERPRINT = "s:fingerprint"
S_FIELDS = "s:fields"
S_VOTES = "s:votes"
S_IMPACTS = "s:impacts"   # the format of the document's impacts cells (caffeine.index.impacts.IMPACT_FORMAT)
S_INLINKS = "s:inlinks"   # written by the cluster observer's recounts, not by the export
S_DONE = "s:done"         # the export's bookkeeping: the seq of its last completed writes

# The docstats cells an export writes for a canonical document (and tombstones otherwise),
# in the order it has always written them.
EXPORTED_STATS = (S_LENGTH, S_TITLE, S_FINGERPRINT, S_FIELDS, S_VOTES, S_IMPACTS)


def decode_key(value: bytes) -> str:
    """A row key or column qualifier read back as text (a URL, a term, a fingerprint): UTF-8,
    with any other bytes kept as surrogates, so nothing read is lost or raises."""
    return value.decode("utf-8", "surrogateescape")


def _json_or(value: bytes | str | None, default):
    """``json.loads(value)``, or ``default`` when the cell is missing or empty."""
    return json.loads(value) if value else default


# -- page:meta -------------------------------------------------------------------------------

def encode_page_meta(record: dict) -> str:
    """The ``page:meta`` (and ``page:error``) value of a fetch record: compact JSON, keys
    sorted, so the same fetch always stores the same bytes."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def decode_page_meta(value: bytes | None, default: dict | None = None) -> dict | None:
    """A ``page:meta`` value as stored JSON, or ``default`` when missing or empty.

    Malformed JSON raises ``ValueError`` (readers that must tolerate it catch it).
    """
    return _json_or(value, default)


# -- doc:parsed, doc:outlinks, doc:anchors -------------------------------------------------------

def encode_document(record: dict) -> bytes:
    """The ``doc:parsed`` value of a ``caffeine.index.document_record``: JSON with sorted keys
    and raw (not escaped) non-ASCII, so an unchanged page re-encodes to the same bytes."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False).encode()


def decode_document(value: bytes | None, default: dict | None = None) -> dict | None:
    """The ``doc:parsed`` record (``title``, ``text``, ``canonical``, ``length``), or
    ``default`` when missing or empty. Malformed JSON raises ``ValueError``."""
    return _json_or(value, default)


def encode_directives(record: dict) -> bytes:
    """The ``doc:directives`` value of a ``caffeine.index.documents.PageRules.record()``
    (``robots``: directives, ``refresh``: a meta refresh's target, ``redirect``: whether the
    page is a redirect stub): compact JSON with sorted keys."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()


def decode_directives(value: bytes | None) -> dict:
    """The ``doc:directives`` record; ``{}`` when missing or empty (the page said nothing)."""
    return _json_or(value, {})


def encode_outlinks(outlinks: list) -> bytes | None:
    """The ``doc:outlinks`` value of ``[[target, anchor], ...]``, or None for no links: the
    document observer deletes the cell rather than store an empty list, and the Spark job
    leaves it out, so both sides agree on "no links"."""
    return json.dumps(outlinks, ensure_ascii=False).encode() if outlinks else None


def decode_outlinks(value: bytes | None) -> list:
    """``[[target, anchor], ...]`` of a ``doc:outlinks`` value; ``[]`` when missing or empty.
    Malformed JSON raises ``ValueError``."""
    return _json_or(value, [])


def encode_anchors(record: list) -> bytes:
    """The ``doc:anchors`` value of a ``caffeine.index.anchor_record`` (``[]`` included: a
    page nothing links to stores ``[]``, not a missing cell)."""
    return json.dumps(record, ensure_ascii=False).encode()


def decode_anchors(value: bytes | None) -> list:
    """The anchor record of a ``doc:anchors`` value; ``[]`` when missing or empty.
    Malformed JSON raises ``ValueError``."""
    return _json_or(value, [])


def decode_fingerprint(value: bytes | None) -> str | None:
    """The hex fingerprint of a ``doc:fingerprint`` value; None when missing or empty (the
    page is no document)."""
    return value.decode() if value else None


# -- cluster:state ---------------------------------------------------------------------------

NO_CLUSTER = "0 -"


@dataclass(frozen=True, slots=True)
class ClusterState:
    """A page's ``cluster:state``: the cluster it is in (None: none) and whether it is that
    cluster's canonical (the only pages exported to the index)."""

    fingerprint: str | None = None
    canonical: bool = False


def encode_cluster_state(fingerprint: str | None, canonical: bool) -> str:
    """``"1 <fp>"`` for the canonical of cluster ``fp``, ``"0 <fp>"`` for another member,
    ``NO_CLUSTER`` (``"0 -"``) for a page in no cluster (``fingerprint`` None)."""
    return NO_CLUSTER if fingerprint is None else f"{1 if canonical else 0} {fingerprint}"


def is_canonical(value: bytes | str | None) -> bool:
    """Does a ``cluster:state`` value (stored bytes, or the str the Spark job carries) say
    "canonical"? Works on the raw value, so a caller that only needs this never decodes it."""
    if not value:
        return False
    return value.startswith(b"1 " if isinstance(value, bytes) else "1 ")


def decode_cluster_state(value: bytes | None) -> ClusterState:
    """A ``cluster:state`` value; a missing or empty one is ``ClusterState()`` (no cluster).

    Canonical exactly when the value starts with ``"1 "``; the fingerprint is what follows the
    first space, None for ``"-"``. A value no writer produces (no space at all) reads as no
    cluster: the cluster observer then places the page again, which rewrites the state.
    Invalid UTF-8 raises ``UnicodeDecodeError``.
    """
    if not value:
        return ClusterState()
    _, space, fingerprint = value.decode().partition(" ")
    if not space or fingerprint == "-":
        return ClusterState(None, is_canonical(value))
    return ClusterState(fingerprint, is_canonical(value))


# -- export:state ----------------------------------------------------------------------------

def encode_export_state(state: dict) -> str:
    """The ``export:state`` value of ``{"seq", "terms", "removed", "inputs"}`` (JSON, keys in
    the dict's order, non-ASCII terms kept raw)."""
    return json.dumps(state, ensure_ascii=False)


def decode_export_state(value: bytes | None) -> dict | None:
    """The last export's recorded state, or None when the page was never exported (missing
    or empty cell). Malformed JSON raises ``ValueError``."""
    return _json_or(value, None)


# -- docstats --------------------------------------------------------------------------------

def encode_int(n: int) -> str:
    """A decimal column's value (``s:length``, ``s:votes``, ``s:inlinks``, ``s:done``, dups
    ``member:<url>``): ``str(n)``."""
    return str(n)


def decode_int(value: bytes | None) -> int:
    """A decimal column's value as an int; 0 when missing or empty (a tombstone).
    A non-decimal value raises ``ValueError``."""
    return int(value) if value else 0


@dataclass(frozen=True, slots=True)
class DocStats:
    """One indexed document's ``docstats`` row, as ranking and results need it."""

    length: int                             # body tokens (s:length)
    inlinks: int = 0                        # distinct linking pages (s:inlinks)
    fingerprint: str = ""
    title: str = ""
    done: int = 0                           # s:done: the sequence number of the document's last export
    fields: tuple[int, int, int] = (0, 0, 0)  # title, anchor, url lengths (s:fields)
    votes: int = 0                          # the link prior's input (s:votes)
    impacts: int = 0                        # s:impacts: its impacts cells' format (0: none written)

    @property
    def lengths(self) -> tuple[int, int, int, int]:
        return (self.length, *self.fields)


def encode_docstats(stats: DocStats) -> dict[str, str]:
    """The cells an export writes for a canonical document (``EXPORTED_STATS``, in order):
    ``s:length``, ``s:title`` (may be "", which a serving table stores as a tombstone),
    ``s:fingerprint``, ``s:fields`` (the three lengths, space-separated), ``s:votes`` and
    ``s:impacts`` (the format of the impacts cells the same export writes).
    ``inlinks`` and ``done`` are not written here: they have writers of their own
    (``encode_int`` for ``s:inlinks`` and ``s:done``)."""
    return {
        S_LENGTH: encode_int(stats.length),
        S_TITLE: stats.title,
        S_FINGERPRINT: stats.fingerprint,
        S_FIELDS: " ".join(map(str, stats.fields)),
        S_VOTES: encode_int(stats.votes),
        S_IMPACTS: encode_int(stats.impacts),
    }


def decode_docstats(cells) -> DocStats | None:
    """A ``docstats`` row (``{column: bytes}``) as ``DocStats``, or None when the document is
    not in the index (``s:length`` missing or a tombstone).

    Missing or empty counts read as 0, missing ``s:fields`` as ``(0, 0, 0)``, a missing title
    or fingerprint as "". The title is decoded leniently (invalid UTF-8 replaced: it is only
    shown), the fingerprint strictly. A non-decimal count raises ``ValueError``.
    """
    length = cells.get(S_LENGTH)
    if not length:
        return None
    fields = cells.get(S_FIELDS)
    return DocStats(
        length=int(length),
        inlinks=decode_int(cells.get(S_INLINKS)),
        done=decode_int(cells.get(S_DONE)),
        fingerprint=(cells.get(S_FINGERPRINT) or b"").decode(),
        title=(cells.get(S_TITLE) or b"").decode("utf-8", "replace"),
        fields=tuple(int(x) for x in fields.split()) if fields else (0, 0, 0),
        votes=decode_int(cells.get(S_VOTES)),
        impacts=decode_int(cells.get(S_IMPACTS)),
    )


# -- inlinks, dups and postings rows ----------------------------------------------------------

def inlink_column(source_url: str) -> str:
    """The ``inlinks`` column of a link from ``source_url``: ``in:<source url>``."""
    return INLINK_PREFIX + source_url


def member_column(url: str) -> str:
    """The ``dups`` column of ``url``'s membership in a cluster: ``member:<url>``."""
    return MEMBER_PREFIX + url


def count_inlinks(cells) -> int:
    """How many links an ``inlinks`` row holds: its ``in:<source>`` columns, values unread."""
    return sum(1 for column in cells if column.startswith(INLINK_PREFIX))


def decode_inlinks(cells: dict[str, bytes]) -> dict[str, str]:
    """An ``inlinks`` row's links: ``{source url: anchor text}`` from its ``in:<source>``
    cells (the notification column and any other skipped). Anchors are decoded leniently
    (invalid UTF-8 replaced: they are only shown)."""
    return {column[len(INLINK_PREFIX):]: value.decode("utf-8", "replace")
            for column, value in cells.items() if column.startswith(INLINK_PREFIX)}


def decode_members(cells: dict[str, bytes]) -> dict[str, int]:
    """A ``dups`` row's members: ``{url: inlink count}`` from its ``member:<url>`` cells
    (``canonical-url`` and any other column skipped). A non-decimal count raises ``ValueError``."""
    return {column[len(MEMBER_PREFIX):]: decode_int(value)
            for column, value in cells.items() if column.startswith(MEMBER_PREFIX)}


def declares_column(url: str) -> str:
    """The ``dups`` column of the canonical that member ``url`` declares: ``declares:<url>``."""
    return DECLARES_PREFIX + url


def decode_declared(cells: dict[str, bytes]) -> dict[str, str]:
    """A ``dups`` row's declarations: ``{member url: declared canonical URL}`` from its
    ``declares:<url>`` cells."""
    return {column[len(DECLARES_PREFIX):]: value.decode("utf-8", "surrogateescape")
            for column, value in cells.items() if column.startswith(DECLARES_PREFIX) and value}


def near_column(fingerprint: str) -> str:
    """The ``dups`` column of a near-duplicate edge to cluster ``fingerprint``: ``near:<fp>``."""
    return NEAR_PREFIX + fingerprint


def encode_near(pair: tuple[int, int]) -> str:
    """A ``near:<fp>`` value: ``"shared/total"``, the two contents' shingles in common and
    together (``caffeine.index.neardup.overlap``)."""
    return f"{pair[0]}/{pair[1]}"


def decode_near(cells: dict[str, bytes]) -> dict[str, tuple[int, int]]:
    """A ``dups`` row's near-duplicate edges: ``{fingerprint: (shared, total)}`` from its
    ``near:<fp>`` cells. A malformed value raises ``ValueError``."""
    out = {}
    for column, value in cells.items():
        if column.startswith(NEAR_PREFIX) and value:
            shared, _, total = value.decode().partition("/")
            out[column[len(NEAR_PREFIX):]] = (int(shared), int(total))
    return out


def encode_band(fingerprints) -> str:
    """A band row's ``members`` value: the fingerprints, sorted, one per line."""
    return "\n".join(sorted(fingerprints))


def decode_band(value: bytes | None) -> list[str]:
    """The fingerprints of a band row's ``members`` value; [] when missing or empty."""
    return value.decode().split("\n") if value else []


def decode_canonical_url(value: bytes | None) -> str | None:
    """A ``dups`` row's ``canonical-url`` value; None when missing (no canonical elected)."""
    return value.decode() if value is not None else None


def posting_column(url: str) -> str:
    """The ``postings`` column of ``url``'s posting in a term's row: ``p:<url>``."""
    return POSTING_PREFIX + url


def posting_qualifier_cells(cells: dict[str, bytes]):
    """A ``postings`` row's ``(url, value)`` pairs from its cells keyed by qualifier alone
    (``ServingTable.read_common``'s form): in the postings family, the qualifier is the URL."""
    return cells.items()


def posting_cells(cells: dict[str, bytes]):
    """Yields a ``postings`` row's ``(url, value)`` pairs from its ``p:<url>`` cells, values
    as read (``caffeine.index.decode_posting`` decodes one; an empty one is a tombstone): a
    generator, so a reader building its own map of a wide row builds only that one."""
    for column, value in cells.items():
        if column.startswith(POSTING_PREFIX):
            yield column[len(POSTING_PREFIX):], value


# -- regions ---------------------------------------------------------------------------------
#
# A table of the contract is created as ``Settings.regions_per_table`` regions (one per region
# server in the cluster mode, ``caffeine up --regionservers N``; one, unsplit, standalone), so
# that every region server holds a share of each table from the first write. Where to cut
# follows how the table's row keys spread. The keys are guesses about data not yet written:
# each policy weighs key ranges ("buckets", each starting at a key) by the share of rows it
# expects there, and cuts at the bucket starts nearest to equal shares. `caffeine tables list
# --regions` shows the result; a table that exists keeps the regions it was created with.

SPLIT_POLICIES: dict[str, str] = {
    REPOSITORY: "host",
    INLINKS: "host",
    DOCSTATS: "host",
    DUPS: "fingerprint",
    POSTINGS: "term",
    IMPACTS: "term",
}
"""Each split table's policy (tables not named here, the crawler's and the system's own, stay
one region):

- ``host`` (rows are URLs): a host's rows stay together (its pages are crawled, parsed and
  exported together), hosts are spread by the first character of their name, under
  ``https://`` three times as many as under ``http://``, hosts starting with ``www.`` by the
  character after it and counted as many as all the others; digits (IP addresses) count a
  tenth of a letter. One host is one range: the local test web (``http://127.0.0.1:8800``)
  lands in one region, whatever the number of regions.
- ``fingerprint`` (``dups``: 32 hex digits of a uniform hash, then the ``~`` band rows, hex
  too): equal steps over the first two hex digits, fingerprint rows and band rows taking half
  the table each.
- ``term`` (``postings`` and ``impacts``: lowercase words): by the first character, weighted
  by the rough share of English words starting with each letter (``_TERM_WEIGHTS``), digits
  (numbers, years) about 8% of the terms, other scripts (UTF-8 from byte 0xC2) 3%.
"""

_HOST_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"
# Rough percentages of English dictionary words by first letter.
_TERM_WEIGHTS = {
    "a": 6.0, "b": 5.5, "c": 9.0, "d": 6.0, "e": 4.0, "f": 4.0, "g": 3.2, "h": 3.6, "i": 3.8,
    "j": 0.8, "k": 1.0, "l": 3.2, "m": 5.6, "n": 2.4, "o": 2.8, "p": 8.0, "q": 0.5, "r": 5.6,
    "s": 11.0, "t": 5.4, "u": 2.4, "v": 1.6, "w": 2.4, "x": 0.1, "y": 0.4, "z": 0.3,
}


def _host_buckets() -> list[tuple[bytes, float]]:
    buckets = []
    for scheme, share in (("http://", 1.0), ("https://", 3.0)):
        for c in _HOST_CHARS:
            weight = share * (0.1 if c.isdigit() else 1.0)
            buckets.append((f"{scheme}{c}".encode(), weight))
            if c == "w":
                # "www." hosts sort between "w" and "x": one bucket per character after it.
                buckets.extend((f"{scheme}www.{d}".encode(), share * (0.1 if d.isdigit() else 1.0))
                               for d in _HOST_CHARS)
    return buckets


def _fingerprint_buckets() -> list[tuple[bytes, float]]:
    steps = [f"{i:02x}" for i in range(256)]
    return [(s.encode(), 1.0) for s in steps] + [(f"{BAND_ROW_PREFIX}{s}".encode(), 1.0) for s in steps]


def _term_buckets() -> list[tuple[bytes, float]]:
    return ([(str(d).encode(), 0.8) for d in range(10)] + [(b"_", 0.1)]
            + [(c.encode(), w) for c, w in _TERM_WEIGHTS.items()] + [(b"\xc2", 3.0)])


_BUCKETS = {"host": _host_buckets, "fingerprint": _fingerprint_buckets, "term": _term_buckets}


def split_points(table: str, regions: int) -> tuple[bytes, ...]:
    """The row keys at which ``table`` (its logical name) is cut into ``regions`` regions by
    its policy (``SPLIT_POLICIES``): at most ``regions - 1`` keys, strictly increasing; none
    for one region or a table without a policy."""
    policy = SPLIT_POLICIES.get(table)
    if policy is None or regions <= 1:
        return ()
    buckets = _BUCKETS[policy]()
    total = sum(w for _, w in buckets)
    # Weight of the rows before each bucket's start.
    before, acc = [], 0.0
    for start, weight in buckets:
        before.append((acc, start))
        acc += weight
    keys: list[bytes] = []
    for i in range(1, regions):
        target = total * i / regions
        _, key = min(before[1:], key=lambda b: abs(b[0] - target))
        if not keys or key > keys[-1]:
            keys.append(key)
    return tuple(keys)
