"""Plot bench_batch.py's results like the paper's Figure 7: latency against crawl rate.

    python3 bench/plot_batch.py [bench/results/batch.csv] [bench/results/batch.png]

Both curves on a log y axis: the median latency with 5th–95th percentile bars (incremental: per
page, measured; batch: per page under back-to-back batches of the measured duration). A
dashed line marks the crawl rate at which the incremental workers saturate (their full-load
pages/s), a dotted one the period.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def plot(rows: list[dict], path: str | Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    rows = [{k: float(v) for k, v in row.items()} for row in rows]
    x = [r["rate_pct"] for r in rows]
    first = rows[0]
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)

    def curve(prefix, label, style, color):
        mid = [r[f"{prefix}_p50_s"] for r in rows]
        lo = [max(r[f"{prefix}_p50_s"] - r[f"{prefix}_p5_s"], 0) for r in rows]
        hi = [max(r[f"{prefix}_p95_s"] - r[f"{prefix}_p50_s"], 0) for r in rows]
        ax.errorbar(x, mid, yerr=[lo, hi], fmt=style, color=color, capsize=4, linewidth=2, markersize=6, label=label)

    curve("incr", "incremental (observers, per page)", "o--", "tab:blue")
    curve("batch", f"batch (Spark, back to back, D = {first['batch_duration_s']:.0f}s)", "s-", "tab:red")
    saturation = first["incr_capacity_pages_per_s"] * first["period_s"] / first["repository_pages"] * 100
    ax.axvline(saturation, color="tab:blue", linestyle=":", linewidth=1)
    ax.annotate(f"incremental saturates\n~{saturation:.0f}%/period\n({first['incr_capacity_pages_per_s']:.1f} pages/s)",
                xy=(saturation, 0.03), xycoords=("data", "axes fraction"), va="bottom", ha="right", fontsize=8,
                color="tab:blue")
    ax.axhline(first["period_s"], color="grey", linestyle=":", linewidth=1)
    ax.annotate(f"period {first['period_s']:g}s", xy=(0.01, first["period_s"]), xycoords=("axes fraction", "data"),
                va="bottom", fontsize=8, color="grey")
    missing = [(r["rate_pct"], int(r["incr_not_indexed"])) for r in rows if r["incr_not_indexed"] > 0]
    for rate, n in missing:
        ax.annotate(f"{n} not indexed", xy=(rate, max(r["incr_p95_s"] for r in rows if r["rate_pct"] == rate)),
                    fontsize=7, color="tab:blue", ha="center", va="bottom")
    ax.set_yscale("log")
    ax.set_xscale("log")
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlabel(f"crawl rate (% of the repository changed per {first['period_s']:g}s period, log)")
    ax.set_ylabel("latency from crawl to index (s, log)")
    ax.set_title(f"Incremental vs batch indexing, {int(first['repository_pages']):,} pages (cf. Percolator Fig. 7)",
                 fontsize=10)
    ax.set_xticks(x)
    ax.set_xticklabels([f"{v:g}" for v in x])
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="center left")
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str]) -> int:
    source = Path(argv[0]) if argv else RESULTS / "batch.csv"
    target = Path(argv[1]) if len(argv) > 1 else source.with_suffix(".png")
    with open(source, newline="") as f:
        rows = list(csv.DictReader(f))
    plot(rows, target)
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
