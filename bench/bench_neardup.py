"""What near-duplicate detection costs per page: the sketch's CPU, and the cluster observer's
CPU and storage calls with and without it, on HBase.

For a real documentation set (default: GIMP's help in American and British English,
``apt-get install gimp-help-en gimp-help-en-gb``; or ``--dir``), in one run:

1. pure CPU per page: ``derive`` (parse, records, fingerprint, sketch) and, of it,
   ``document_sketch`` alone (median of ``--repeats``);
2. on HBase, the cluster observer's ``on_fingerprint`` over every page, each in its own
   transaction, one after another, in two variants on fresh tables: **exact**, the pages'
   rows without ``doc:sketch`` (clustering by fingerprint only: what it cost before), and
   **near**, with it (bands, candidates, links). The variants alternate ``--repeats`` times;
   per page: storage calls (Thrift1 + Thrift2), this process's CPU, and the CPU of HBase and
   both Thrift servers (``bench/proc_cpu.py``); medians, and near minus exact.

The rows are written before the measured pass (not measured); the notifications the
observer sets for its recounts are left unread. Needs the local runtime (``caffeine up``).

    python3 bench/bench_neardup.py [--dir PATH] [--limit N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from caffeine.config import load_settings  # noqa: E402
from caffeine.index import parse_html  # noqa: E402
from caffeine.index.documents import derive, document_sketch  # noqa: E402
from caffeine.index.schema import (  # noqa: E402
    CLUSTER_STATE, DOC_FINGERPRINT, DOC_SKETCH, DUPS, PERCOLATOR_TABLES, REPOSITORY, decode_near)
from caffeine.observers.dup_clusters import on_fingerprint  # noqa: E402
from caffeine.percolator import connect  # noqa: E402
from proc_cpu import runtime_cpu_s  # noqa: E402

GIMP = (Path("/usr/share/gimp/2.0/help/en"), Path("/usr/share/gimp/2.0/help/en_GB"))
META = {"status": 200, "content_type": "text/html; charset=utf-8", "error": None}


def corpus(dirs: list[Path], limit: int | None) -> list[tuple[str, bytes]]:
    files = sorted(p for d in dirs for p in d.rglob("*.html"))
    if not files:
        sys.exit(f"no HTML under {', '.join(map(str, dirs))}: apt-get install gimp-help-en gimp-help-en-gb, or --dir")
    files = files[:limit] if limit else files
    return [(f"http://docs.test/{p.parent.name}/{p.name}", p.read_bytes()) for p in files]


def pure_cpu(pages, repeats: int) -> tuple[float, float, list]:
    """(ms per page of derive, ms per page of the sketch alone, derived pages)."""
    derive_ms, sketch_ms = [], []
    derived = []
    for _ in range(repeats):
        t = time.process_time()
        derived = [(url, derive(url, {**META, "url": url, "final_url": url}, body)) for url, body in pages]
        derive_ms.append((time.process_time() - t) * 1000 / len(pages))
        parsed = [parse_html(body, url, META["content_type"]) for url, body in pages]
        t = time.process_time()
        for p in parsed:
            document_sketch(p)
        sketch_ms.append((time.process_time() - t) * 1000 / len(pages))
    return statistics.median(derive_ms), statistics.median(sketch_ms), derived


def calls(cluster) -> int:
    stats = cluster.stats.as_dict()
    return stats.get("thrift1_calls", 0) + stats.get("thrift2_calls", 0)


def one_pass(settings, derived, near: bool) -> dict[str, float]:
    """Per page figures of on_fingerprint over every page, on fresh tables."""
    prefix = f"bnd{uuid.uuid4().hex[:6]}_"
    with connect(settings.model_copy(update={"table_prefix": prefix})) as cluster:
        for table in PERCOLATOR_TABLES:
            cluster.create_table(table, exist_ok=True)
        docs = [(url, d) for url, d in derived if d.fingerprint is not None]
        for start in range(0, len(docs), 100):
            def write(txn, chunk=docs[start:start + 100]):
                for url, d in chunk:
                    txn.set(REPOSITORY, url, DOC_FINGERPRINT, d.fingerprint)
                    if near and d.sketch is not None:
                        txn.set(REPOSITORY, url, DOC_SKETCH, d.sketch)
            cluster.run(write)
        before_calls, before_cpu, before_rt, t0 = calls(cluster), resource.getrusage(resource.RUSAGE_SELF), \
            runtime_cpu_s(settings), time.monotonic()
        for url, _ in docs:
            cluster.run(lambda txn, row=url.encode(): on_fingerprint(txn, row, DOC_FINGERPRINT))
        wall = time.monotonic() - t0
        after_cpu, after_rt = resource.getrusage(resource.RUSAGE_SELF), runtime_cpu_s(settings)
        n = len(docs)
        with cluster.begin() as txn:
            links = sum(len(decode_near(cols)) for _, cols in txn.scan(DUPS)) // 2
            canonical = sum(1 for _, cols in txn.scan(REPOSITORY, columns=[CLUSTER_STATE])
                            if cols.get(CLUSTER_STATE, b"").startswith(b"1 "))
        out = {
            "calls": (calls(cluster) - before_calls) / n,
            "client_ms": ((after_cpu.ru_utime + after_cpu.ru_stime) - (before_cpu.ru_utime + before_cpu.ru_stime)) * 1000 / n,
            "hbase_ms": (after_rt.get("hbase", 0) - before_rt.get("hbase", 0)) * 1000 / n,
            "thrift_ms": sum(after_rt.get(k, 0) - before_rt.get(k, 0) for k in ("thrift1", "thrift2")) * 1000 / n,
            "wall_ms": wall * 1000 / n,
            "near_links": links,
            "canonical_pages": canonical,
            "pages": n,
        }
        for table in cluster.store.list_tables():  # this prefix's: the bench's own tables
            cluster.store.drop_table(table)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", action="append", type=Path, help="a documentation tree (repeatable; default: GIMP help en + en_GB)")
    ap.add_argument("--limit", type=int, help="at most this many pages")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    pages = corpus(args.dir or list(GIMP), args.limit)
    derive_ms, sketch_ms, derived = pure_cpu(pages, args.repeats)
    print(f"{len(pages)} pages; CPU per page: derive {derive_ms:.2f} ms, of which the sketch {sketch_ms:.2f} ms "
          f"({sketch_ms / derive_ms:.0%})")
    settings = load_settings()
    runs: dict[str, list[dict]] = {"exact": [], "near": []}
    for rep in range(args.repeats):
        for variant in ("exact", "near"):
            runs[variant].append(one_pass(settings, derived, variant == "near"))
            r = runs[variant][-1]
            print(f"  rep {rep + 1} {variant:5s}: {r['calls']:.2f} calls/page, client {r['client_ms']:.2f} ms, "
                  f"HBase {r['hbase_ms']:.2f} ms, Thrift {r['thrift_ms']:.2f} ms, wall {r['wall_ms']:.1f} ms per page; "
                  f"{r['near_links']} near links, {r['canonical_pages']} canonical pages", flush=True)
    print("\ncluster observer per page (median of %d)     exact    near   near-exact" % args.repeats)
    for key, label in (("calls", "storage calls"), ("client_ms", "client CPU ms"), ("hbase_ms", "HBase CPU ms"),
                       ("thrift_ms", "Thrift CPU ms"), ("wall_ms", "wall ms")):
        e = statistics.median(r[key] for r in runs["exact"])
        n = statistics.median(r[key] for r in runs["near"])
        print(f"  {label:40s} {e:8.2f} {n:7.2f} {n - e:+10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
