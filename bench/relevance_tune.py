"""Choosing a ranking change across corpora: candidate formulas judged by cross-validation.

``bench_relevance.py --keep`` leaves each corpus's index in HBase. This script ranks every
corpus's judged queries again, in process, with the real search engine (``caffeine.search``
over whole posting lists: its cold path, whose stored impact levels bake today's formula in,
is off, and so is the ranking cache) under each candidate ``Similarity``, and prints per
corpus MRR@10 and success@3 per candidate, the means over the develop and holdout halves
(``relevance_corpora``), and a leave-one-corpus-out cross-validation: for each corpus, the
candidate that does best on the other corpora, and what it scores on the one left out. A
candidate is kept only where that held-out figure improves; never a setting per corpus.

    python3 bench/relevance_tune.py --reuse PREFIX ... --candidate base \\
        --candidate "beta=0.5" --candidate "k1=1.6,title=5"

A candidate names the ``Similarity`` fields it changes: ``k1``, ``W`` (prior weight), ``K``,
``alpha``, ``beta`` (the title clause), ``gamma`` (a qualified name's qualifier), and per field weight or b:
``body``/``title``/``anchor``/``url`` and ``b_body``/``b_title``/``b_anchor``/``b_url``;
``base`` changes nothing.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import caffeine.search.matching as matching_module  # noqa: E402
import caffeine.search.ranking as ranking_module  # noqa: E402
from bench_relevance import doc_path, mean, metrics, plain_words, query_sets  # noqa: E402
from caffeine.index.scoring import FIELDS, SIMILARITY, Similarity  # noqa: E402
from caffeine.percolator import connect  # noqa: E402
from caffeine.search import IndexReader, QueryError, SearchSettings, parse_query  # noqa: E402
from relevance_corpora import corpus_of_prefix  # noqa: E402


def candidate(spec: str) -> tuple[str, Similarity]:
    if spec == "base":
        return spec, SIMILARITY
    weights, bs = list(SIMILARITY.field_weights), list(SIMILARITY.field_b)
    changes = {}
    for part in spec.split(","):
        key, _, value = part.partition("=")
        key, number = key.strip(), float(value)
        if key in FIELDS:
            weights[FIELDS.index(key)] = number
        elif key.startswith("b_") and key[2:] in FIELDS:
            bs[FIELDS.index(key[2:])] = number
        elif key in ("k1", "W", "K", "alpha", "beta", "gamma"):
            changes[{"k1": "k1", "W": "prior_weight", "K": "prior_k", "alpha": "proximity_alpha",
                     "beta": "title_clause", "gamma": "qualifier_weight"}[key]] = number
        else:
            raise SystemExit(f"candidate {spec!r}: unknown parameter {key!r}")
    return spec, dataclasses.replace(SIMILARITY, field_weights=tuple(weights), field_b=tuple(bs), **changes)


def use(similarity: Similarity) -> None:
    """Rank with ``similarity`` from now on (the engine's modules read the name at call time)."""
    ranking_module.SIMILARITY = similarity
    matching_module.SIMILARITY = similarity


def judge(reader: IndexReader, queries: list[dict], corpus_stats) -> list[dict]:
    rows = []
    for item in queries:
        try:
            matched = reader.rank(parse_query(plain_words(item["q"])), 10, corpus_stats)
            ranked = [doc_path(h.hit.url) for h in matched.hits]
        except QueryError:
            ranked = []
        rows.append(metrics(ranked, item["targets"]))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reuse", action="append", required=True, metavar="PREFIX",
                        help="a corpus's index kept by bench_relevance.py --keep (repeatable)")
    parser.add_argument("--candidate", action="append", default=[], help="a candidate (repeatable; see above)")
    args = parser.parse_args()
    candidates = [candidate(s) for s in (args.candidate or ["base"])]
    if candidates[0][0] != "base":
        candidates.insert(0, candidate("base"))
    settings = SearchSettings(cold_width=0, ranking_cache_entries=0)
    scores: dict[tuple[str, str], list[dict]] = {}
    corpora = []
    for prefix in args.reuse:
        corpus = corpus_of_prefix(prefix)
        if corpus is None:
            raise SystemExit(f"--reuse {prefix}: not a prefix bench_relevance.py --keep printed")
        sets = query_sets(corpus)
        cluster = connect(table_prefix=prefix)
        reader = IndexReader(cluster, settings).start()
        try:
            for name, sim in candidates:
                use(sim)
                # The documents' field norms and priors under ``sim`` (the statistics keep the
                # ones computed at their scan while the index does not change).
                now = reader.corpus
                corpus_stats = dataclasses.replace(now, weights=ranking_module.corpus_weights(now.docs, now.avg_len))
                for set_name, queries in sets:
                    scores[(set_name, name)] = judge(reader, queries, corpus_stats)
        finally:
            use(SIMILARITY)
            reader.close()
            cluster.close()
        corpora.append(corpus)
        print(f"{corpus.name}: judged {len(candidates)} candidate(s)", file=sys.stderr, flush=True)

    names = [n for n, _ in candidates]
    sets = [s for s, _ in scores if _ == "base"]
    print("\n| corpus | role | " + " | ".join(f"{n} MRR@10 / s@3" for n in names) + " |")
    print("|---|---|" + "---:|" * len(names))
    role = {c.name: c.role for c in corpora}
    for s in sets:
        cells = [f"{mean(scores[(s, n)], 'rr10'):.3f} / {mean(scores[(s, n)], 'success3'):.3f}" for n in names]
        print(f"| {s} | {role.get(s, 'develop')} | " + " | ".join(cells) + " |")
    derived = [c.name for c in corpora]
    for group in ("develop", "holdout"):
        members = [c for c in derived if role[c] == group]
        if members:
            cells = [f"{statistics.fmean(mean(scores[(c, n)], 'rr10') for c in members):.3f}" for n in names]
            print(f"| mean, {group} ({len(members)}) | | " + " | ".join(cells) + " |")
    if len(derived) > 2:
        print("\nLeave one corpus out: the candidate best on the others (mean MRR@10), on the one left out")
        print("\n| left out | chosen on the others | its MRR@10 there | base there |")
        print("|---|---|---:|---:|")
        for out in derived:
            others = [c for c in derived if c != out]
            best = max(names, key=lambda n: statistics.fmean(mean(scores[(c, n)], "rr10") for c in others))
            print(f"| {out} | {best} | {mean(scores[(out, best)], 'rr10'):.3f} | {mean(scores[(out, 'base')], 'rr10'):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
