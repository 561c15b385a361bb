"""The documents a newcomer reads in order: a short README that keeps the two commands and
links every document, and documents that agree with the code: the settings tables name real
settings with their defaults, the command lines parse, links and section references resolve.
No HBase needed."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from caffeine.commands.cli import build_parser
from caffeine.config import Settings
from caffeine.failures import DEBUG_ENV
from caffeine.search import SearchSettings
from support.cli_helpers import example_commands
from support import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
ARCHITECTURE = DOCS / "ARCHITECTURE.md"
CONFIGURATION = DOCS / "CONFIGURATION.md"
README_LINES = 250
# What a fresh machine runs, spelled as .ci/run and tests/runtime/test_install.py run it.
FRESH_MACHINE_COMMANDS = (
    "python3 -m pip install -e . && caffeine demo",
    "python3 -m pip install -e '.[test]' && caffeine up && python3 -m pytest",
    "caffeine down",
)


def tracked_files() -> list[str]:
    return subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()


def documents() -> list[Path]:
    """The README, docs/, and the READMEs of the folders."""
    readmes = sorted(ROOT / name for name in tracked_files() if name.endswith("/README.md"))
    return [README, *sorted(DOCS.glob("*.md")), *readmes]


def test_the_readme_is_short_and_keeps_the_fresh_machine_commands():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES, "README.md: move detail to a document under docs/"
    for command in FRESH_MACHINE_COMMANDS:
        assert command in text, command


def relative_links(path: Path) -> list[str]:
    """The targets of ``[text](target)`` links that are not web addresses or anchors."""
    targets = re.findall(r"\]\(([^)\s]+)\)", path.read_text(encoding="utf-8"))
    return [t.split("#", 1)[0] for t in targets if not re.match(r"[a-z]+:|#", t)]


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(path):
    broken = [t for t in relative_links(path) if not (path.parent / t).exists()]
    assert not broken, f"{path.relative_to(ROOT)} links to missing files: {broken}"


@pytest.mark.parametrize("source", [README, ARCHITECTURE], ids=["README.md", "docs/ARCHITECTURE.md"])
def test_every_document_is_linked(source):
    linked = {(source.parent / t).resolve() for t in relative_links(source)}
    unlinked = [str(d.relative_to(ROOT)) for d in sorted(DOCS.glob("*.md")) if d != source and d.resolve() not in linked]
    assert not unlinked, f"{source.relative_to(ROOT)} does not link {unlinked}"


def section_names(path: Path) -> list[str]:
    """What a reference may name: headings (without their numbering) and bold leads."""
    names = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"#+\s+(?:\d+[a-z]?\.\s+)?(.*)", line):
            names.append(heading.group(1))
        names += re.findall(r"(?:^|\s)\*\*([^*]+)\*\*", line)
    return [" ".join(n.split()) for n in names]


def section_references() -> list[tuple[str, Path, str]]:
    """``docs/X.md, "Section"`` and ``README "Section"`` references in tracked text files."""
    pattern = re.compile(r'(?<![\w/.])(docs/[A-Z]+\.md|README(?:\.md)?),?\s+"([^"]{1,100})"')
    found = []
    for name in tracked_files():
        path = ROOT / name
        if path.suffix not in (".py", ".md", ".yml", ".toml", ".java") or not path.is_file():
            continue
        if path == Path(__file__).resolve():
            continue  # this module spells the pattern out in its docstrings
        text = " ".join(path.read_text(encoding="utf-8").split())
        for target, section in pattern.findall(text):
            found.append((name, ROOT / ("README.md" if target.startswith("README") else target), section))
    return found


def test_section_references_resolve():
    references = section_references()
    assert references  # the pattern still finds the references there are
    broken = [f'{name}: {target.relative_to(ROOT)} "{section}"' for name, target, section in references
              if not target.exists() or not any(n.startswith(section) for n in section_names(target))]
    assert not broken, f"these name no heading or bold lead of their document: {broken}"


def documented_settings(text: str) -> dict[str, str]:
    """``CAFFEINE_*`` variable -> the default its table row gives. A row may name several
    (``CAFFEINE_X_HOST` / `_PORT``, ``CAFFEINE_A`, `_B``), the defaults then separated alike."""
    settings = {}
    for row in text.splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if not row.startswith("| `CAFFEINE_") or len(cells) < 3:
            continue
        names = re.findall(r"`(CAFFEINE_\w+|_\w+)`", cells[0])
        defaults = re.split(r"\s+/\s+|,\s+", cells[1]) if len(names) > 1 else [cells[1]]
        assert len(defaults) == len(names), row
        first = names[0]
        for name, default in zip(names, defaults):
            if name.startswith("_"):  # short for the first name with its last words replaced
                words = first.split("_")
                candidates = ["_".join(words[:n]) + name for n in range(1, len(words))]
                name = next((c for c in candidates if c in known_settings()), candidates[-1])
            settings[name] = default
    return settings


def known_settings() -> dict[str, object]:
    """Every ``CAFFEINE_*`` setting the code reads, with its default (None: computed)."""
    known = {f"CAFFEINE_{k.upper()}": f.default for k, f in Settings.model_fields.items()}
    known |= {f"CAFFEINE_API_{k.upper()}": f.default for k, f in SearchSettings.model_fields.items()}
    known[DEBUG_ENV] = None  # read by the error handling itself, not a setting
    return known


def same_default(documented: str, default: object) -> bool:
    value = documented.strip("`").replace(",", "")
    if isinstance(default, bool):
        return value == str(default).lower()
    if isinstance(default, (int, float)):
        try:
            return float(value) == float(default)
        except ValueError:
            return False
    return value == str(default)


def test_the_settings_tables_name_real_settings_with_their_defaults():
    documented = documented_settings(CONFIGURATION.read_text(encoding="utf-8"))
    known = known_settings()
    assert len(documented) > 20
    unknown = sorted(set(documented) - set(known))
    assert not unknown, f"docs/CONFIGURATION.md names settings the code does not read: {unknown}"
    wrong = [f"{name}: documented {documented[name]!r}, code {known[name]!r}" for name in sorted(documented)
             if known[name] is not None and not str(known[name]).startswith(("/", str(ROOT)))
             and not same_default(documented[name], known[name])]
    assert not wrong, f"docs/CONFIGURATION.md's defaults differ from the code's: {wrong}"


def test_a_wrong_default_is_caught():
    row = "| `CAFFEINE_LOCK_TTL_MS` | 3000 |"
    text = CONFIGURATION.read_text(encoding="utf-8")
    assert row in text
    documented = documented_settings(text.replace(row, "| `CAFFEINE_LOCK_TTL_MS` | 5000 |"))
    assert not same_default(documented["CAFFEINE_LOCK_TTL_MS"], known_settings()["CAFFEINE_LOCK_TTL_MS"])


def shell_blocks(path: Path) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", path.read_text(encoding="utf-8"), flags=re.S)


@pytest.mark.parametrize("path", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: str(p.relative_to(ROOT)))
def test_the_documented_commands_parse(path):
    parser = build_parser()
    for block in shell_blocks(path):
        for argv in example_commands(block):
            try:
                parser.parse_args(argv)
            except SystemExit as exc:
                pytest.fail(f"{path.relative_to(ROOT)}: `caffeine {' '.join(argv)}` does not parse (exit {exc.code})")
