"""Views of stored pages and duplicate clusters: ``/documents`` and ``/dups``.

Layer: search. Imports the public ``caffeine.percolator`` names (through the
``Cluster`` and ``ServingTable`` it is given), ``caffeine.index`` (URL normalization) and
``caffeine.index.schema`` (names, and the codecs every stored value is decoded with).
Read-only; knows nothing of HTTP.

Contract: one view's reads of Percolator tables (``repository``, ``inlinks``, ``dups``) share
one snapshot (one ``cluster.begin()`` that writes nothing), so a document, its cluster and
its inlinks agree with each other. Its ``docstats`` row (whether it is indexed) is not
transactional and may be a moment ahead of or behind that snapshot. Views are plain dicts
shaped like ``api.models``; "not found" is ``None``.
"""

from __future__ import annotations

from caffeine.index import normalize_url
from caffeine.index.neardup import cluster_pages, cluster_rows, similarity
from caffeine.index.schema import (
    CANONICAL_URL,
    CLUSTER_STATE,
    DOC_DIRECTIVES,
    DOC_FINGERPRINT,
    DOC_OUTLINKS,
    DOC_PARSED,
    DUPS,
    INLINKS,
    PAGE_META,
    REPOSITORY,
    decode_canonical_url,
    decode_cluster_state,
    decode_directives,
    decode_docstats,
    decode_document,
    decode_fingerprint,
    decode_inlinks,
    decode_members,
    decode_near,
    decode_outlinks,
    decode_page_meta,
)

from caffeine.search.links import cluster_link, document_link, iso
from caffeine.search.settings import SearchSettings
from caffeine.search.snippets import make_snippet


def _near_rows(txn, fingerprint: str) -> dict[str, dict[str, bytes]]:
    """The dups rows of the near-duplicate cluster of exact cluster ``fingerprint`` in
    ``txn`` (``caffeine.index.neardup.cluster_rows``), ``fingerprint`` first."""
    def read(fps):
        rows = txn.get_all_rows(DUPS, [fp.encode() for fp in fps])
        return {fp: rows[fp.encode()] for fp in fps}

    return cluster_rows(fingerprint, read)


def _cluster(txn, fingerprint: str) -> tuple[dict[str, int], str | None, dict[str, str], dict[str, str], dict]:
    """The near-duplicate cluster of exact cluster ``fingerprint`` in ``txn``: its members
    ``{url: inlinks}``, its canonical URL, the members' declared canonicals ``{url:
    declared}``, each member's exact fingerprint ``{url: fp}``, and its dups rows."""
    rows = _near_rows(txn, fingerprint)
    members, declared, content = cluster_pages(rows)
    return members, decode_canonical_url(rows[fingerprint].get(CANONICAL_URL)), declared, content, rows


def _candidates(url: str) -> list[str]:
    """The row keys ``url`` may be stored under: normalized first, then as given."""
    normalized = normalize_url(url)
    return list(dict.fromkeys(u for u in (normalized, url.strip()) if u))


