"""``caffeine migrate-urls``: re-key rows written under earlier URL normalization rules.

Layer: crawler. Imports the public ``caffeine.percolator`` API through the cluster it is
given, ``caffeine.index`` and ``caffeine.index.schema``.

``caffeine.index.urls`` now maps hosts by UTS46/IDNA2008, decodes escaped unreserved
characters (``%7E`` is ``~``) and drops session-id parameters (``?PHPSESSID=...``,
``;jsessionid=...``). A repository written before keeps rows under keys that are no longer
normal (``http://example.com/%7Euser``, ``http://example.com/a?PHPSESSID=f00``): the next
crawl records the page under its new key, and the old row would stay a second document of
the same resource. Several old keys can share one new key (one per session id): each is
moved in turn, and the latest fetch among them ends up under the new key. This command
settles that, one transaction per row, and is safe to run again (a second run finds nothing):

* ``repository[old]`` whose key normalizes to ``new != old``: its latest outcome
  (``page:meta`` with ``url``/``final_url`` re-normalized, ``page:content``, ``page:error``)
  is copied to ``repository[new]`` unless ``new`` holds a later fetch; ``repository[old]``
  gets a ``page:meta`` that says the row moved (status 410, ``final_url`` the new key,
  ``error`` "moved to ... by caffeine migrate-urls") and loses its content, so the document
  observer and the batch job drop its document by the ordinary rule (404/410 = gone);
* a row whose ``doc:outlinks`` name a target that is not normal any more has its
  ``page:meta`` written again unchanged: the document observer runs on it and re-derives its
  links, so inlinks land on the new keys;
* ``frontier[old]`` moves to ``frontier[new]`` (unless that exists), and the run's
  ``origins`` are re-normalized;
* keys that do not normalize at all are left as they are and counted.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field

from caffeine.index import normalize_url
from caffeine.index.schema import (
    DOC_OUTLINKS,
    PAGE_CONTENT,
    PAGE_ERROR,
    PAGE_META,
    REPOSITORY,
    decode_outlinks,
    decode_page_meta,
    encode_page_meta,
)
from crawler.frontier import RUN_ROW

__all__ = ["migrate_urls", "MigrationReport", "MOVED_STATUS"]

MOVED_STATUS = 410
_FRONTIER_COLUMNS = ("state", "depth", "run")


@dataclass
class MigrationReport:
    counts: Counter = field(default_factory=Counter)
    moved: list[tuple[str, str]] = field(default_factory=list)

    def summary(self, dry_run: bool) -> str:
        verb = "would be" if dry_run else "were"
        c = self.counts
        lines = [f"repository rows re-keyed: {c['repository']} ({verb} moved)",
                 f"repository rows re-derived (links no longer normal): {c['relinked']}",
                 f"frontier rows re-keyed: {c['frontier']}",
                 f"keys that do not normalize (left as they are): {c['unnormalizable']}"]
        lines += [f"  {old} -> {new}" for old, new in self.moved[:20]]
        if len(self.moved) > 20:
            lines.append(f"  ... and {len(self.moved) - 20} more")
        return "\n".join(lines)


def migrate_urls(cluster, *, repository: str = REPOSITORY, frontier: str = "frontier",
                 dry_run: bool = False) -> MigrationReport:
    """Re-key and re-derive what the current rules see differently (module docstring)."""
    report = MigrationReport()
    renames, relink = [], []
    cluster.create_table(repository)
    with cluster.begin() as txn:
        for key, cols in txn.scan(repository, columns=[PAGE_META, PAGE_ERROR, DOC_OUTLINKS]):
            url = key.decode("utf-8", errors="surrogateescape")
            new = normalize_url(url)
            if new is None:
                report.counts["unnormalizable"] += 1
            elif new != url:
                if not _already_moved(cols.get(PAGE_META), new):
                    renames.append((url, new))
            elif cols.get(DOC_OUTLINKS) and _links_not_normal(cols[DOC_OUTLINKS]):
                relink.append(url)
    for old, new in renames:
        report.counts["repository"] += 1
        report.moved.append((old, new))
        if not dry_run:
            cluster.run(lambda txn, old=old, new=new: _move_page(txn, repository, old, new))
    for url in relink:
        report.counts["relinked"] += 1
        if not dry_run:
            cluster.run(lambda txn, url=url: _renotify(txn, repository, url))
    cluster.create_table(frontier)  # exist_ok: a repository fed by ingest alone has none
    _migrate_frontier(cluster, frontier, report, dry_run)
    return report


def _already_moved(meta: bytes | None, new: str) -> bool:
    try:
        record = decode_page_meta(meta, {})
    except ValueError:
        return False
    return (record.get("status") == MOVED_STATUS and record.get("final_url") == new
            and str(record.get("error", "")).endswith("by caffeine migrate-urls"))


def _links_not_normal(outlinks: bytes) -> bool:
    try:
        return any(normalize_url(target) != target for target, _ in decode_outlinks(outlinks))
    except (ValueError, TypeError):
        return False


def _move_page(txn, table: str, old: str, new: str) -> None:
    cols = txn.get_row(table, old, [PAGE_META, PAGE_CONTENT, PAGE_ERROR])
    target = txn.get_row(table, new, [PAGE_META])
    meta = decode_page_meta(cols[PAGE_META])
    target_meta = decode_page_meta(target[PAGE_META])
    if meta is not None:
        newer = target_meta is None or target_meta.get("fetched_at", 0) < meta.get("fetched_at", 0)
        if newer:
            moved = dict(meta, url=new, final_url=normalize_url(meta.get("final_url") or new) or new)
            txn.set(table, new, PAGE_META, encode_page_meta(moved))
            if cols[PAGE_CONTENT] is not None:
                txn.set(table, new, PAGE_CONTENT, cols[PAGE_CONTENT])
            else:
                txn.delete(table, new, PAGE_CONTENT)
            txn.delete(table, new, PAGE_ERROR)
        gone = {"url": old, "status": MOVED_STATUS, "content_type": None,
                "fetched_at": meta.get("fetched_at", 0), "final_url": new,
                "error": f"moved to {new} by caffeine migrate-urls", "truncated": False, "bytes": 0}
        txn.set(table, old, PAGE_META, encode_page_meta(gone))
    if cols[PAGE_ERROR] is not None and target_meta is None and meta is None:
        txn.set(table, new, PAGE_ERROR, cols[PAGE_ERROR])
    txn.delete(table, old, PAGE_CONTENT)
    txn.delete(table, old, PAGE_ERROR)


def _renotify(txn, table: str, url: str) -> None:
    meta = txn.get_row(table, url, [PAGE_META])[PAGE_META]
    if meta is not None:
        txn.set(table, url, PAGE_META, meta)  # same bytes: the observer re-derives the links


def _migrate_frontier(cluster, table: str, report: MigrationReport, dry_run: bool) -> None:
    renames = []
    with cluster.begin() as txn:
        for key, _ in txn.scan(table, columns=["state"]):
            if key == RUN_ROW.encode():
                continue
            url = key.decode("utf-8", errors="surrogateescape")
            new = normalize_url(url)
            if new is not None and new != url:
                renames.append((url, new))
        config = txn.get_row(table, RUN_ROW, ["config"])["config"]
    for old, new in renames:
        report.counts["frontier"] += 1
        if not dry_run:
            cluster.run(lambda txn, old=old, new=new: _move_frontier_row(txn, table, old, new))
    if config and not dry_run:
        decoded = json.loads(config)
        origins = [(normalize_url(o + "/") or o + "/")[:-1] for o in decoded.get("origins", [])]
        if origins != decoded.get("origins", []):
            new_config = json.dumps(dict(decoded, origins=sorted(set(origins))), sort_keys=True)
            cluster.run(lambda txn: txn.set(table, RUN_ROW, "config", new_config))


def _move_frontier_row(txn, table: str, old: str, new: str) -> None:
    cols = txn.get_row(table, old, _FRONTIER_COLUMNS)
    if txn.get_row(table, new, ["state"])["state"] is None:
        for column in _FRONTIER_COLUMNS:
            if cols[column] is not None:
                txn.set(table, new, column, cols[column])
    for column in _FRONTIER_COLUMNS:
        txn.delete(table, old, column)
