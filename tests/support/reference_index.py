"""A from-scratch computation of the dups table and the inverted index over a set of pages.

Independent of the observers and of any table: it takes the pages (URL -> (page:meta dict,
content bytes)) and applies docs/INDEXING.md's rules directly with the pure core. Tests
compare the incremental pipeline's tables with it, exactly.
"""

from __future__ import annotations

from caffeine.index import (
    anchor_record,
    anchor_text,
    anchor_votes,
    elect_canonical,
    encode_posting,
    field_lengths,
    field_postings,
    outlinks_record,
    parse_html,
    tokenize,
)
from itertools import combinations

from caffeine.index import fingerprint as text_fingerprint
from caffeine.index import fetch_outcome
from caffeine.index.documents import document_sketch, page_rules
from caffeine.index.neardup import is_near, overlap


def reference(pages: dict[str, tuple[dict, bytes]], previous: dict | None = None) -> dict:
    """{"dups": {fp: (canonical, {url: inlinks})}, "postings": {term: {url: bytes}}, "docs": {url: length},
    "fields": {url: (title, anchor, url-words lengths)}, "votes": {url: link votes}} of the canonicals.

    ``previous``: the result for the pages' earlier versions; a page whose fetch now has an
    outcome that keeps the last good version (5xx, timeout) keeps its previous document.
    """
    docs = {}
    linking = {}  # every fetched HTML page whose links count: url -> its outlinks
    for url, (meta, content) in pages.items():
        outcome = fetch_outcome(meta)
        if outcome == "document":
            parsed = parse_html(content, meta.get("final_url") or url, meta.get("content_type"))
            rules = page_rules(url, meta, parsed)  # noindex, nofollow, redirect stubs
            if rules.document:
                docs[url] = parsed
            linking[url] = outlinks_record(url, parsed, rules.refresh) if rules.follow else []
        elif outcome == "keep" and previous and url in previous["linking"]:
            linking[url] = previous["linking"][url]
            if url in previous["parsed"]:
                docs[url] = previous["parsed"][url]
    inlinks: dict[str, set[str]] = {}
    anchors: dict[str, dict[str, str]] = {}
    for url, outlinks in linking.items():
        for target, anchor in outlinks:
            inlinks.setdefault(target, set()).add(url)
            anchors.setdefault(target, {})[url] = anchor
    clusters: dict[str, dict[str, int]] = {}
    sketches: dict[str, bytes | None] = {}
    for url, parsed in docs.items():
        # Exact duplicates: the same title, text and main region (caffeine.index.documents).
        fp = text_fingerprint("\x00".join((parsed.title, parsed.text, parsed.main or "")), normalized=True)
        clusters.setdefault(fp, {})[url] = len(inlinks.get(url, ()))
        sketches[fp] = document_sketch(parsed)
    # Near-duplicates: every pair of exact clusters compared (no bands), then the connected
    # components of the near pairs.
    near: dict[str, set[str]] = {fp: set() for fp in clusters}
    for a, b in combinations(sorted(fp for fp in clusters if sketches[fp] is not None), 2):
        if is_near(overlap(sketches[a], sketches[b])):
            near[a].add(b)
            near[b].add(a)
    component: dict[str, str] = {}
    for fp in sorted(clusters):
        if fp not in component:
            todo = [fp]
            while todo:
                f = todo.pop()
                if f not in component:
                    component[f] = fp
                    todo.extend(near[f])
    # rel=canonical: a member's declared canonical counts in its cluster's election.
    declared = {url: parsed.canonical for url, parsed in docs.items() if parsed.canonical is not None}
    elected = {}
    for root in set(component.values()):
        members = {u: n for fp, ms in clusters.items() if component[fp] == root for u, n in ms.items()}
        elected[root] = elect_canonical(members, {u: declared[u] for u in members if u in declared})
    dups = {fp: (elected[component[fp]], members) for fp, members in clusters.items()}
    index: dict[str, dict[str, bytes]] = {}
    lengths = {}
    fields = {}
    votes = {}
    for canonical in sorted({canonical for canonical, _ in dups.values()}):
        tokens = tokenize(docs[canonical].text)
        lengths[canonical] = len(tokens)
        record = anchor_record(anchors.get(canonical, {}))
        anchor = anchor_text(record)
        fields[canonical] = field_lengths(docs[canonical].title, anchor, canonical)
        votes[canonical] = anchor_votes(record)
        for term, posting in field_postings(tokens, docs[canonical].title, anchor, canonical).items():
            index.setdefault(term, {})[canonical] = encode_posting(posting)
    return {"dups": dups, "postings": index, "docs": lengths, "parsed": docs, "fields": fields, "votes": votes,
            "linking": linking}


def incremental(cluster) -> dict:
    """The same shape, read from the pipeline's tables (dups, postings, docstats)."""
    from caffeine.index.schema import CANONICAL_URL, DOCSTATS, DOCSTATS_FAMILY, DUPS, MEMBER_PREFIX, POSTINGS, POSTINGS_FAMILY

    dups = {}
    with cluster.begin() as txn:
        for fp, cols in txn.scan(DUPS):
            members = {c[len(MEMBER_PREFIX):]: int(v) for c, v in cols.items() if c.startswith(MEMBER_PREFIX)}
            if members or CANONICAL_URL in cols:
                canonical = cols.get(CANONICAL_URL)
                dups[fp.decode()] = (canonical.decode() if canonical else None, members)
    index: dict[str, dict[str, bytes]] = {}
    for term, cells in cluster.serving(POSTINGS, [POSTINGS_FAMILY]).scan():
        index[term.decode()] = {c.split(":", 1)[1]: v for c, v in cells.items()}
    lengths = {}
    for url, cells in cluster.serving(DOCSTATS, [DOCSTATS_FAMILY]).scan(columns=["s:length"]):
        lengths[url.decode()] = int(cells["s:length"])
    return {"dups": dups, "postings": index, "docs": lengths}
