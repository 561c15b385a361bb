"""The batch job: read ``repository`` at one snapshot, recompute every index table, write it.

Layer: spark. The thin shell around ``spark.transforms`` and ``spark.hbase_io``.

    caffeine batch [--prefix P] [--master local[*]] [--partitions N]
    spark-submit spark/job.py [--prefix P] [--partitions N] ...      (see spark/README.md)

Steps: the driver opens a transaction (its start_ts is the snapshot; keeping it open holds back
garbage collection for the job's duration), samples the repository's row keys into N ranges,
and runs one Spark partition per range: each opens its own connection and reads its range at
that snapshot. ``spark.transforms.build_index`` turns the pages into the six logical tables,
which the executors write to the ``batch_*`` serving tables (recreated by each run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

if __name__ == "__main__" and __package__ in (None, ""):
    # ``spark-submit spark/job.py`` puts spark/ itself first on sys.path, where its module
    # names would shadow top-level ones; the repository root belongs there instead.
    _here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    sys.path.insert(0, os.path.dirname(_here))

from caffeine.config import Settings, load_settings  # noqa: E402

DEFAULT_MASTER = "local[*]"


@dataclass
class BatchReport:
    snapshot_ts: int
    partitions: int
    seconds: float
    stage_seconds: dict = field(default_factory=dict)
    written: dict = field(default_factory=dict)  # table -> [rows, cells]

    def summary(self) -> str:
        tables = ", ".join(f"{t} {rows:,} rows/{cells:,} cells" for t, (rows, cells) in self.written.items())
        stages = ", ".join(f"{k} {v:.1f}s" for k, v in self.stage_seconds.items())
        return (f"batch at snapshot {self.snapshot_ts} over {self.partitions} row ranges: {self.seconds:.1f}s "
                f"({stages}); wrote {tables}")


def spark_session(master: str | None = None, app_name: str = "caffeine-batch", conf: dict | None = None,
                  settings: Settings | None = None):
    """A SparkSession (the active one if there is one). ``local[*]`` by default.

    Python workers run this interpreter (so they import the same caffeine); in local mode they
    also get this process's CAFFEINE_* environment through ``spark.executorEnv.*``. On a cluster
    set those with ``--conf spark.executorEnv.CAFFEINE_...=`` (spark/README.md). A standalone
    master on this machine (``caffeine spark up``'s, or any ``spark://127.0.0.1:...``) gets
    ``caffeine.runtime.spark.executor_conf``: driver and executors on loopback, executors that
    import this caffeine; ``settings`` (default: from the environment) name its port and home.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if master is None and SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ:
        master = DEFAULT_MASTER  # plain python, not spark-submit: nothing else names a master
    from caffeine.runtime.spark import executor_conf

    # Under spark-submit the master comes from its --master (in the loaded defaults).
    effective_master = master or SparkConf().get("spark.master", DEFAULT_MASTER)
    cluster_conf = executor_conf(settings or load_settings(), effective_master)
    if effective_master.startswith("local") or cluster_conf:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # everything stays on loopback
    builder = SparkSession.builder.appName(app_name).master(effective_master)
    spark_conf = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.python.worker.reuse": "true",
        "spark.sql.shuffle.partitions": "8",
    }
    if effective_master.startswith("local"):
        for key, value in os.environ.items():
            if key.startswith("CAFFEINE_"):
                spark_conf[f"spark.executorEnv.{key}"] = value
    spark_conf.update(cluster_conf)
    spark_conf.update(conf or {})
    for key, value in spark_conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def run_batch(
    settings: Settings,
    *,
    spark=None,
    master: str | None = None,
    partitions: int | None = None,
    snapshot_ts: int | None = None,
    write: bool = True,
    progress: Callable[[str], None] | None = None,
) -> BatchReport:
    """Recompute every index table from ``repository`` at one snapshot; write ``batch_*``.

    ``snapshot_ts``: read at this timestamp (one the oracle issued, e.g. the start_ts at which a
    caller read the incremental tables); default: a fresh one. ``write=False`` computes and
    counts without writing. ``progress``: called with a line for people at each step and,
    while Spark runs, with its finished tasks every few seconds.
    """
    from caffeine.percolator import connect
    from spark import hbase_io
    from spark.progress import StageProgress
    from spark.transforms import build_index

    say = progress or (lambda line: None)

    spark = spark or spark_session(master or DEFAULT_MASTER)
    sc = spark.sparkContext
    n = partitions or max(2, sc.defaultParallelism * 2)
    shipped = hbase_io.ship_settings(settings)
    t0 = time.monotonic()
    stages = {}
    with connect(settings) as cluster:
        txn = cluster.snapshot(snapshot_ts)  # a fresh one by default
        try:
            ts = txn.start_ts
            ranges = hbase_io.sample_ranges(cluster, ts, n)
            if write:
                hbase_io.recreate_batch_tables(cluster.store)
            stages["plan"] = time.monotonic() - t0
            say(f"snapshot {ts}: reading repository in {len(ranges)} row ranges, "
                f"{'writing' if write else 'counting'} the batch_* tables")

            pages = sc.parallelize(ranges, len(ranges)).flatMap(
                lambda r: hbase_io.read_range(shipped, ts, r[0], r[1])
            )
            result = build_index(pages, n, persist=lambda rdd: rdd.cache())
            tagged = result.tagged(sc)
            with StageProgress(sc, say) if progress else contextlib.nullcontext():
                if write:
                    counts = tagged.mapPartitions(hbase_io.write_partition(shipped, ts)).collect()
                else:
                    counts = tagged.map(lambda t: (t[0], 1, len(t[1][1]))).collect()
            written = {table: [0, 0] for table in result.tables()}
            for table, rows, cells in counts:
                written[table][0] += rows
                written[table][1] += cells
            stages["read, compute, write"] = time.monotonic() - t0 - stages["plan"]
            for rdd in result.tables().values():
                rdd.unpersist()
        finally:
            txn.close()  # releases the snapshot (and the GC horizon)
    return BatchReport(ts, len(ranges), time.monotonic() - t0, stages, written)


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    parser = parser or argparse.ArgumentParser(prog="spark/job.py", description=__doc__.splitlines()[0])
    parser.add_argument("--prefix", help="HBase table-name prefix (default: CAFFEINE_TABLE_PREFIX or caffeine_)")
    parser.add_argument("--master", default=None,
                        help=f"Spark master URL (default {DEFAULT_MASTER}; under spark-submit, its --master)")
    parser.add_argument("--partitions", type=int, default=None,
                        help="row ranges read in parallel, one Spark partition each (default 2x the cores)")
    parser.add_argument("--snapshot-ts", type=int, default=None, help="read at this timestamp (default: now)")
    parser.add_argument("--repeat", type=int, default=1, help="run the batch this many times back to back")
    parser.add_argument("--no-write", action="store_true", help="compute and count, write nothing")
    parser.add_argument("--json", action="store_true", help="print one JSON report per batch on stdout")
    return parser


def main(argv: list[str] | None = None, args: argparse.Namespace | None = None) -> int:
    args = args or build_parser().parse_args(argv)
    settings = load_settings(table_prefix=args.prefix)
    say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731 - progress, off stdout
    say(f"starting Spark ({args.master or DEFAULT_MASTER})")
    spark = spark_session(args.master, settings=settings)
    try:
        for i in range(args.repeat):
            if args.repeat > 1:
                say(f"batch {i + 1} of {args.repeat}")
            report = run_batch(settings, spark=spark, partitions=args.partitions, snapshot_ts=args.snapshot_ts,
                               write=not args.no_write, progress=say)
            if args.json:
                print(json.dumps(asdict(report)), flush=True)
            else:
                print(report.summary(), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