class Views:
    """Documents and duplicate clusters of one ``Cluster``; thread-safe."""

    def __init__(self, cluster, docstats, settings: SearchSettings) -> None:
        self.cluster = cluster
        self.docstats = docstats
        self.settings = settings

    def document(self, url: str) -> dict | None:
        """Everything stored about one page, or None if the repository has no row for it."""
        limit = self.settings.max_listed_links
        columns = [PAGE_META, DOC_PARSED, DOC_OUTLINKS, DOC_FINGERPRINT, CLUSTER_STATE, DOC_DIRECTIVES]
        with self.cluster.begin() as txn:
            for candidate in _candidates(url):
                cols = txn.get_row(REPOSITORY, candidate, columns)
                if any(v is not None for v in cols.values()):
                    url = candidate
                    break
            else:
                return None
            meta = decode_page_meta(cols[PAGE_META], {})
            parsed = decode_document(cols[DOC_PARSED])
            outlinks = decode_outlinks(cols[DOC_OUTLINKS])
            fingerprint = decode_fingerprint(cols[DOC_FINGERPRINT])
            state = decode_cluster_state(cols[CLUSTER_STATE])
            directives = decode_directives(cols[DOC_DIRECTIVES])
            key = url.encode()
            inlinks = [{"source": source, "anchor": anchor}
                       for _, cells in txn.scan(INLINKS, key, key + b"\x00")
                       for source, anchor in decode_inlinks(cells).items()]
            members, canonical, _, content, _ = _cluster(txn, fingerprint) if fingerprint else ({}, None, {}, {}, {})
        stats = decode_docstats(self.docstats.get(key))
        duplicates = sorted(({"url": u, "inlinks": n, "exact": content[u] == fingerprint}
                             for u, n in members.items() if u != url),
                            key=lambda m: (not m["exact"], -m["inlinks"], m["url"]))
        fetched_at = meta.get("fetched_at")
        return {
            "url": url,
            "title": parsed.get("title") if parsed else None,
            "fetched_at": fetched_at,
            "fetched_at_iso": iso(fetched_at) if isinstance(fetched_at, (int, float)) else None,
            "status": meta.get("status"),
            "content_type": meta.get("content_type"),
            "fetch_error": meta.get("error"),
            "final_url": meta.get("final_url"),
            "bytes": meta.get("bytes"),
            "truncated": meta.get("truncated"),
            "content_hash": fingerprint,
            "length": parsed.get("length") if parsed else None,
            "excerpt": (make_snippet(parsed.get("text") or "", (), 48, 400)
                        if parsed and "nosnippet" not in directives.get("robots", ()) else None),
            "declared_canonical": parsed.get("canonical") if parsed else None,
            "robots": directives.get("robots", []),
            "refresh_to": directives.get("refresh"),
            "redirect_stub": bool(directives.get("redirect")),
            "indexed": state.canonical and stats is not None,
            "canonical_url": canonical,
            "is_canonical": canonical == url if canonical else False,
            "inlink_count": len(inlinks),
            "cluster_size": len(members) if fingerprint else 0,
            "duplicates": duplicates[:limit],
            "inlinks_total": len(inlinks),
            "inlinks": sorted(inlinks, key=lambda i: i["source"])[:limit],
            "outlinks_total": len(outlinks),
            "outlinks": [{"target": t, "anchor": a} for t, a in outlinks[:limit]],
            "cluster_url": cluster_link(fingerprint) if fingerprint else None,
        }

    def dup_cluster(self, fingerprint: str) -> dict | None:
        """A duplicate cluster (exact and near duplicates): canonical, members (with inlink
        counts, declared canonicals and their exact cluster) and its exact clusters with
        their near-duplicate similarities; None when ``fingerprint`` has no member."""
        with self.cluster.begin() as txn:
            members, canonical, declared, content, rows = _cluster(txn, fingerprint)
        if not decode_members(rows[fingerprint]):
            return None
        ordered = sorted(members.items(), key=lambda m: (m[0] != canonical, -m[1], len(m[0]), m[0]))
        return {
            "fingerprint": fingerprint,
            "canonical_url": canonical,
            "size": len(members),
            "members": [
                {"url": u, "inlinks": n, "canonical": u == canonical, "declares": declared.get(u),
                 "fingerprint": content[u], "document_url": document_link(u)}
                for u, n in ordered[: self.settings.max_listed_links]
            ],
            "contents": [
                {"fingerprint": fp, "size": len(decode_members(cells)), "cluster_url": cluster_link(fp),
                 "near": [{"fingerprint": other, "similarity": similarity(n)}
                          for other, n in sorted(decode_near(cells).items())]}
                for fp, cells in rows.items()
            ],
        }

    def dup_cluster_of(self, url: str) -> dict | None:
        """The cluster of the page at ``url`` (None if unknown or in no cluster)."""
        with self.cluster.begin() as txn:
            for candidate in _candidates(url):
                fp = decode_fingerprint(txn.get(REPOSITORY, candidate, DOC_FINGERPRINT))
                if fp:
                    break
            else:
                return None
        return self.dup_cluster(fp)
