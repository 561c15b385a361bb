"""An index written straight into the serving tables, for the read-side benchmarks
(``bench_cold.py``, ``bench_search.py --direct``).

Generated documents (``zipf_vocabulary``'s Zipf vocabulary of 8,000 words, which
``bench_search``'s queries draw from; bodies of 80-400 words, 3-word titles, anchor text
from a few linking sites) are planned with the export observer's own pure ``plan_export``
(the same postings, impacts and docstats cells the observer writes, at one sequence number)
and written in batches. Feeding
that many pages through the transactional chain takes tens of minutes to hours on two cores;
what the read-side benchmarks measure reads the same tables either way. ``write_parsed``
adds each document's ``doc:parsed`` record to ``repository`` (transactions of 200 rows),
which the search service reads for titles and snippets.
"""

from __future__ import annotations

import hashlib
import random
import sys
import time

from caffeine.index import anchor_record, tokenize
from caffeine.index.schema import (
    DOC_PARSED, DOCSTATS, DOCSTATS_FAMILY, IMPACTS, IMPACTS_FAMILY, POSTINGS, POSTINGS_FAMILY, REPOSITORY,
    counted_families, encode_document,
)
from caffeine.observers.export import plan_export
from zipf_vocabulary import vocabulary, zipf_weights


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def documents(count: int, seed: int):
    """(url, doc:parsed record, anchors record) of ``count`` generated documents."""
    rng = random.Random(seed)
    vocab = vocabulary(8000, rng)
    cum = zipf_weights(len(vocab))
    for i in range(count):
        url = f"http://bench.test/s{i % 50}/p{i}.html"
        words = rng.choices(vocab, cum_weights=cum, k=rng.randrange(80, 400))
        title = " ".join(rng.choices(vocab, cum_weights=cum, k=3))
        # Incoming links: {source page: anchor text}, from a few sites.
        links = {f"http://site{rng.randrange(30)}.test/p{j}": " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randrange(1, 3)))
                 for j in range(rng.choice((0, 0, 1, 2, 5)))}
        text = " ".join(words)
        anchors = anchor_record(links)
        yield url, {"title": title, "text": text, "canonical": None, "length": len(tokenize(text))}, anchors


def write_index(cluster, count: int, seed: int, batch: int = 200) -> float:
    """Write the index of ``count`` generated documents; returns the seconds it took."""
    tables = {name: cluster.serving(name, [family], counted=counted_families(name)) for name, family in
              ((POSTINGS, POSTINGS_FAMILY), (IMPACTS, IMPACTS_FAMILY), (DOCSTATS, DOCSTATS_FAMILY))}
    for table in tables.values():
        table.create()
    started = time.monotonic()
    pending: dict[str, dict] = {name: {} for name in tables}
    seq = 1_000_000

    def flush():
        for name, rows in pending.items():
            if rows:
                tables[name].put(rows, ts=seq)
                rows.clear()

    for i, (url, doc, anchors) in enumerate(documents(count, seed)):
        fingerprint = hashlib.blake2b(doc["text"].encode(), digest_size=8).hexdigest()
        _, rows, impact_rows, stats = plan_export(url, doc, fingerprint, None, 0, seq, anchors)
        for name, new in ((POSTINGS, rows), (IMPACTS, impact_rows), (DOCSTATS, {url: stats})):
            target = pending[name]
            for row, cells in new.items():
                target.setdefault(row, {}).update(cells)
        if (i + 1) % batch == 0:
            flush()
        if (i + 1) % 5000 == 0:
            log(f"  wrote {i + 1}/{count} documents ({time.monotonic() - started:.0f}s)")
    flush()
    return time.monotonic() - started


def write_parsed(cluster, count: int, seed: int, batch: int = 200) -> float:
    """Write each generated document's ``doc:parsed`` record into ``repository`` (what the
    search service shows as title and snippet); returns the seconds it took."""
    started = time.monotonic()
    docs = documents(count, seed)
    while True:
        chunk = [(url, doc) for _, (url, doc, _) in zip(range(batch), docs)]
        if not chunk:
            return time.monotonic() - started

        def write(txn, chunk=chunk):
            for url, doc in chunk:
                txn.set(REPOSITORY, url, DOC_PARSED, encode_document(doc))

        cluster.run(write)
