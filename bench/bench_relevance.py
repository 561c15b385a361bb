"""Relevance benchmark: Caffeine's ranking against a stock BM25 engine on real documentation sets.

The corpora (``relevance_corpora``) are real sites nobody here wrote, installed from Debian's
packages: Python's and Django's manuals (Sphinx), the JDK's ``java.base`` API (Javadoc), Rust's
``std`` (rustdoc) and cppreference's C++ pages (a wiki). Each corpus's judged queries were
derived mechanically from its own index (``relevance_queries``: Sphinx's genindex, Javadoc's
index-files, rustdoc's search index, the wiki's symbol index; 250 per corpus with a fixed
seed) and are committed in ``bench/data/relevance_<corpus>.json``. Python's manual also keeps
its 62 queries written by hand when the ranking was first developed
(``bench/data/relevance_python_docs.json``), reported as a set of their own ("python-written").

Both engines index identical pages:

* **Caffeine** through its real pipeline: the corpus's served pages (``served_tree``) are served
  as a local web (``testweb.TestWeb``), crawled from the corpus's start page with the observer
  chain running (in-process workers) until quiescent, then queried through ``caffeine serve``'s
  ``/search`` over HTTP, ``size=10``.
* **tantivy** (PyPI ``tantivy``) with its defaults: an in-memory index with a ``title`` and a
  ``body`` text field (default tokenizer), BM25 as shipped, the query parsed over both fields
  by its query parser (OR of the words, as it defaults to). The documents are exactly the ones
  Caffeine indexed (the canonical of every duplicate cluster), with the title and text
  Caffeine's parser extracted, so the comparison is about ranking alone.

Metrics per query and per corpus (mean over its queries): success@3 (a target in the top 3),
MRR@10 (1 / rank of the first target within the top 10, else 0) and nDCG@10 with graded
targets (the first target of a query grade 2, the others grade 1). A folder URL (``.../``)
counts as its ``index.html`` (they serve the same bytes). Per corpus, the difference in MRR@10
gets a paired randomization test and a bootstrap interval (``relevance_stats``).

    python3 bench/bench_relevance.py --install           # apt-get install the corpora (root)
    python3 bench/bench_relevance.py                     # every installed corpus
    python3 bench/bench_relevance.py --corpus rust       # one (repeatable)
    python3 bench/bench_relevance.py --corpus python --keep        # keep its index; prints the prefix
    python3 bench/bench_relevance.py --corpus python --reuse PREFIX  # measure an index built earlier
    python3 bench/bench_relevance.py --reuse P1 --reuse P2 ...     # several (prefixes printed by --keep)

Needs the local runtime (``caffeine up``). Writes ``bench/results/relevance.csv`` (per query)
and ``bench/results/relevance_summary.csv`` (per corpus).
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
from relevance_corpora import Corpus, by_name, corpus_of_prefix, install, served_tree, table_prefix  # noqa: E402
from relevance_stats import paired_test  # noqa: E402

WRITTEN = ROOT / "bench" / "data" / "relevance_python_docs.json"   # python's hand-written set
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
def build(cluster, docs: Path, seed: str, worker_threads: int) -> float:
    """Serve ``docs`` locally, crawl it from page ``seed`` through the real pipeline, wait until indexed."""
    from caffeine.percolator.engine_status import wait_until_quiescent
    from caffeine.percolator.worker import Worker
    from crawler.crawl import crawl
    from testweb import TestWeb

    application.install(cluster)
    started = time.monotonic()
    with TestWeb(directory=docs) as base_url, Worker(cluster, application, threads=worker_threads):
        report = crawl(cluster, [f"{base_url}/{seed}"], depth=100, delay=0.0, timeout=30.0,
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


_OPERATOR = re.compile(r'"|(?<!\S)-+|(?<!\S)site:')


def plain_words(q: str) -> str:
    """A judged query as Caffeine searches it: plain words, as tantivy's is searched. Its
    operators are neutralised (quotes dropped, a leading ``-`` or a ``site:`` of a chunk taken
    as text), so an index entry such as ``-V command line option`` asks for the words, not for
    pages without "v"."""
    return _OPERATOR.sub(" ", q)


class Caffeine:
    """Caffeine's ``/search`` over HTTP, queried with ``plain_words``."""

    def __init__(self, port: int) -> None:
        self.port = port

    def search(self, q: str) -> list[str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        conn.request("GET", "/search?" + urllib.parse.urlencode({"q": plain_words(q), "size": DEPTH}))
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


def query_sets(corpus: Corpus) -> list[tuple[str, list[dict]]]:
    """(set name, queries) of ``corpus``: its derived set, and python's written one."""
    if not corpus.queries_file.is_file():
        raise SystemExit(f"{corpus.queries_file} is missing: python3 bench/relevance_queries.py --corpus {corpus.name}")
    sets = [(corpus.name, json.loads(corpus.queries_file.read_text())["queries"])]
    if corpus.name == "python":
        sets.append(("python-written", json.loads(WRITTEN.read_text())["queries"]))
    return sets


def measure(corpus: Corpus, args, reuse: str | None) -> list[dict]:
    """Build (or, with ``reuse``, take the index under that prefix) ``corpus``'s index and judge
    both engines on its query sets."""
    sets = query_sets(corpus)
    docs = served_tree(corpus)
    missing = [t for _, queries in sets for q in queries for t in q["targets"] if not (docs / t).is_file()]
    if missing:
        raise SystemExit(f"{corpus.name}: targets not among the served pages: {missing[:5]}")
    prefix = reuse or table_prefix(corpus, uuid.uuid4().hex[:6])
    cluster = connect(table_prefix=prefix)
    build_s = None
    try:
        if not reuse:
            log(f"{corpus.name}: crawling {docs} from {corpus.seed} into tables under {prefix} ...")
            build_s = build(cluster, docs, corpus.seed, args.worker_threads)
            log(f"{corpus.name}: indexed in {build_s:.0f}s")
        documents = indexed_documents(cluster)
        log(f"{corpus.name}: {len(documents)} indexed documents; building the tantivy index over the same pages")
        stock = Tantivy(documents)
        port = free_port()
        server = start_server(prefix, port)
        try:
            ours = [evaluate(Caffeine(port), queries) for _, queries in sets]
        finally:
            server.terminate()
            server.wait(timeout=30)
        theirs = [evaluate(stock, queries) for _, queries in sets]
    finally:
        cluster.close()
        if args.keep:
            log(f"{corpus.name}: tables kept under prefix {prefix}")
        elif not reuse:
            drop_tables(prefix)
    return [{"corpus": corpus, "set": name, "queries": queries, "documents": len(documents), "build_s": build_s,
             "caffeine": a, "tantivy": b} for (name, queries), a, b in zip(sets, ours, theirs)]


def write_csv(results: list[dict]) -> None:
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "relevance.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["corpus", "query", "targets", "engine", "rank", "success3", "rr10", "ndcg10", "top3"])
        for r in results:
            for item, a, b in zip(r["queries"], r["caffeine"], r["tantivy"]):
                for engine, row in (("caffeine", a), ("tantivy", b)):
                    writer.writerow([r["set"], item["q"], " ".join(item["targets"]), engine, row["rank"] or "",
                                     row["success3"], f"{row['rr10']:.4f}", f"{row['ndcg10']:.4f}", " ".join(row["top"])])
    with open(out / "relevance_summary.csv", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["corpus", "role", "documents", "queries", "engine", "success3", "mrr10", "ndcg10",
                         "mrr10_difference", "p_value", "ci_low", "ci_high"])
        for r in results:
            t = r["test"]
            for engine in ("caffeine", "tantivy"):
                rows = r[engine]
                writer.writerow([r["set"], r["corpus"].role, r["documents"], len(rows), engine,
                                 f"{mean(rows, 'success3'):.4f}", f"{mean(rows, 'rr10'):.4f}", f"{mean(rows, 'ndcg10'):.4f}",
                                 f"{t.difference:.4f}", f"{t.p_value:.4f}", f"{t.ci_low:.4f}", f"{t.ci_high:.4f}"])


def print_queries(r: dict, top: bool) -> None:
    print(f"\n{r['set']}: rank = position of the first target in the top 10 (- = none)\n")
    header = "| # | query | Caffeine rank | tantivy rank | Caffeine nDCG@10 | tantivy nDCG@10 |"
    if top:
        header += " Caffeine top 3 | tantivy top 3 |"
    print(header)
    print("|---:|---|---:|---:|---:|---:|" + ("---|---|" if top else ""))
    for i, (item, a, b) in enumerate(zip(r["queries"], r["caffeine"], r["tantivy"]), start=1):
        line = f"| {i} | {item['q']} | {a['rank'] or '-'} | {b['rank'] or '-'} | {a['ndcg10']:.3f} | {b['ndcg10']:.3f} |"
        if top:
            line += f" {', '.join(a['top'])} | {', '.join(b['top'])} |"
        print(line)


def print_summary(results: list[dict]) -> None:
    print("\n| corpus | role | documents | queries | success@3 Caffeine / tantivy | MRR@10 Caffeine / tantivy "
          "| nDCG@10 Caffeine / tantivy | MRR@10 difference (paired) |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for r in results:
        a, b = r["caffeine"], r["tantivy"]
        print(f"| {r['set']} | {r['corpus'].role} | {r['documents']} | {len(a)} | "
              f"{mean(a, 'success3'):.3f} / {mean(b, 'success3'):.3f} | {mean(a, 'rr10'):.3f} / {mean(b, 'rr10'):.3f} | "
              f"{mean(a, 'ndcg10'):.3f} / {mean(b, 'ndcg10'):.3f} | {r['test'].describe()} |")
    derived = [r for r in results if r["set"] == r["corpus"].name]
    if len(derived) > 1:
        for role in ("develop", "holdout", None):
            group = [r for r in derived if role is None or r["corpus"].role == role]
            if not group:
                continue
            avg = {k: sum(mean(r[e], m) for r in group) / len(group)
                   for k, (e, m) in {"cs": ("caffeine", "success3"), "ts": ("tantivy", "success3"),
                                     "cm": ("caffeine", "rr10"), "tm": ("tantivy", "rr10"),
                                     "cn": ("caffeine", "ndcg10"), "tn": ("tantivy", "ndcg10")}.items()}
            print(f"| mean over {role or 'all'} corpora ({len(group)}) | | | | {avg['cs']:.3f} / {avg['ts']:.3f} | "
                  f"{avg['cm']:.3f} / {avg['tm']:.3f} | {avg['cn']:.3f} / {avg['tn']:.3f} | Δ {avg['cm'] - avg['tm']:+.3f} |")


def require_yardstick() -> None:
    """Stop at once, saying how to install it, when tantivy is missing: it is needed only after
    a corpus is built, minutes in."""
    try:
        import tantivy  # noqa: F401
    except ImportError:
        raise SystemExit("tantivy, the yardstick, is not installed: python3 -m pip install -e '.[bench]'") from None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", help="a corpus to measure (repeatable; default: every installed one)")
    parser.add_argument("--install", action="store_true", help="apt-get install the corpora's packages first (root)")
    parser.add_argument("--worker-threads", type=int, default=8, help="observer threads while building")
    parser.add_argument("--reuse", metavar="PREFIX", action="append", default=[],
                        help="measure the index under this table prefix instead of building one (repeatable: "
                             "a prefix printed by --keep names its corpus)")
    parser.add_argument("--keep", action="store_true", help="keep the built tables (prints their prefixes)")
    parser.add_argument("--per-query", action="store_true", help="print every query's ranks")
    parser.add_argument("--top", action="store_true", help="with --per-query: each engine's top 3 too")
    args = parser.parse_args()
    require_yardstick()
    corpora = by_name(args.corpus)
    if args.install:
        install(corpora)
    reuse = {}
    for prefix in args.reuse:
        owner = corpus_of_prefix(prefix, corpora) or (corpora[0] if len(corpora) == 1 else None)
        if owner is None:
            raise SystemExit(f"--reuse {prefix}: which corpus is it? (a prefix printed by --keep, or one --corpus)")
        reuse[owner.name] = prefix
    absent = [c for c in corpora if not c.installed()]
    if args.corpus and absent:
        raise SystemExit("not installed: " + ", ".join(f"{c.name} ({c.package})" for c in absent)
                         + "; --install installs them")
    for c in absent:
        log(f"{c.name}: {c.package} is not installed; skipped (--install installs it)")
    results = []
    started = time.monotonic()
    for corpus in (c for c in corpora if c.installed()):
        for r in measure(corpus, args, reuse.get(corpus.name)):
            r["test"] = paired_test([x["rr10"] for x in r["caffeine"]], [x["rr10"] for x in r["tantivy"]])
            results.append(r)
    write_csv(results)
    if args.per_query:
        for r in results:
            print_queries(r, args.top)
    builds = ", ".join(f"{r['set']} {r['build_s']:.0f} s" for r in results
                       if r["build_s"] and r["set"] == r["corpus"].name)  # one build per corpus
    print(f"\nEach corpus's pages are identical in both engines; Caffeine built them through its pipeline "
          f"({builds}); {time.monotonic() - started:.0f} s in all.")
    print_summary(results)
    command = "python3 bench/bench_relevance.py " + " ".join(sys.argv[1:])
    print(f"\nCommand: `{command.strip()}`; per query: bench/results/relevance.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
