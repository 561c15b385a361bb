"""``bench/bench_relevance.py`` needs its yardstick (tantivy, the ``bench`` extra) only after a
corpus is built, which takes minutes: without it the benchmark must stop before building, and
say how to install it, not fail with an import error once the build is done."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import bench_relevance  # noqa: E402


def test_without_tantivy_the_benchmark_stops_before_building(monkeypatch):
    built = []
    monkeypatch.setitem(sys.modules, "tantivy", None)  # `import tantivy` raises ImportError
    monkeypatch.setattr(bench_relevance, "measure", lambda *a, **k: built.append(a) or [])
    monkeypatch.setattr(sys, "argv", ["bench_relevance.py"])
    with pytest.raises(SystemExit) as stopped:
        bench_relevance.main()
    assert not built
    assert "tantivy" in str(stopped.value) and ".[bench]" in str(stopped.value)
