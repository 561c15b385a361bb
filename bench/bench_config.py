#!/usr/bin/env python3
"""Runtime configurations measured against each other in one run: restart, warm up, measure.

For each repeat and each variant (in a rotated order each repeat): stop the local runtime,
start it with the variant's hbase-site.xml properties, JVM flags and Thrift server arguments
on top of the project's own (``caffeine/runtime/siteconf.py``, ``process.JVM_FLAGS``,
``catalogue``), run an unmeasured warm-up crawl (the JVMs compile their hot paths for
minutes after a start), then

- the pipeline (``bench_pipeline.run_once``: 2 worker processes, the coprocessor committer):
  documents/s and CPU ms per page by process;
- optionally (``--toll``) a short ``bench_storage_toll.py`` run: total CPU µs per row at
  batch sizes 1 and 16.

Reports per variant the median over repeats and, more telling on a shared machine, the
median of the per-repeat ratios to the first variant (the baseline), each ratio taken between
runs next to each other in time. At the end the runtime is started again with the project's
own configuration (no variant), so it is left as ``caffeine up`` would leave it.

    python3 bench/bench_config.py --variants base,handlers8,parallelgc [--repeats 2]
                                  [--pages 1500] [--warmup-pages 300] [--toll]

Needs the local runtime of the ``CAFFEINE_*`` settings, and restarts it: point them at a
runtime of your own, never at one other people use. The variants are in ``VARIANTS``.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

RESULTS = HERE / "results" / "config.csv"


@dataclass(frozen=True)
class Variant:
    """What a configuration changes on top of the project's own.

    ``site``: hbase-site.xml properties (every JVM reads the file); ``drop``/``add``: JVM
    flags removed from / added to a piece's command line (``hbase``, ``thrift1``,
    ``thrift2``; ``*`` for all three); ``thrift_args``: a Thrift server's flags in place of
    ``-threadpool``."""

    what: str
    site: dict[str, str] = field(default_factory=dict)
    drop: dict[str, tuple[str, ...]] = field(default_factory=dict)
    add: dict[str, tuple[str, ...]] = field(default_factory=dict)
    thrift_args: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # How the toll's Thrift2 client speaks (bench_storage_toll --transport/--protocol); a
    # variant the project's clients cannot speak to runs the toll only, no pipeline.
    wire: tuple[str, str] = ("buffered", "binary")

    @property
    def pipeline(self) -> bool:
        return self.wire == ("buffered", "binary")

    def flags(self, table: dict[str, tuple[str, ...]], piece: str) -> tuple[str, ...]:
        return table.get("*", ()) + table.get(piece, ())


G1 = "-XX:+UseG1GC"
JVMS = ("hbase", "thrift1", "thrift2")

VARIANTS: dict[str, Variant] = {
    "base": Variant("the project's configuration as committed"),
    "handlers8": Variant("8 RPC handlers instead of 30",
                         site={"hbase.regionserver.handler.count": "8"}),
    "handlers4": Variant("4 RPC handlers instead of 30",
                         site={"hbase.regionserver.handler.count": "4"}),
    "parallelgc": Variant("ParallelGC in all three JVMs instead of G1",
                          drop={"*": (G1,)}, add={"*": ("-XX:+UseParallelGC",)}),
    "parallelgc_hbase": Variant("ParallelGC in HBase only", drop={"hbase": (G1,)},
                                add={"hbase": ("-XX:+UseParallelGC",)}),
    "serialgc_thrift": Variant("SerialGC in the Thrift JVMs, G1 in HBase",
                               drop={"thrift1": (G1,), "thrift2": (G1,)},
                               add={"thrift1": ("-XX:+UseSerialGC",), "thrift2": ("-XX:+UseSerialGC",)}),
    "g1_young": Variant("G1 with a 1 GB young generation floor in HBase (fewer young GCs)",
                        add={"hbase": ("-XX:+UnlockExperimentalVMOptions", "-XX:G1NewSizePercent=33")}),
    "c1only": Variant("C1 only (-XX:TieredStopAtLevel=1) in all three JVMs",
                      add={"*": ("-XX:TieredStopAtLevel=1",)}),
    "basic": Variant("in-memory compaction BASIC for user tables",
                     site={"hbase.hregion.compacting.memstore.type": "BASIC"}),
    "eager": Variant("in-memory compaction EAGER for user tables",
                     site={"hbase.hregion.compacting.memstore.type": "EAGER"}),
    "basic_parallelgc": Variant("in-memory compaction BASIC and ParallelGC in all three JVMs",
                                site={"hbase.hregion.compacting.memstore.type": "BASIC"},
                                drop={"*": (G1,)}, add={"*": ("-XX:+UseParallelGC",)}),
    "imc_limit1": Variant("BASIC, the in-memory pipeline merged above 1 segment, not 2 (fewer segments per seek)",
                          site={"hbase.hregion.compacting.pipeline.segments.limit": "1"}),
    # The factor times the flush size, divided by the table's number of stores (families):
    # today's threshold is 2 MB per store; impacts has 3 stores (i, _n, the guard's).
    "imc_active_big": Variant("BASIC, the active skip list flushed in memory at 0.15 x flush size / stores "
                              "(6.4 MB for impacts), not 2 MB",
                              site={"hbase.memstore.inmemoryflush.threshold.factor": "0.15"}),
    "imc_active_small": Variant("BASIC, the active skip list flushed in memory at 0.015 x flush size / stores "
                                "(0.64 MB for impacts), not 2 MB",
                                site={"hbase.memstore.inmemoryflush.threshold.factor": "0.015"}),
    "flush32": Variant("memstore flush size 32 MB instead of 128 MB (smaller skip lists)",
                       site={"hbase.hregion.memstore.flush.size": str(32 << 20)}),
    "asyncwal": Variant("the async WAL (hbase.wal.provider=asyncfs; on a local FS a wrapper whose sync "
                        "is still an hflush before the answer)", site={"hbase.wal.provider": "asyncfs"}),
    "syncers1": Variant("one WAL sync thread instead of 5 (syncs still every write)",
                        site={"hbase.regionserver.hlog.syncer.count": "1"}),
    "t2_hsha": Variant("Thrift2 server -hsha (framed transport; toll only)",
                       thrift_args={"thrift2": ("-hsha",)}, wire=("framed", "binary")),
    "t2_compact": Variant("Thrift2 server -threadpool -c (compact protocol; toll only)",
                          thrift_args={"thrift2": ("-threadpool", "-c")}, wire=("buffered", "compact")),
    "thriftmin4": Variant("Thrift servers start 4 worker threads, not 16",
                          site={"hbase.thrift.minWorkerThreads": "4"}),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# -- starting the runtime with a variant ----------------------------------------------------

def install(variant: Variant | None) -> None:
    """Make the next ``LocalHBase.up()`` in this process start the JVMs with ``variant``
    (None: the project's own configuration)."""
    import caffeine.runtime.local as local
    import caffeine.runtime.siteconf as siteconf
    from caffeine.runtime import process

    siteconf.hbase_site_properties = _ORIGINAL["site"]
    local.java_command = _ORIGINAL["java"]
    if variant is None:
        return

    def site(**kwargs):
        return {**_ORIGINAL["site"](**kwargs), **variant.site}

    def java(layout, piece, heap, main_class, args=(), java=None, extra_classpath=()):
        cmd = _ORIGINAL["java"](layout, piece, heap, main_class, args, java, extra_classpath)
        drop = set(variant.flags(variant.drop, piece))
        cmd = [c for c in cmd if c not in drop]
        # After the -Xmx (cmd[1]): before the main class, where the JVM reads its options.
        return cmd[:2] + list(variant.flags(variant.add, piece)) + cmd[2:]

    siteconf.hbase_site_properties = site
    local.java_command = java
    assert process.JVM_FLAGS  # imported for the reader: the flags the variants edit


def _originals() -> dict:
    import caffeine.runtime.local as local
    import caffeine.runtime.siteconf as siteconf

    return {"site": siteconf.hbase_site_properties, "java": local.java_command}


_ORIGINAL = _originals()


def restart(settings, variant: Variant | None) -> float:
    """Stop the runtime and start it with ``variant``; returns the seconds ``up`` took."""
    from caffeine.runtime.local import LocalHBase

    quiet = lambda msg: None  # noqa: E731
    LocalHBase(settings, progress=quiet).down()
    install(variant)
    local = LocalHBase(settings, progress=quiet)
    if variant is not None and variant.thrift_args:
        local.pieces = tuple(
            replace(p, args=tuple(a for arg in p.args for a in (variant.thrift_args.get(p.name, (arg,))
                                                                 if arg == "-threadpool" else (arg,))))
            for p in local.pieces)
    t0 = time.monotonic()
    local.up()
    took = time.monotonic() - t0
    site = local.layout.hbase_site.read_text()
    missing = [k for k in (variant.site if variant else {}) if f"<name>{k}</name>" not in site]
    if missing:
        raise RuntimeError(f"hbase-site.xml lacks the variant's {missing}")
    return took


# -- measuring ------------------------------------------------------------------------------

def toll(seconds: float, wire: tuple[str, str], warmup: float) -> dict[str, float]:
    """CPU µs per row of a short toll run, by "kind/B" (total) and "kind/B/process"."""
    out_csv = Path(f"/tmp/caffeine-toll-{os.getpid()}.csv")
    subprocess.run([sys.executable, str(HERE / "bench_storage_toll.py"), "--sizes", "1,16",
                    "--kinds", "get,put,prewrite,commit", "--seconds", str(seconds), "--repeats", "3",
                    "--warmup", str(warmup), "--idle", "3", "--csv", str(out_csv),
                    "--transport", wire[0], "--protocol", wire[1]],
                   check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    with open(out_csv) as f:
        rows = list(csv.DictReader(f))
    out_csv.unlink()
    out = {}
    for r in rows:
        cell = f"{r['kind']}/{r['batch']}"
        out[cell] = float(r["total_us_row"])
        for proc in ("client", "thrift2", "hbase"):
            out[f"{cell}/{proc}"] = float(r[f"{proc}_us_row"])
    return out


def measure(args, name: str) -> dict:
    """One warmed-up pipeline run (and toll) against the runtime as it now runs; a variant
    the pipeline's clients cannot speak to gets a longer toll warm-up instead."""
    from bench_pipeline import run_once

    variant = VARIANTS[name]
    out = {"variant": name}
    if variant.pipeline and not args.toll_only:
        run_once(args.warmup_pages, args.seed + 1000, 2, 8, 8, "coprocessor")
        r = run_once(args.pages, args.seed, 2, 8, 8, "coprocessor")
        out.update({"docs_per_s": r["docs_per_s"], **{f"cpu_{k}": v for k, v in r["cpu_ms_per_doc"].items()},
                    "cpu_total": sum(r["cpu_ms_per_doc"].values()), "round_trips": r["round_trips_per_doc"]})
    if args.toll or args.toll_only or not variant.pipeline:
        warm = 10.0 if variant.pipeline and not args.toll_only else 60.0
        out.update({f"toll_{k}": v for k, v in toll(args.toll_seconds, variant.wire, warm).items()})
    return out


def ratios(runs: list[dict], names: list[str], key: str) -> dict[str, float]:
    """Median over repeats of (variant / baseline in the same repeat) for ``key``."""
    base = names[0]
    out = {}
    for name in names:
        per = [r[key] / b[key] for r, b in zip(
            [x for x in runs if x["variant"] == name], [x for x in runs if x["variant"] == base])
            if b.get(key) and key in r]
        out[name] = statistics.median(per) if per else float("nan")
    return out


def report(runs: list[dict], names: list[str], args) -> str:
    keys = [k for k in ("docs_per_s", "cpu_total", "cpu_hbase", "cpu_thrift2", "cpu_thrift1", "cpu_workers",
                        "cpu_crawler+testweb") if any(k in r for r in runs)]
    keys += sorted({k for r in runs for k in r if k.startswith("toll_") and k.count("/") == 1})
    keys += sorted({k for r in runs for k in r if k.startswith("toll_") and k.endswith("/thrift2")})
    lines = ["| variant | " + " | ".join(keys) + " |", "|---|" + "--:|" * len(keys)]
    rat = {k: ratios(runs, names, k) for k in keys}
    for name in names:
        mine = [r for r in runs if r["variant"] == name]
        cells = []
        for k in keys:
            vals = [r[k] for r in mine if k in r]
            med = statistics.median(vals) if vals else float("nan")
            cells.append(f"{med:.1f} ({rat[k][name]:.2f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    legend = "\n".join(f"- `{n}`: {VARIANTS[n].what}" for n in names)
    return (f"Median of {args.repeats} runs per variant; in brackets the median of per-repeat ratios to "
            f"`{names[0]}`. docs/s and CPU ms per page by process from bench_pipeline (2 workers, coprocessor, "
            f"{args.pages} pages after {args.warmup_pages} warm-up pages); toll_*: total CPU µs per row "
            f"(bench_storage_toll).\n\n" + "\n".join(lines) + "\n\n" + legend)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default="base,handlers8,parallelgc",
                        help=f"comma-separated, the first is the baseline; from {','.join(VARIANTS)}")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pages", type=int, default=1500)
    parser.add_argument("--warmup-pages", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--toll", action="store_true", help="also a short bench_storage_toll run per variant")
    parser.add_argument("--toll-seconds", type=float, default=1.5)
    parser.add_argument("--toll-only", action="store_true",
                        help="no pipeline: a toll run (after a 60 s warm-up) per variant")
    args = parser.parse_args()
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; from {','.join(VARIANTS)}")

    from caffeine.config import load_settings

    settings = load_settings()
    runs = []
    try:
        for rep in range(args.repeats):
            order = names[rep % len(names):] + names[:rep % len(names)]
            for name in order:
                r = None
                for attempt in (1, 2):
                    took = restart(settings, VARIANTS[name])
                    log(f"\n=== repeat {rep + 1}, variant {name}: up in {took:.0f}s")
                    try:
                        r = measure(args, name)
                        break
                    except (Exception, SystemExit) as exc:
                        # e.g. a worker process killed from outside on a shared machine
                        log(f"=== {name}: run failed ({exc!r:.300}); {'again' if attempt == 1 else 'skipped'}")
                if r is None:
                    continue
                r["repeat"] = rep + 1
                runs.append(r)
                log(f"=== {name}: " + ", ".join(f"{k} {v:.1f}" for k, v in r.items()
                                                 if isinstance(v, float) and k.count("/") < 2))
    finally:
        restart(settings, None)
        log("runtime restarted with the project's own configuration")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    fields = sorted({k for r in runs for k in r}, key=lambda k: (k != "variant", k != "repeat", k))
    with open(RESULTS, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(runs)
    print(report(runs, names, args))
    print(f"\nreproduce: python3 bench/bench_config.py --variants {args.variants} --repeats {args.repeats} "
          f"--pages {args.pages} --warmup-pages {args.warmup_pages}{' --toll' if args.toll else ''}"
          f"{' --toll-only' if args.toll_only else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
