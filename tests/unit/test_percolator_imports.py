"""The percolator package's modules import each other without a circle.

Every import counts, including those under ``if TYPE_CHECKING:`` and inside functions: a
circle among them means two modules that cannot be understood (or split) one at a time.
"""

from __future__ import annotations

import ast
from pathlib import Path

import caffeine.percolator

PACKAGE = "caffeine.percolator"
ROOT = Path(caffeine.percolator.__file__).parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join([PACKAGE, *parts])


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports (``from x import y`` counts as x.y when
    x.y is a module, else x)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names]
        else:
            continue
        out.update(n for n in names if n in modules)
    return out


def test_no_import_circle_in_the_percolator_package():
    files = {_module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(files)
    # The package's __init__ re-exports its public names: importing it is importing those,
    # so it is left out of the graph (nothing inside the package imports it).
    graph = {m: _imports(p, modules) - {PACKAGE} for m, p in files.items() if m != PACKAGE}
    for m, deps in graph.items():
        assert PACKAGE not in deps

    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                circle = stack[stack.index(d):] + [d]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
