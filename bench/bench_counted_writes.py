#!/usr/bin/env python3
"""Index writes into a counted family, by how its store files are laid out.

A counted family (``FamilySpec.counted``: the ``impacts`` table's) costs the region server one
read per written row: the coprocessor reads the newest version of every written column and
the row's count cell (``RowCounts.countPut``) to move the count by what became live or dead.
A document's export writes a cell per distinct word, almost all of them columns that do not
exist yet (the document's own), into rows that exist in every store file (the words). How
that read is served depends on the family's Bloom filter and the count family's blocks:

- ``row``: the layout counted tables had before ``caffeine.storage.hbase.COUNT_FAMILY_SPEC``:
  a row Bloom filter on the counted family, the count cells in plain 64 KB blocks (seeking a
  row's count walks its block from the start).
- ``nidx``: the count family's blocks carry an index of their rows (HBase's ROW_INDEX_V1
  encoding), so seeking a row's count bisects instead: what the store creates now.
- ``rowcol``: a row+column Bloom filter on the counted family, so a column no store file
  holds skips them all; ``idx``: ROW_INDEX_V1 on the counted family; ``n<K>k``: the count
  family in K KB blocks.
- ``uncounted``: the same family without a count (``row``'s Bloom filter): what the write
  costs without the read, the floor any way of keeping the count is measured against.
- ``imc<policy>``: the counted family's in-memory compaction (``imcnone``, ``imcbasic``,
  ``imceager``, ``imcadaptive``; the family's ``hbase.hregion.compacting.memstore.type``),
  in place of the runtime's (``caffeine/runtime/siteconf.py``): how many memstore segments
  the count's read seeks.

A variant names any of these joined by "-" (``rowcol-nidx``).
Every variant has a table of its own, flushed by HBase at ``--flush-mb`` (the table's
``MEMSTORE_FLUSHSIZE``), so store files pile up and are compacted as under a long crawl; the
variants take blocks of ``--docs-per-block`` documents in turn (order rotated each round) so all see
the same machine. Each document writes ``--terms`` distinct words drawn from a Zipf
vocabulary of ``--vocabulary`` words, as one put of every word's row (as the export writes);
``--rewrite`` of them are an earlier document exported again (its old cells tombstoned, new
ones written). Prints per block the milliseconds per document and the region server's CPU
per document (from /proc: the local runtime), then each variant's median and its ratio to
the first variant's.

Usage (needs ``caffeine up``)::

    python3 bench/bench_counted_writes.py [--docs-per-block 200] [--rounds 6] [--terms 300]

Tables live under a fresh ``bench_counted_<random>_`` prefix and are dropped at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from caffeine.config import load_settings  # noqa: E402
from caffeine.storage import FamilySpec, Put  # noqa: E402
from caffeine.storage.hbase import COUNT_FAMILY, HBaseStore  # noqa: E402
from proc_cpu import runtime_cpu_s  # noqa: E402
from zipf_vocabulary import vocabulary, zipf_weights  # noqa: E402

FAMILY = b"i"
VARIANTS = ("row", "nidx", "uncounted")
# What a variant's name may combine, joined by "-" (see the module docstring).
PARTS = ("row", "rowcol", "uncounted", "idx", "nidx", "imcnone", "imcbasic", "imceager", "imcadaptive")
IMC_KEY = b"hbase.hregion.compacting.memstore.type"


def create(store: HBaseStore, table: str, variant: str, flush_mb: int) -> None:
    """The variant's table: one family (counted unless ``uncounted``) in 8 KB blocks, as
    serving tables have, HBase flushing it at ``flush_mb``; its Bloom filter and the count
    family's blocks set as the variant says, whatever the store now creates them with."""
    parts = variant.split("-")
    counted = "uncounted" not in parts
    store.create_table(table, {FAMILY: FamilySpec(max_versions=1, counted=counted, block_size=8 * 1024)})
    t2 = store.t2
    tname = t2.TTableName(qualifier=store._name(table))
    descriptor = store.thrift2.call(lambda c: c.getTableDescriptor(tname))
    descriptor.attributes = {**(descriptor.attributes or {}), b"MEMSTORE_FLUSHSIZE": str(flush_mb << 20).encode()}
    for column in descriptor.columns:
        if column.name == COUNT_FAMILY:
            column.blockSize = 64 * 1024
            column.dataBlockEncoding = t2.TDataBlockEncoding.ROW_INDEX_V1 if "nidx" in parts else t2.TDataBlockEncoding.NONE
            for part in parts:
                if part.startswith("n") and part.endswith("k") and part[1:-1].isdigit():
                    column.blockSize = int(part[1:-1]) * 1024
        elif column.name == FAMILY:
            column.bloomnFilterType = t2.TBloomFilterType.ROWCOL if "rowcol" in parts else t2.TBloomFilterType.ROW
            column.dataBlockEncoding = t2.TDataBlockEncoding.ROW_INDEX_V1 if "idx" in parts else t2.TDataBlockEncoding.NONE
            for part in parts:
                if part.startswith("imc"):
                    column.configuration = {**(column.configuration or {}), IMC_KEY: part[3:].upper().encode()}
    store.thrift2.call(lambda c: c.modifyTable(descriptor))


