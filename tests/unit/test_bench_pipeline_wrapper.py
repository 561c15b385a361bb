"""``bench/bench_pipeline.py``'s worker wrapper: the script each benchmark worker runs to dump
its counters at exit is generated from an f-string, so a brace meant for the script and
taken by the f-string shows only when a benchmark starts. Generated and compiled here."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_pipeline  # noqa: E402


def test_the_worker_wrapper_is_a_script_that_dumps_every_counter(tmp_path):
    source = bench_pipeline.worker_stats_dump(tmp_path / "stats")
    compile(source, "worker-wrapper", "exec")
    for counter in ("batching", "paths", "runs", "listing", "calls", "cpu_s"):
        assert f"'{counter}'" in source, counter
