"""CPU per page of the observer chain's pure work: what the document, inlinks and export
observers compute for a page, without storage.

Over real HTML pages (Debian's python3.11-doc by default): the document observer's ``derive``
(parse, record, outlinks, fingerprint), the inlinks observer's ``anchors_value`` and the
export observer's ``plan_export`` of the stored record (postings, impact levels, docstats),
the latter twice per page as in the chain (a new document's export, then the one its anchor
text starts). Reports ms of CPU per page for each stage, median of ``--repeats``.

    python3 bench/bench_derive.py [--pages 150] [--repeats 5] [--baseline DIR]

``--baseline DIR``: another checkout (``git worktree add /tmp/before <commit>``) measured in
alternation with this one, each repeat in fresh processes, so both see the same machine load;
prints both medians and their ratio. No HBase needed.
"""

from __future__ import annotations

import argparse
import glob
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = "/usr/share/doc/python3.11/html"
STAGES = ("document", "inlinks", "export", "total")


def measure(pages_dir: str, pages: int) -> dict[str, float]:
    """ms of CPU per page for each stage, in this process (the checkout first on sys.path)."""
    from caffeine.index.documents import anchors_value, derive
    from caffeine.index.schema import decode_anchors, decode_document
    from caffeine.observers.export import plan_export

    files = sorted(glob.glob(f"{pages_dir}/**/*.html", recursive=True))
    files = files[::max(1, len(files) // pages)][:pages]
    bodies = [(f"http://docs.test/{Path(f).relative_to(pages_dir)}", Path(f).read_bytes()) for f in files]
    meta = {"status": 200, "content_type": "text/html"}
    inlinks = {"in:http://a.test/x": b"python docs", "in:http://b.test/y": b"the reference manual"}
    out = dict.fromkeys(STAGES, 0.0)
    for url, body in bodies:
        t0 = time.process_time()
        parsed, _, fp, _ = derive(url, meta, body)
        t1 = time.process_time()
        anchors = anchors_value(inlinks)
        t2 = time.process_time()
        doc = decode_document(parsed)
        state, *_ = plan_export(url, doc, fp, None, 0, 1, None)
        plan_export(url, doc, fp, state, 1, 2, decode_anchors(anchors))
        t3 = time.process_time()
        out["document"] += t1 - t0
        out["inlinks"] += t2 - t1
        out["export"] += t3 - t2
    out["total"] = out["document"] + out["inlinks"] + out["export"]
    return {stage: 1000 * seconds / len(bodies) for stage, seconds in out.items()}


def run_in(checkout: Path, pages_dir: str, pages: int) -> dict[str, float]:
    code = (f"import sys, json; sys.path.insert(0, {str(checkout)!r}); sys.path.insert(1, {str(ROOT / 'bench')!r}); "
            f"from bench_derive import measure; print(json.dumps(measure({pages_dir!r}, {pages})))")
    return json.loads(subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                                     cwd=checkout).stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pages-dir", default=DOCS, help="a directory of .html files")
    parser.add_argument("--baseline", type=Path, help="another checkout, measured in alternation")
    args = parser.parse_args()
    checkouts = {"this": ROOT} if args.baseline is None else {"baseline": args.baseline.resolve(), "this": ROOT}
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for repeat in range(args.repeats):
        order = list(checkouts.items()) if repeat % 2 == 0 else list(reversed(checkouts.items()))
        for name, checkout in order:
            runs[name].append(run_in(checkout, args.pages_dir, args.pages))
            print(f"repeat {repeat + 1} {name}: {runs[name][-1]}", file=sys.stderr)
    print("| checkout | " + " | ".join(f"{s} ms/page" for s in STAGES) + " |")
    print("|---|" + "---:|" * len(STAGES))
    medians = {name: {s: statistics.median(r[s] for r in rs) for s in STAGES} for name, rs in runs.items()}
    for name, m in medians.items():
        print(f"| {name} | " + " | ".join(f"{m[s]:.2f}" for s in STAGES) + " |")
    if args.baseline is not None:
        ratios = {s: statistics.median(t[s] / b[s] for t, b in zip(runs["this"], runs["baseline"])) for s in STAGES}
        print("| this / baseline (median of per-repeat ratios) | " + " | ".join(f"{ratios[s]:.3f}" for s in STAGES) + " |")
    print(f"\nreproduce: python3 bench/bench_derive.py --pages {args.pages} --repeats {args.repeats}"
          + (f" --baseline {args.baseline}" if args.baseline else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
