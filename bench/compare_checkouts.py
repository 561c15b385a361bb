"""One benchmark, run from several checkouts in turn, in one run: before and after, side by side.

The machine is shared and noisy, so a comparison is only fair within one run: this runs the
same bench script with the same arguments from each checkout (a git worktree of an older
commit, this one, ...), alternating them for ``--rounds`` rounds, reads the CSV each run
writes into its checkout's ``bench/results/``, and prints for every numeric column the median
per checkout and its ratio to the first checkout's.

    git worktree add /tmp/before <commit>
    python3 bench/compare_checkouts.py --csv pipeline.csv --rounds 2 \\
        --checkout before=/tmp/before --checkout after=. \\
        -- bench_pipeline.py --pages 5000 --workers 2 --warmup-pages 1000 --committers coprocessor

A checkout may carry environment settings after its path (``NAME=PATH,VAR=VALUE,...``): a
runtime of its own (``CAFFEINE_HOME`` and ports, when its coprocessor jar differs), or a
setting to compare (``after-nobatch=.,CAFFEINE_BATCHING=false``). Each run's own output goes
to ``bench/results/compare-<name>-<round>.log``; rows are keyed by the CSV's non-numeric
columns (e.g. worker processes and committer), or by the columns ``--key`` names where a CSV
also has columns that differ from run to run (bench_transactions.py: ``--key operation,threads``).
Results: ``bench/results/compare.csv``.
"""

from __future__ import annotations

import argparse
import csv
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def parse_checkout(spec: str) -> tuple[str, Path, dict[str, str]]:
    name, _, rest = spec.partition("=")
    parts = rest.split(",")
    env = dict(part.split("=", 1) for part in parts[1:] if part)
    return name, Path(parts[0]).resolve(), env


def run_one(name: str, checkout: Path, env: dict[str, str], script_args: list[str], csv_name: str,
            log: Path) -> list[dict]:
    """Run the bench from ``checkout``; its CSV rows."""
    result_csv = checkout / "bench" / "results" / csv_name
    if result_csv.exists():
        result_csv.unlink()
    command = [sys.executable, str(checkout / "bench" / script_args[0]), *script_args[1:]]
    full_env = dict(os.environ, **env)
    # The checkout's own packages first, whatever is installed.
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(command, cwd=checkout, env=full_env, stdout=out, stderr=subprocess.STDOUT)
    print(f"  {name}: exit {proc.returncode} in {time.monotonic() - started:.0f}s (log {log})", file=sys.stderr)
    if proc.returncode != 0 or not result_csv.exists():
        raise SystemExit(f"{name}: the bench failed; see {log}")
    with open(result_csv) as f:
        rows = list(csv.DictReader(f))
    shutil.copy(result_csv, log.with_suffix(".csv"))
    return rows


def numeric(value: str) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", required=True, metavar="NAME=PATH[,VAR=VALUE...]")
    parser.add_argument("--csv", required=True, help="the CSV the bench writes into bench/results/")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--key", default="",
                        help="comma-separated columns naming a row (default: every non-numeric column)")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS... (a script in bench/)")
    args = parser.parse_args()
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    checkouts = [parse_checkout(spec) for spec in args.checkout]
    out_dir = ROOT / "bench" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[dict]] = {name: [] for name, _, _ in checkouts}
    for round_no in range(1, args.rounds + 1):
        order = checkouts if round_no % 2 else list(reversed(checkouts))  # no side always first
        print(f"round {round_no}", file=sys.stderr)
        for name, path, env in order:
            log = out_dir / f"compare-{name}-{round_no}.log"
            for row in run_one(name, path, env, script, args.csv, log):
                results[name].append(row)
    first = checkouts[0][0]
    keys = ([k for k in args.key.split(",") if k] if args.key
            else [k for k, v in results[first][0].items() if numeric(v) is None])
    columns = [k for k, v in results[first][0].items() if numeric(v) is not None and k not in keys]
    table = []
    for row_key in sorted({tuple(r[k] for k in keys) for r in results[first]}):
        for column in columns:
            line = {"row": " ".join(row_key), "metric": column}
            base = None
            for name, _, _ in checkouts:
                values = [numeric(r.get(column)) for r in results[name] if tuple(r[k] for k in keys) == row_key]
                values = [v for v in values if v is not None]
                median = statistics.median(values) if values else None
                line[name] = median
                if name == first:
                    base = median
                elif median is not None and base:
                    line[f"{name}/{first}"] = median / base
            table.append(line)
    names = [name for name, _, _ in checkouts]
    header = ["row", "metric", *names, *[f"{n}/{first}" for n in names[1:]]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for line in table:
        cells = [line["row"], line["metric"]] + [
            "" if line.get(h) is None else f"{line[h]:.3g}" for h in header[2:]
        ]
        print("| " + " | ".join(cells) + " |")
    with open(out_dir / "compare.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(table)
    print(f"\nmedians of {args.rounds} rounds per checkout; reproduce: python3 bench/compare_checkouts.py "
          + " ".join(f"--checkout {spec}" for spec in args.checkout)
          + f" --csv {args.csv} --rounds {args.rounds}" + (f" --key {args.key}" if args.key else "")
          + " -- " + " ".join(script))
    return 0


if __name__ == "__main__":
    sys.exit(main())
