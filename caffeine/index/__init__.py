"""The indexing core: pure functions from fetched bytes to what the index stores.

Layer: index. Pure: no I/O, no HBase, no caffeine.percolator. The observers
(incremental) and the Spark job (batch) both call these, so they compute the same thing by
construction; docs/INDEXING.md names where each result is stored.

    normalize_url(url, base=None) -> str | None          urls
    parse_html(content, url, content_type) -> ParsedDocument   parse
    parse_links(content, url, content_type)               parse (what a crawler follows, without the text)
    normalize_text(s), tokenize(text), fingerprint(text)  text
    postings(tokens), Posting, encode/decode_posting      postings
    posting_counts(b), posting_positions(b)               postings (fast partial decoding)
    elect_canonical({url: inlinks}, {url: declared}) -> url | None   canonical
    Similarity, SIMILARITY (the ranking formula's one home)   scoring
    url_words, anchor_record, field_postings, ...         fields
    document_record(parsed), outlinks_record(url, parsed) documents
    derive, page_rules, crawl_links, anchors_value, docstats_cells   documents (what observers store)
    robots_directives, header_directives, parse_refresh   directives (what pages say of themselves)
    sketch, band_keys, overlap, is_near, cluster_rows     neardup (near-duplicate sketches and clusters)

``caffeine.index.schema`` is the data contract: the table and column names and every stored
value's encoder and decoder (imported from the module itself, not re-exported here).
"""

from caffeine.index.canonical import elect_canonical
from caffeine.index.documents import document_record, fetch_outcome, is_html, outlinks_record
from caffeine.index.parse import ParsedDocument, parse_html, parse_links
from caffeine.index.fields import anchor_record, anchor_text, anchor_votes, field_lengths, field_postings, url_words
from caffeine.index.postings import (
    MAX_POSITIONS,
    Posting,
    decode_posting,
    encode_posting,
    posting_counts,
    posting_positions,
    postings,
)
from caffeine.index.scoring import SIMILARITY, Similarity
from caffeine.index.text import MAX_TOKEN_CHARS, fingerprint, normalize_text, tokenize
from caffeine.index.urls import normalize_url

__all__ = [
    "normalize_url",
    "ParsedDocument",
    "parse_html",
    "parse_links",
    "normalize_text",
    "tokenize",
    "fingerprint",
    "MAX_TOKEN_CHARS",
    "Posting",
    "postings",
    "encode_posting",
    "decode_posting",
    "posting_counts",
    "posting_positions",
    "url_words",
    "anchor_record",
    "anchor_text",
    "anchor_votes",
    "field_lengths",
    "field_postings",
    "MAX_POSITIONS",
    "Similarity",
    "SIMILARITY",
    "elect_canonical",
    "document_record",
    "fetch_outcome",
    "is_html",
    "outlinks_record",
]
