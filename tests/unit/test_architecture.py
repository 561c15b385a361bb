"""The architecture as written down holds: the import-linter contracts in ``pyproject.toml``
pass, ``docs/ARCHITECTURE.md`` shows the same tiers and names every package, every module's
docstring names its layer in one spelling, no import goes around a circle, and the library's
modules stay small enough to read in one sitting (the few larger ones are named, with why)."""

from __future__ import annotations

import ast
import graphlib
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from support import ROOT

ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("caffeine", "api", "crawler", "spark", "testweb")

# Modules over the size limit, each one cohesive thing: the reason it is not split.
MODULE_LINES = 400
LARGER_MODULES = {
    # The one HBase adapter: which Thrift server serves each call, its pools, retries and
    # checked writes. Each protocol's wire details are already apart (thrift1.py, thrift2.py).
    "caffeine/storage/hbase.py": "HBaseStore, one class",
    # One transaction's commit: prewrite, the commit point, secondaries, the primary's
    # keepalive and rollback all read and write the same per-commit state.
    "caffeine/percolator/two_phase.py": "the two-phase commit of one transaction",
    # The worker loop: finding notifications, its thread pool and running an observer share
    # the worker's claims and metrics; its table of registrations is apart (workers_table.py).
    "caffeine/percolator/worker.py": "the observer worker",
    # The data contract: every table and column name and every stored value's codec, the one
    # schema module the observers, api, crawler and spark import (docs/INDEXING.md in code).
    "caffeine/index/schema.py": "the indexing application's data contract",
    # The batching client: the leader/follower hand-off, its retries and the failover between
    # addresses share one state (the queue, the connection, the address in use); the bytes
    # on the wire are apart (oracle/wire.py).
    "caffeine/oracle/client.py": "OracleClient, one class",
}

# Each module's docstring has one line ``Layer: <name>.``, optionally followed by free text, where
# <name> is the layer of the package the module lives in (the deepest package listed here): one
# name per package of the import-linter layers, "tools" for the two of one tier that serve
# operators, "shared" for caffeine's own small modules any layer may use.
LAYER_OF_PACKAGE = {
    "caffeine": "shared",
    "caffeine.storage": "storage",
    "caffeine.oracle": "oracle",
    "caffeine.percolator": "percolator",
    "caffeine.index": "index",
    "caffeine.runtime": "runtime",
    "caffeine.observers": "observers",
    "caffeine.ops": "tools",
    "caffeine.metrics": "tools",
    "caffeine.commands": "commands",
    "caffeine.sim": "simulation",
    "caffeine.search": "search",
    "api": "api",
    "crawler": "crawler",
    "spark": "spark",
    "testweb": "testweb",
}
LAYER_LINE = re.compile(r"Layer: ([a-z]+)\.(?: |$)")


def contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_import_contracts_hold():
    # The checked-out packages, not an installed copy: the working directory comes first.
    proc = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()", "--no-cache"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert f"{len(contracts())} kept, 0 broken" in proc.stdout


# Every module's direct imports, those under ``if TYPE_CHECKING:`` and inside functions included.
IMPORT_GRAPH = """
import json, sys
import grimp
graph = grimp.build_graph(*sys.argv[1:], exclude_type_checking_imports=False, cache_dir=None)
print(json.dumps({m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}))
"""


def first_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return exc.args[1]
    return None