class Documents:
    """Documents as the export writes them: ``{word: {qualifier: posting}}`` per document."""

    def __init__(self, words: list[str], terms: int, rewrite: float, rng: random.Random) -> None:
        self.words = words
        self.weights = zipf_weights(len(words))
        self.terms = terms
        self.rewrite = rewrite
        self.rng = rng
        self.written: list[tuple[str, dict[bytes, bytes]]] = []  # (url, {word: qualifier})

    def _words(self) -> list[str]:
        chosen: dict[str, None] = {}
        while len(chosen) < self.terms:
            for w in self.rng.choices(self.words, cum_weights=self.weights, k=self.terms):
                chosen[w] = None
        return list(chosen)[: self.terms]

    def next(self) -> dict[bytes, list[Put]]:
        """The next document's rows (``ts`` filled in by the caller)."""
        rows: dict[bytes, list[Put]] = {}
        if self.written and self.rng.random() < self.rewrite:
            url, old = self.written[self.rng.randrange(len(self.written))]
            for word, qualifier in old.items():
                rows.setdefault(word, []).append(Put(FAMILY, qualifier, 0, b""))  # tombstone
        else:
            url = f"https://site.example/{len(self.written)}/{self.rng.getrandbits(32):08x}.html"
        level = self.rng.randrange(16)
        cells = {}
        for word in self._words():
            qualifier = f"{level:x}{url}".encode()
            key = word.encode()
            cells[key] = qualifier
            rows.setdefault(key, []).append(Put(FAMILY, qualifier, 0, b"posting:%d" % self.rng.randrange(100)))
        self.written.append((url, cells))
        return rows


def write_block(store: HBaseStore, table: str, docs: Documents, n: int, ts: list[int]) -> float:
    """``n`` documents written, one put per document (every cell at the next sequence number)."""
    started = time.perf_counter()
    for _ in range(n):
        ts[0] += 1
        rows = {row: [(p.family, p.qualifier, ts[0], p.value) for p in puts] for row, puts in docs.next().items()}
        store.put_cells(table, rows)
    return time.perf_counter() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs-per-block", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--terms", type=int, default=300)
    parser.add_argument("--vocabulary", type=int, default=30000)
    parser.add_argument("--rewrite", type=float, default=0.1)
    parser.add_argument("--flush-mb", type=int, default=4)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    for v in variants:
        for part in v.split("-"):
            if part not in PARTS and not (part[:1] == "n" and part[-1:] == "k" and part[1:-1].isdigit()):
                parser.error(f"unknown part {part!r} of variant {v!r} (known: {', '.join(PARTS)}, n<K>k)")

    prefix = f"bench_counted_{uuid.uuid4().hex[:6]}_"
    settings = load_settings(table_prefix=prefix)
    words = vocabulary(args.vocabulary, random.Random(args.seed))
    # The same documents for every variant: one generator each, seeded alike.
    docs = {v: Documents(words, args.terms, args.rewrite, random.Random(args.seed)) for v in variants}
    ts = {v: [0] for v in variants}
    lines = []
    store = HBaseStore(settings)
    try:
        for v in variants:
            create(store, v.replace("-", "_"), v, args.flush_mb)
        for r in range(args.rounds):
            order = variants[r % len(variants):] + variants[:r % len(variants)]
            for v in order:
                before = runtime_cpu_s(settings).get("hbase")
                seconds = write_block(store, v.replace("-", "_"), docs[v], args.docs_per_block, ts[v])
                after = runtime_cpu_s(settings).get("hbase")
                hbase_ms = None if before is None or after is None else 1000 * (after - before) / args.docs_per_block
                lines.append((r, v, len(docs[v].written), 1000 * seconds / args.docs_per_block, hbase_ms))
                print(f"round {r + 1}/{args.rounds} {v}: {lines[-1][3]:.1f} ms/doc", file=sys.stderr)
    finally:
        for table in store.list_tables():  # this prefix's tables only
            store.drop_table(table)
        store.close()
    print(f"{args.terms} words per document, vocabulary {args.vocabulary:,}, rewrite {args.rewrite}, "
          f"flush at {args.flush_mb} MB\n")
    print("| round | documents so far | variant | ms per document | HBase CPU ms per document |")
    print("|--:|--:|---|--:|--:|")
    for r, v, n, ms, hbase_ms in lines:
        print(f"| {r + 1} | {n:,} | {v} | {ms:.1f} | {'-' if hbase_ms is None else f'{hbase_ms:.1f}'} |")
    base = variants[0]
    print(f"\n| variant | median ms per document | median HBase CPU ms per document | HBase CPU vs {base} (median of per-round ratios) |")
    print("|---|--:|--:|--:|")
    by = {v: [x for x in lines if x[1] == v] for v in variants}
    for v in variants:
        cpu = [x[4] for x in by[v] if x[4] is not None]
        ratio = "-"
        if cpu:
            ratios = [a[4] / b[4] for a, b in zip(by[v], by[base]) if a[4] and b[4]]
            ratio = f"{statistics.median(ratios):.2f}" if ratios else "-"
        print(f"| {v} | {statistics.median(x[3] for x in by[v]):.1f} | "
              f"{statistics.median(cpu) if cpu else float('nan'):.1f} | {ratio} |")
    print("\nreproduce: python3 bench/bench_counted_writes.py " + " ".join(argv if argv is not None else sys.argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
