"""Sub-commands of the batch baseline: ``batch``, ``verify``, ``bench``.

Layer: spark. Its commands, registered by the entry point ``90-spark`` of the group
``caffeine.commands`` (``pyproject.toml``); Spark is imported only when one of these commands
runs, so the rest of the CLI starts without a JVM.
"""

from __future__ import annotations

import argparse
import sys

from caffeine.config import PROJECT_ROOT, load_settings
from caffeine.errors import CaffeineError


class BenchUnavailable(CaffeineError):
    pass


class SparkNotInstalled(CaffeineError):
    """PySpark is an optional extra; the commands that run Spark say how to install it."""


def require_pyspark(command: str) -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise SparkNotInstalled(
            f"`caffeine {command}` runs Spark, and PySpark is not installed: "
            "pip install 'caffeine[spark]' (from a checkout: python3 -m pip install -e '.[spark]')"
        ) from None


# Examples shown under each command's --help.
EXAMPLES = {
    "batch": "examples:\n  caffeine batch && caffeine verify\n  caffeine batch --master spark://host:7077 --partitions 64\n",
    "verify": "examples:\n  caffeine verify\n  caffeine verify --no-wait --limit 100\n",
    "bench": "examples:\n  caffeine bench --pages 2000 --rates 1,10 --period 60    # a quick run\n  caffeine bench --csv out.csv --png out.png\n",
}


def register(subparsers) -> None:
    from spark.job import build_parser

    p = subparsers.add_parser(
        "batch", epilog=EXAMPLES["batch"],
        help="recompute the whole index from repository with Spark (writes batch_* tables)",
        description="Recompute documents, link inversion, duplicate clusters and the inverted index "
                    "from the repository table at one snapshot, with PySpark; write batch_* tables.",
    )
    build_parser(p)
    p.set_defaults(func=cmd_batch)

    p = subparsers.add_parser(
        "verify", epilog=EXAMPLES["verify"],
        help="compare the incremental index with a batch recomputation at one snapshot (exit 1 on any difference)",
    )
    p.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    p.add_argument("--master", default=None, help="Spark master URL (default local[*])")
    p.add_argument("--partitions", type=int, default=None, help="row ranges read in parallel")
    p.add_argument("--limit", type=int, default=20, help="differences listed one by one (default 20)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for quiescence (default 600)")
    p.add_argument("--no-wait", action="store_true", help="do not wait for the observers to be quiescent")
    p.set_defaults(func=cmd_verify)

    p = subparsers.add_parser(
        "bench", epilog=EXAMPLES["bench"],
        help="incremental vs periodic batch: latency and CPU per page against crawl rate (paper's Figure 7)",
        description="Runs bench/bench_batch.py (its docstring explains the model): a table on stdout, "
                    "bench/results/batch.csv and batch.png, progress on stderr.",
    )
    add_bench_arguments(p)
    p.set_defaults(func=cmd_bench)


def add_bench_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of bench/bench_batch.py (shared with ``caffeine bench``)."""
    results = PROJECT_ROOT / "bench" / "results"
    p.add_argument("--pages", type=int, default=20000, help="repository size (default 20000; quick: 2000)")
    p.add_argument("--period", type=float, default=300.0, help="seconds per crawl period (default 300)")
    p.add_argument("--rates", default="1,5,10,20,40,80",
                   help="percent of the repository changed per period (default 1,5,10,20,40,80)")
    p.add_argument("--periods-per-rate", type=int, default=1, help="crawl window per rate, in periods (default 1)")
    p.add_argument("--workers", type=int, default=2, help="observer worker processes (default 2)")
    p.add_argument("--threads", type=int, default=8, help="observer threads per worker (default 8)")
    p.add_argument("--batch-runs", type=int, default=2, help="batches back to back in one Spark session (default 2)")
    p.add_argument("--master", default="local[*]", help="Spark master for the batch job (default local[*])")
    p.add_argument("--partitions", type=int, default=None, help="row ranges the batch job reads in parallel")
    p.add_argument("--poll", type=float, default=0.25, help="seconds between index polls (default 0.25)")
    p.add_argument("--drain-timeout", type=float, default=None,
                   help="seconds to wait for a rate's pages after its crawl (default 5 periods)")
    p.add_argument("--idle-seconds", type=float, default=15.0,
                   help="seconds the workers' and servers' idle CPU is measured (default 15)")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--prefix", default=None, help="table prefix (default: a fresh bench_fig7_<id>_)")
    p.add_argument("--keep", action="store_true", help="keep the tables afterwards")
    p.add_argument("--csv", default=str(results / "batch.csv"))
    p.add_argument("--png", default=str(results / "batch.png"))
    return p


def cmd_batch(args) -> int:
    require_pyspark("batch")
    from spark.job import main

    return main(args=args)


def cmd_verify(args) -> int:
    require_pyspark("verify")
    from spark.verify import verify

    report = verify(
        load_settings(table_prefix=args.prefix),
        master=args.master,
        partitions=args.partitions,
        wait=not args.no_wait,
        timeout_s=args.timeout,
        limit=args.limit,
        progress=lambda message: print(message, file=sys.stderr, flush=True),
    )
    print(report.format())
    return 0 if report.clean else 1


def cmd_bench(args) -> int:
    import importlib.util

    require_pyspark("bench")
    script = PROJECT_ROOT / "bench" / "bench_batch.py"
    if not script.exists():
        raise BenchUnavailable(f"{script} not found: run the benchmark from a checkout of the repository")
    spec = importlib.util.spec_from_file_location("bench_batch", script)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_batch"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.main(args=args)