def test_no_module_imports_itself_around_a_circle():
    # Stricter than the "acyclic" contract: between any two modules, not only siblings, and
    # counting the imports that only name types.
    proc = subprocess.run([sys.executable, "-c", IMPORT_GRAPH, *PACKAGES], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert first_cycle(json.loads(proc.stdout)) is None


def test_no_benchmark_imports_itself_around_a_circle():
    # bench/ is no package (its scripts import each other by bare name), so it is read here.
    scripts = {path.stem: path for path in (ROOT / "bench").glob("*.py")}
    graph = {}
    for name, path in scripts.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                imported.add(node.module.split(".")[0])
        graph[name] = sorted(imported & scripts.keys())
    assert first_cycle(graph) is None


def documented_tiers() -> list[set[str]]:
    """The packages of each row of the "Layers" table, top row first."""
    text = ARCHITECTURE.read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|") and not set(line) <= set("|-: ")]
    return [set(re.findall(r"`([a-z_.]+)`", row.split("|")[1])) for row in rows[1:]]  # rows[0]: header


def test_the_documented_layers_are_the_contract():
    (layers,) = [c for c in contracts() if c["type"] == "layers"]
    contract_tiers = [{name.strip() for name in tier.split("|")} for tier in layers["layers"]]
    assert documented_tiers() == contract_tiers


def test_the_map_names_every_package():
    text = ARCHITECTURE.read_text()
    packages = {p for p in PACKAGES}
    packages |= {f"caffeine.{d.name}" for d in (ROOT / "caffeine").iterdir() if (d / "__init__.py").exists()}
    missing = sorted(p for p in packages if f"`{p}`" not in text)
    assert not missing, f"docs/ARCHITECTURE.md does not name {missing}"


def test_modules_stay_small():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for package in PACKAGES for path in (ROOT / package).rglob("*.py")
    }
    too_large = sorted(f"{path} ({n} lines)" for path, n in sizes.items() if n > MODULE_LINES and path not in LARGER_MODULES)
    assert not too_large, f"split these, or name them in LARGER_MODULES with why they are one thing: {too_large}"
    # An entry that no longer needs its excuse goes.
    assert sorted(p for p in LARGER_MODULES if sizes.get(p, 0) <= MODULE_LINES) == []


def modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def layer_lines(path: Path) -> list[str]:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return [line for line in doc.splitlines() if line.startswith("Layer:")]


def package_layer(path: Path) -> str:
    """The layer of the deepest package in ``LAYER_OF_PACKAGE`` that holds ``path``."""
    parts = path.relative_to(ROOT).parts[:-1]
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYER_OF_PACKAGE:
            return LAYER_OF_PACKAGE[name]
    raise AssertionError(f"{path}: in no package of LAYER_OF_PACKAGE")


def layer_line_problem(path: Path) -> str | None:
    """What is wrong with the module's ``Layer:`` line, or None."""
    lines = layer_lines(path)
    if len(lines) != 1:
        return f"{len(lines)} Layer: lines in its docstring, not one"
    match = LAYER_LINE.match(lines[0])
    if match is None:
        return f"{lines[0][:60]!r} does not start 'Layer: <name>.'"
    if match[1] not in LAYER_OF_PACKAGE.values():
        return f"{match[1]!r} is not a layer (one of {sorted(set(LAYER_OF_PACKAGE.values()))})"
    if match[1] != package_layer(path):
        return f"says {match[1]!r}, its package is in {package_layer(path)!r}"
    return None


def test_every_module_names_its_layer():
    problems = []
    for path in modules():
        rel = str(path.relative_to(ROOT))
        problem = layer_line_problem(path)
        if problem is not None:
            problems.append(f"{rel}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_layer_names_are_the_contract_packages():
    (layers,) = [c for c in contracts() if c["type"] == "layers"]
    tiers = [{name.strip() for name in tier.split("|")} for tier in layers["layers"]]
    in_contract = set().union(*tiers)
    assert set(LAYER_OF_PACKAGE) - {"caffeine"} == in_contract
    for package in LAYER_OF_PACKAGE:
        assert (ROOT / package.replace(".", "/") / "__init__.py").exists(), package
    # Packages that share a layer name are in one tier.
    for name in set(LAYER_OF_PACKAGE.values()) - {"shared"}:
        packages = {p for p, n in LAYER_OF_PACKAGE.items() if n == name}
        assert any(packages <= tier for tier in tiers), f"{name}: {sorted(packages)} span tiers"
