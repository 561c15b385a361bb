#!/usr/bin/env python3
"""Bytes per document in each table of an index built by the pipeline (for docs/SCALING.md).

For each table prefix given (an index the pipeline built and a benchmark kept, e.g. the
prefixes ``bench_relevance.py --keep`` prints), it sums the HFiles of each of the prefix's
tables under the local runtime's ``hbase.rootdir`` (``<home>/data/hbase/data/default/<table>``;
``.tmp`` and the write-ahead logs not counted) and divides by the documents of the index:
the rows of ``repository`` that hold a page (``page:content`` committed), counted through a
snapshot. The byte counts are what HBase stores: Percolator's data, lock and write columns,
the versions and delete markers a major compaction has not removed yet, HBase's key per cell
(row, family, qualifier, timestamp), no compression (the local runtime compresses nothing).
Beside them, the mean size of a page as fetched (``page:content``).

A memstore is not on disk: measure after ``caffeine down`` and ``caffeine up`` (a clean stop
flushes every memstore), before anything writes to the prefix again. With ``--json`` the
figures are printed as one JSON object too.

Usage::

    python3 bench/bench_footprint.py bench_rel_python_402293_ bench_rel_rust_f09892_ [...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from caffeine.config import load_settings
from caffeine.index.schema import DOCSTATS, DUPS, IMPACTS, INLINKS, PAGE_CONTENT, POSTINGS, REPOSITORY
from caffeine.runtime.home import Layout

# The tables of the data contract, in the order the pipeline fills them; the prefix's other
# tables (the crawler's frontier, the system's own) are summed as "other".
CONTRACT = (REPOSITORY, INLINKS, DUPS, POSTINGS, IMPACTS, DOCSTATS)


def table_bytes(root: Path, prefix: str) -> dict[str, int]:
    """Logical table name -> bytes of its HFiles on disk."""
    out: dict[str, int] = {}
    base = root / "data" / "default"
    for directory in sorted(base.glob(f"{prefix}*")):
        name = directory.name[len(prefix):]
        out[name] = sum(f.stat().st_size for f in directory.rglob("*")
                        if f.is_file() and ".tmp" not in f.parts and not f.name.startswith("."))
    return out


def documents(prefix: str) -> tuple[int, int]:
    """Rows of ``repository`` under ``prefix`` with a page, and the pages' bytes, through a snapshot."""
    from caffeine.percolator import connect

    settings = load_settings().model_copy(update={"table_prefix": prefix})
    count = size = 0
    with connect(settings) as cluster, cluster.begin() as txn:
        for _, cols in txn.scan(REPOSITORY, columns=[PAGE_CONTENT]):
            count += 1
            size += len(cols.get(PAGE_CONTENT) or b"")
    return count, size


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("prefixes", nargs="+", help="table prefixes of kept indexes")
    p.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = p.parse_args(argv)
    root = Layout.from_settings(load_settings()).hbase_root_dir
    rows = []
    for prefix in args.prefixes:
        sizes = table_bytes(root, prefix)
        if not sizes:
            print(f"no table under {root}/data/default/{prefix}*", file=sys.stderr)
            return 1
        docs, page_bytes = documents(prefix)
        per_doc = {t: sizes.get(t, 0) / docs for t in CONTRACT}
        per_doc["other"] = sum(v for t, v in sizes.items() if t not in CONTRACT) / docs
        rows.append({"prefix": prefix, "documents": docs, "page_bytes": page_bytes / docs, "bytes_per_document": per_doc,
                     "total_per_document": sum(sizes.values()) / docs})
    header = ["prefix", "documents", "mean page", *CONTRACT, "other", "total"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for r in rows:
        cells = [r["prefix"], str(r["documents"]), f"{r['page_bytes'] / 1024:.1f} KB",
                 *(f"{r['bytes_per_document'][t] / 1024:.1f} KB" for t in (*CONTRACT, "other")),
                 f"{r['total_per_document'] / 1024:.1f} KB"]
        print("| " + " | ".join(cells) + " |")
    print(f"\nbytes per document of each table's HFiles under {root}; reproduce: "
          f"python3 bench/bench_footprint.py {' '.join(args.prefixes)}")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
