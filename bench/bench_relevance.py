"""Relevance benchmark: Caffeine's ranking against a stock BM25 engine on real documents.

The corpus is a real HTML site nobody here wrote: Debian's ``python3.11-doc`` (the HTML tree
under ``/usr/share/doc/python3.11/html``; ``apt-get install python3.11-doc``). The judged
queries and their target pages are in ``bench/data/relevance_python_docs.json``, committed
before any ranking change.

Both engines index identical pages:

* **Caffeine** through its real pipeline: the tree is served as a local web
  (``testweb.TestWeb``), crawled from its front page with the observer chain running
  (in-process workers) until quiescent, then queried through ``caffeine serve``'s
  ``/search`` over HTTP, ``size=10``.
* **tantivy** (PyPI ``tantivy``) with its defaults: an in-memory index with a ``title`` and a
  ``body`` text field (default tokenizer), BM25 as shipped, the query parsed over both fields
  by its query parser (OR of the words, as it defaults to). The documents are exactly the ones
  Caffeine indexed (the canonical of every duplicate cluster), with the title and text
  Caffeine's parser extracted, so the comparison is about ranking alone.

Metrics per query and in total (mean over queries): success@3 (a target in the top 3),
MRR@10 (1 / rank of the first target within the top 10, else 0) and nDCG@10 with graded
targets (the first target of a query grade 2, the others grade 1). A folder URL (``.../``)
counts as its ``index.html`` (they serve the same bytes).

    python3 bench/bench_relevance.py                     # build, measure, drop the tables
    python3 bench/bench_relevance.py --keep              # keep the index; prints its prefix
    python3 bench/bench_relevance.py --reuse PREFIX      # measure an index built earlier

Needs the local runtime (``caffeine up``). Writes ``bench/results/relevance.csv``.
"""

from __future__ import annotations

import argparse
import csv
import http.client
import json
import math
import re
import sys
import time
import urllib.parse
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_search import drop_tables, free_port, log, start_server  # noqa: E402
from caffeine.observers.app import application  # noqa: E402
from caffeine.index.schema import CLUSTER_STATE, DOC_PARSED, REPOSITORY, decode_document, is_canonical  # noqa: E402
from caffeine.percolator import connect  # noqa: E402

DOCS = Path("/usr/share/doc/python3.11/html")
QUERIES = ROOT / "bench" / "data" / "relevance_python_docs.json"
DEPTH = 10


# -- judging -----------------------------------------------------------------------------------
def doc_path(url: str) -> str:
    """The page's path relative to the site root; a folder URL counts as its index.html."""
    path = urllib.parse.urlsplit(url).path.lstrip("/")
    return path + "index.html" if path == "" or path.endswith("/") else path


def grades(targets: list[str]) -> dict[str, int]:
    return {t: (2 if i == 0 else 1) for i, t in enumerate(targets)}


def metrics(ranked: list[str], targets: list[str]) -> dict:
    """success@3, reciprocal rank @10, nDCG@10 and the rank of the first target (or None)."""
    gain = grades(targets)
    top = ranked[:DEPTH]
    first = next((i + 1 for i, path in enumerate(top) if path in gain), None)
    dcg = sum((2 ** gain.get(path, 0) - 1) / math.log2(i + 2) for i, path in enumerate(top))
    ideal = sorted(gain.values(), reverse=True)[:DEPTH]
    idcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return {
        "rank": first,
        "success3": 1.0 if first is not None and first <= 3 else 0.0,
        "rr10": 1.0 / first if first else 0.0,
        "ndcg10": dcg / idcg if idcg else 0.0,
    }


# -- building the Caffeine index ---------------------------------------------------------------
def build(cluster, docs: Path, worker_threads: int) -> float:
    """Serve ``docs`` locally, crawl it through the real pipeline, wait until indexed."""
    from caffeine.percolator.engine_status import wait_until_quiescent
    from caffeine.percolator.worker import Worker
    from crawler.crawl import crawl
    from testweb import TestWeb

    application.install(cluster)
    started = time.monotonic()
    with TestWeb(directory=docs) as base_url, Worker(cluster, application, threads=worker_threads):
        report = crawl(cluster, [base_url + "/"], depth=100, delay=0.0, timeout=30.0,
                       max_bytes=4 * 1024 * 1024, workers=8)
        log(f"  crawled: {dict(report.counts())}; waiting until the observer chain is quiescent")
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=3600, poll_s=0.5)
    return time.monotonic() - started


def indexed_documents(cluster) -> dict[str, tuple[str, str]]:
    """{url: (title, text)} of every page Caffeine exports (canonicals), as it parsed them."""
    out = {}
    with cluster.begin() as txn:
        for row, cols in txn.scan(REPOSITORY, columns=[CLUSTER_STATE, DOC_PARSED], batch_size=256):
            if is_canonical(cols.get(CLUSTER_STATE)) and cols.get(DOC_PARSED):
                parsed = decode_document(cols[DOC_PARSED])
                out[row.decode()] = (parsed.get("title") or "", parsed.get("text") or "")
    return out


