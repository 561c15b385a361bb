#!/usr/bin/env python3
"""A serving table's write, client side: CPU per index cell in each stage of ``ServingTable.put``.

An export writes a page's postings, impacts and docstats after its commit with
``ServingTable.put``: one cell per term row, a few hundred cells per page (the generated web
of ``bench_pipeline.py``: about 300 per fetched page over 1.7 exports). On its way to the wire
each cell passes these stages, each timed here on its own with the project's own code, in
this process, nothing sent:

==============  ==============================================================================
stage           what runs
==============  ==============================================================================
cells           ``ServingTable.put`` over a store whose ``put_cells`` does nothing: the
                columns split, a ``(family, qualifier, ts, value)`` tuple per cell
batching        the same through a ``BatchingStore`` (one caller: the batcher's leader path,
                the merge of the callers' rows) over that store, less ``cells``
structs         ``caffeine.storage.hbase._cells_tputs``: the row keys and families checked, a
                ``TPut`` per row and a ``TColumnValue`` per cell
wire            thriftpy2's binary protocol (the Cython one the client uses) encoding the
                ``putMultiple`` arguments
==============  ==============================================================================

Until ``Store.put_cells``, the write built a ``Put`` per cell, copied each row's list twice
and checked every cell's type and family twice on its way (3.3-3.4 µs per cell in these
stages against the Thrift structs' and the wire's 1.3). Each figure is the minimum over
``--repeats`` of µs per cell, the same rows put again and again (caches warm: a floor).

``--runtime`` also puts ``--puts`` different such writes (each of ``--rows`` rows drawn from
an 8,000-word vocabulary, as an index write's terms are) into a serving table of the local
runtime through the whole client path (the batching store, the HBase store, the socket),
one caller, and reports this thread's user and system CPU per cell (``getrusage``): what
the stages cost together, with the rows and their objects new to the caches each time.

    python3 bench/bench_serving_put.py [--rows 300] [--repeats 7] [--runtime [--puts 400]]

Needs no runtime, but for ``--runtime`` (``caffeine up``; the table, under a fresh prefix, is
dropped at the end).
"""

from __future__ import annotations

import argparse
import random
import resource
import uuid
import string
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from thriftpy2.protocol import TCyBinaryProtocolFactory  # noqa: E402
from thriftpy2.transport import TCyMemoryBuffer  # noqa: E402

from caffeine.percolator.serving import ServingTable  # noqa: E402
from caffeine.storage.base import StoreStats  # noqa: E402
from caffeine.storage.batching import BatchingStore  # noqa: E402
from caffeine.storage.hbase import _cells_tputs  # noqa: E402
from caffeine.storage.idl import PACKAGED_IDL  # noqa: E402
from caffeine.storage.thrift2 import Thrift2Codec, load_thrift2  # noqa: E402


class DiscardingStore:
    """Just enough of a ``Store`` for ``ServingTable.put`` and a ``BatchingStore`` over it:
    its writes go nowhere (what ``cells`` and ``batching`` run over)."""

    def __init__(self) -> None:
        self.stats = StoreStats()
        self.unknown_outcome_deadline_s = 60.0
        self.last = None

    def put_cells(self, table, rows) -> None:
        self.last = rows


def index_writes(count: int, rows: int, seed: int = 2) -> list[dict[str, dict[str, bytes]]]:
    """``count`` exports' postings writes, each of ``rows`` term rows (drawn from an
    8,000-word vocabulary) with one cell in its own page's column."""
    rng = random.Random(seed)
    vocabulary = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(3, 10))) for _ in range(8000)]
    return [{term: {f"p:http://127.0.0.1:1/site{i % 7}/page{i}.html": rng.randbytes(12)}
             for term in rng.sample(vocabulary, rows)} for i in range(count)]


def per_cell_us(fn, cells: int, repeats: int, number: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.thread_time()
        for _ in range(number):
            fn()
        best = min(best, (time.thread_time() - began) / number)
    return best / cells * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300, help="cells in one put (one per row)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--runtime", action="store_true", help="also through the whole path, to the local runtime")
    parser.add_argument("--puts", type=int, default=400, help="--runtime: puts measured (after 50 unmeasured)")
    args = parser.parse_args()
    staged(args)
    if args.runtime:
        through_runtime(args)


def through_runtime(args) -> None:
    """User and system CPU per cell of ``ServingTable.put`` to the local runtime (one caller)."""
    from caffeine.percolator import connect

    cluster = connect(table_prefix=f"bench_sput_{uuid.uuid4().hex[:8]}_")
    try:
        table = cluster.serving("postings", ["p"])
        writes = index_writes(50 + args.puts, args.rows)
        for rows in writes[:50]:  # warm-up: connections, the table's regions, the JIT of the servers
            table.put(rows, ts=5)
        before = resource.getrusage(resource.RUSAGE_THREAD)
        began = time.monotonic()
        for rows in writes[50:]:
            table.put(rows, ts=7)
        elapsed = time.monotonic() - began
        after = resource.getrusage(resource.RUSAGE_THREAD)
        cells = args.rows * args.puts
        print(f"through the runtime, {args.puts} puts of {args.rows} cells, one caller: "
              f"user {(after.ru_utime - before.ru_utime) / cells * 1e6:.2f} µs, "
              f"system {(after.ru_stime - before.ru_stime) / cells * 1e6:.2f} µs of CPU per cell; "
              f"{elapsed / args.puts * 1000:.1f} ms per put")
    finally:
        cluster.store.drop_table("postings")


def staged(args) -> None:

    (rows,) = index_writes(1, args.rows)
    cells = sum(map(len, rows.values()))
    number = max(1, 40_000 // cells)
    direct = DiscardingStore()
    plain = ServingTable(direct, "postings", ["p"])
    batching_store = BatchingStore(DiscardingStore())
    batched = ServingTable(batching_store, "postings", ["p"])
    plain.put(rows, ts=7)
    built = direct.last
    codec = Thrift2Codec(load_thrift2(str(PACKAGED_IDL)))
    tputs = _cells_tputs(codec, built)
    args_struct = codec.t2.THBaseService.putMultiple_args(table=b"postings", tputs=tputs)
    protocol = TCyBinaryProtocolFactory()

    def wire() -> None:
        args_struct.write(protocol.get_protocol(TCyMemoryBuffer()))

    stages = {
        "cells": per_cell_us(lambda: plain.put(rows, ts=7), cells, args.repeats, number),
        "batching": per_cell_us(lambda: batched.put(rows, ts=7), cells, args.repeats, number),
        "structs": per_cell_us(lambda: _cells_tputs(codec, built), cells, args.repeats, number),
        "wire": per_cell_us(wire, cells, args.repeats, number),
    }
    stages["batching"] -= stages["cells"]
    total = sum(stages.values())
    print(f"{cells} cells per put, µs of CPU per cell (min of {args.repeats}):")
    for name, us in stages.items():
        print(f"  {name:9s} {us:6.2f}  ({100 * us / total:4.1f}%)")
    print(f"  {'all':9s} {total:6.2f}")


if __name__ == "__main__":
    main()
