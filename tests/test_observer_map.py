"""The observer chain's map comes from the code: ``Application.chain_map`` (printed by
``caffeine engine --map``) and the block of docs/INDEXING.md ("The chain") say the same."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from caffeine.observers.app import application
from caffeine.percolator import Application, Observer

INDEXING = Path(__file__).resolve().parents[1] / "docs" / "INDEXING.md"


def documented_chain() -> list[str]:
    section = INDEXING.read_text(encoding="utf-8").split("## The chain", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```\n(.*?)```", section, flags=re.S)
    return block.strip().splitlines()


def test_the_documented_chain_is_the_application_s():
    assert documented_chain() == application.chain_map()


def test_every_observer_declares_what_it_writes():
    assert all(o.writes for o in application.observers)
    # Each observed column is written by some observer or by the crawler (page:meta).
    written = {w.split(" ")[0].rstrip(",") for o in application.observers for w in o.writes}
    observed = {f"{o.table}/{o.column}" for o in application.observers}
    assert observed - written == {"repository/page:meta"}


def test_the_map_follows_the_observers():
    app = Application("t", [Observer("a", "t1", "c:x", lambda *a: None, writes=("t2/c:y",)),
                            Observer("b", "t2", "c:y", lambda *a: None, notification="weak")])
    assert app.chain_map() == ["t1/c:x --a--> t2/c:y", "t2/c:y (weak) --b--> (nothing declared)"]


def test_caffeine_engine_map_prints_it_without_hbase():
    proc = subprocess.run([sys.executable, "-m", "caffeine.commands", "engine", "--map"],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "CAFFEINE_THRIFT1_PORT": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == application.chain_map()