# -- the two engines ---------------------------------------------------------------------------
class Tantivy:
    """tantivy with its defaults over title + body, in memory."""

    _SYNTAX = re.compile(r"[+\-:\"()\[\]{}^~*\\!'<>=]")  # query-parser syntax, as plain text

    def __init__(self, documents: dict[str, tuple[str, str]]) -> None:
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("url", stored=True, tokenizer_name="raw")
        builder.add_text_field("title", stored=False)
        builder.add_text_field("body", stored=False)
        self.index = tantivy.Index(builder.build())
        writer = self.index.writer()
        for url, (title, text) in sorted(documents.items()):
            writer.add_document(tantivy.Document(url=url, title=title, body=text))
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()

    def search(self, q: str) -> list[str]:
        query = self.index.parse_query(self._SYNTAX.sub(" ", q), ["title", "body"])
        searcher = self.index.searcher()
        hits = searcher.search(query, DEPTH).hits
        return [searcher.doc(address)["url"][0] for _, address in hits]


class Caffeine:
    """Caffeine's ``/search`` over HTTP."""

    def __init__(self, port: int) -> None:
        self.port = port

    def search(self, q: str) -> list[str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("GET", "/search?" + urllib.parse.urlencode({"q": q, "size": DEPTH}))
        response = conn.getresponse()
        body = json.loads(response.read())
        conn.close()
        if response.status != 200:
            raise SystemExit(f"/search?q={q!r} answered {response.status}: {body}")
        return [hit["url"] for hit in body["results"]]


# -- report ------------------------------------------------------------------------------------
def evaluate(engine, queries: list[dict]) -> list[dict]:
    rows = []
    for item in queries:
        ranked = [doc_path(u) for u in engine.search(item["q"])]
        rows.append({**metrics(ranked, item["targets"]), "top": ranked[:3]})
    return rows


def mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=Path, default=DOCS, help=f"HTML tree to crawl (default {DOCS})")
    parser.add_argument("--queries", type=Path, default=QUERIES, help="judged queries (JSON)")
    parser.add_argument("--worker-threads", type=int, default=8, help="observer threads while building")
    parser.add_argument("--reuse", metavar="PREFIX", help="measure the index under this table prefix (no build)")
    parser.add_argument("--keep", action="store_true", help="keep the built tables (prints their prefix)")
    parser.add_argument("--top", action="store_true", help="also print each engine's top 3 per query")
    args = parser.parse_args()
    if not args.docs.is_dir():
        raise SystemExit(f"{args.docs} is missing: apt-get install python3.11-doc")
    queries = json.loads(args.queries.read_text())["queries"]
    missing = [t for q in queries for t in q["targets"] if not (args.docs / t).is_file()]
    if missing:
        raise SystemExit(f"targets not in {args.docs}: {missing}")

    prefix = args.reuse or f"bench_rel_{uuid.uuid4().hex[:6]}_"
    cluster = connect(table_prefix=prefix)
    build_s = None
    try:
        if not args.reuse:
            log(f"crawling {args.docs} into tables under {prefix} ...")
            build_s = build(cluster, args.docs, args.worker_threads)
            log(f"indexed in {build_s:.0f}s")
        documents = indexed_documents(cluster)
        log(f"{len(documents)} indexed documents; building the tantivy index over the same pages")
        stock = Tantivy(documents)
        port = free_port()
        server = start_server(prefix, port)
        try:
            ours = evaluate(Caffeine(port), queries)
        finally:
            server.terminate()
            server.wait(timeout=30)
        theirs = evaluate(stock, queries)
    finally:
        cluster.close()
        if not args.reuse and not args.keep:
            drop_tables(prefix)

    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "relevance.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["query", "engine", "rank", "success3", "rr10", "ndcg10", "top3"])
        for item, a, b in zip(queries, ours, theirs):
            for engine, r in (("caffeine", a), ("tantivy", b)):
                writer.writerow([item["q"], engine, r["rank"] or "", r["success3"], f"{r['rr10']:.4f}",
                                 f"{r['ndcg10']:.4f}", " ".join(r["top"])])

    print(f"\n{len(queries)} judged queries over {len(documents)} documents of {args.docs} "
          f"(identical pages in both engines)" + (f"; Caffeine indexed them in {build_s:.0f} s" if build_s else ""))
    print("\nrank = position of the first target in the top 10 (- = none)\n")
    header = "| # | query | Caffeine rank | tantivy rank | Caffeine nDCG@10 | tantivy nDCG@10 |"
    if args.top:
        header += " Caffeine top 3 | tantivy top 3 |"
    print(header)
    print("|---:|---|---:|---:|---:|---:|" + ("---|---|" if args.top else ""))
    for i, (item, a, b) in enumerate(zip(queries, ours, theirs), start=1):
        line = (f"| {i} | {item['q']} | {a['rank'] or '-'} | {b['rank'] or '-'} | "
                f"{a['ndcg10']:.3f} | {b['ndcg10']:.3f} |")
        if args.top:
            line += f" {', '.join(a['top'])} | {', '.join(b['top'])} |"
        print(line)
    print("\n| engine | success@3 | MRR@10 | nDCG@10 |")
    print("|---|---:|---:|---:|")
    for name, rows in (("Caffeine", ours), ("tantivy (default BM25, title+body)", theirs)):
        print(f"| {name} | {mean(rows, 'success3'):.3f} | {mean(rows, 'rr10'):.3f} | {mean(rows, 'ndcg10'):.3f} |")
    command = "python3 bench/bench_relevance.py " + " ".join(sys.argv[1:])
    print(f"\nCommand: `{command.strip()}`" + (f" (tables kept under prefix {prefix})" if args.keep else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
