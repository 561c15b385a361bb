"""Judged queries derived mechanically from each corpus's own index, not written by anyone here.

A documentation set ships an index of its own made by its authors' tools: Sphinx's
``genindex``, Javadoc's ``index-files``, rustdoc's search index, a wiki's index pages. Each
entry names something (a term, a class, a member, an item) and the page that documents it:
exactly a known-item query and its answer. ``derive(corpus)`` reads every entry, turns it into
a query by the fixed rule of its kind below, keeps the entries whose page is served, merges
entries with the same query (their pages are all targets, the first in index order graded
highest), and ``sample`` draws a fixed number with a fixed seed. The result is committed as
``bench/data/relevance_<corpus>.json`` with the rule, the seed and the package's version, so
anyone can re-derive it (``python3 bench/relevance_queries.py --check``).

The rules (a query is what a reader of that documentation types to find the page):

- **sphinx** (``genindex-*.html``, or ``genindex.html`` when it is one page): an entry whose
  anchor is ``module-M`` asks ``M``; an anchor that is a dotted name asks, for an object of
  a module ("(in module M)"), the whole name (``os.path.join``), else its last two parts
  (``str.join``, ``QuerySet.filter``); a single identifier asks itself (``open``); any other
  entry (a term, an option, an environment variable) asks its own words; a C-domain anchor
  (``c.PyObject_Free``) asks the C name, a sub-entry's
  prefixed by its parent's (``Java language``).
- **javadoc** (``index-files/index-*.html``): a type asks its simple name (``ArrayList``,
  ``Map.Entry``), a member ``Type.member`` (``ArrayList.add``) answered by its type's page, a
  package its name (``java.util.concurrent``), a search tag its words.
- **rustdoc** (``search-index*.js``, the crate's items): a type, trait, macro or primitive asks
  its name (``HashMap``), a function, constant or static ``module::name``
  (``thread::spawn``), a module its path (``std::collections``), a method, field, variant or
  associated item ``Parent::name`` (``HashMap::insert``) answered by its parent's page.
- **wiki** (cppreference's symbol index, ``en/cpp/symbol_index.html`` and its per-namespace
  pages ``symbol_index/*.html``): each linked symbol asks its name qualified by the page's
  namespace, without ``()`` and ``<>`` (``std::vector``, ``std::accumulate``,
  ``std::chrono::duration``), answered by the page it links (a name listed for several pages,
  such as ``std::abs``, has them all as targets).
"""

from __future__ import annotations

import argparse
import html
import json
import posixpath
import random
import re
import subprocess
import sys
import urllib.parse
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from relevance_corpora import Corpus, by_name, page_files  # noqa: E402

SAMPLE = 250
SEED = 20261205
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = re.compile(rf"^{_IDENT}(\.{_IDENT})+$")
_SINGLE = re.compile(rf"^{_IDENT}$")


@dataclass(frozen=True)
class Entry:
    query: str
    target: str     # a served page, relative to the corpus's root


def _words(text: str) -> str:
    """An index entry's visible words as a query: parentheses, ``()`` and commas dropped."""
    text = text.replace("()", " ")
    text = re.sub(r"[(),;]", " ", text)
    return " ".join(text.split())


def _page(base: str, href: str) -> tuple[str, str]:
    """(page relative to the corpus's root, fragment) of ``href`` found on page ``base``."""
    parts = urllib.parse.urlsplit(href)
    if parts.scheme or parts.netloc:
        return "", ""
    path = posixpath.normpath(posixpath.join(posixpath.dirname(base), urllib.parse.unquote(parts.path)))
    return path, urllib.parse.unquote(parts.fragment)


# -- sphinx ------------------------------------------------------------------------------------
class _IndexTable(HTMLParser):
    """Links of a Sphinx ``indextable``: (href, text, parent words) per entry."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.in_table = False
        self.depth = 0          # nesting of <ul> inside the table
        self.parent = ""        # the current top-level entry's words
        self.href: str | None = None
        self.text: list[str] = []
        self.loose: list[str] = []   # a top-level entry's words that are not a link
        self.links: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table" and "indextable" in (a.get("class") or ""):
            self.in_table = True
        elif not self.in_table:
            return
        elif tag == "ul":
            self.depth += 1
            if self.depth == 2 and self.loose:
                self.parent = _words(" ".join(self.loose))
        elif tag == "li" and self.depth == 1:
            self.loose, self.parent = [], ""
        elif tag == "a" and a.get("href"):
            self.href, self.text = a["href"], []

    def handle_endtag(self, tag):
        if not self.in_table:
            return
        if tag == "table":
            self.in_table = False
        elif tag == "ul":
            self.depth -= 1
        elif tag == "a" and self.href is not None:
            text = " ".join("".join(self.text).split())
            self.links.append((self.href, text, self.parent if self.depth >= 2 else ""))
            if self.depth == 1:
                self.parent = text
            self.href = None

    def handle_data(self, data):
        if not self.in_table:
            return
        if self.href is not None:
            self.text.append(data)
        elif self.depth == 1 and data.strip():
            self.loose.append(data)


def _sphinx_query(text: str, fragment: str, parent: str) -> str:
    if fragment.startswith("c.") and _SINGLE.match(fragment[2:]):
        return fragment[2:]  # the C domain's anchor prefix: ``c.PyObject_Free`` documents PyObject_Free
    if fragment.startswith("module-") and (_DOTTED.match(fragment[7:]) or _SINGLE.match(fragment[7:])):
        return fragment[7:]
    if _DOTTED.match(fragment):
        if "(in module" in text or "(in module" in parent:
            return fragment
        return ".".join(fragment.split(".")[-2:])
    if _SINGLE.match(fragment) and not fragment.startswith("index"):
        return fragment
    own = _words(text)
    return _words(f"{parent} {own}") if parent else own


def sphinx(corpus: Corpus) -> list[Entry]:
    pages = sorted(corpus.root.glob("genindex-*.html"))
    pages = [p for p in pages if p.name != "genindex-all.html"] or [corpus.root / "genindex.html"]
    out = []
    for page in pages:
        parser = _IndexTable()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        for href, text, parent in parser.links:
            target, fragment = _page(page.name, href)
            if target:
                out.append(Entry(_sphinx_query(text, fragment, parent), target))
    return out


# -- javadoc -----------------------------------------------------------------------------------
_JAVADOC_DT = re.compile(r'<dt><a href="([^"]+)"(?: class="([a-z-]+)")?[^>]*>(.*?)</a>')


def javadoc(corpus: Corpus) -> list[Entry]:
    out = []
    folder = corpus.root / "index-files"
    for page in sorted(folder.glob("index-*.html"), key=lambda p: int(re.sub(r"\D", "", p.stem) or 0)):
        for href, kind, text in _JAVADOC_DT.findall(page.read_text(encoding="utf-8", errors="replace")):
            target, fragment = _page(f"index-files/{page.name}", href)
            text = html.unescape(re.sub(r"<[^>]+>", "", text))
            if not target:
                continue
            if kind == "member-name-link":
                owner = posixpath.basename(target)[: -len(".html")]
                out.append(Entry(f"{owner}.{text.split('(')[0]}", target))
            elif kind == "type-name-link" or (not kind and target.endswith("/package-summary.html")):
                out.append(Entry(text, target))
            elif kind == "search-tag-link":
                out.append(Entry(_words(text), target))
    return out


# -- rustdoc -----------------------------------------------------------------------------------
# rustdoc's ItemType, in its numbering (src/librustdoc/formats/item_type.rs), as file prefixes.
RUST_ITEM_TYPES = ("mod", "externcrate", "import", "struct", "enum", "fn", "type", "static", "trait", "impl",
                   "tymethod", "method", "structfield", "variant", "macro", "primitive", "associatedtype",
                   "constant", "associatedconstant", "union", "foreigntype", "keyword", "opaque", "attr",
                   "derive", "traitalias")
_RUST_NAMED = {"struct", "enum", "type", "trait", "macro", "primitive", "union", "keyword", "traitalias",
               "foreigntype", "attr", "derive"}
_RUST_IN_MODULE = {"fn", "static", "constant"}


def rust_search_index(path: Path) -> dict:
    """The ``searchIndex`` object of a rustdoc ``search-index*.js`` (a JSON text in a JS string)."""
    text = path.read_text(encoding="utf-8")
    start = text.index("JSON.parse('") + len("JSON.parse('")
    end = text.rindex("');")
    body = text[start:end].replace("\\\n", "")
    return json.loads(re.sub(r"\\([\\'])", r"\1", body))


def rustdoc(corpus: Corpus) -> list[Entry]:
    crate = corpus.subtree.strip("/")
    index = rust_search_index(next(corpus.root.glob("search-index*.js")))[crate]
    parents = index.get("p") or []
    out, path = [], crate
    for i, (kind, name) in enumerate(zip(index["t"], index["n"])):
        path = index["q"][i] or path if i < len(index["q"]) else path
        folder = path.replace("::", "/")
        kind_name = RUST_ITEM_TYPES[kind]
        parent = index["i"][i] if i < len(index["i"]) else 0
        if parent:
            ptype, pname = parents[parent - 1][:2]
            target = f"{folder}/{RUST_ITEM_TYPES[ptype]}.{pname}.html"
            query = f"{pname}::{name}"
        elif kind_name == "mod":
            target, query = f"{folder}/{name}/index.html", f"{path}::{name}"
        elif kind_name in _RUST_NAMED:
            target, query = f"{folder}/{kind_name}.{name}.html", name
        elif kind_name in _RUST_IN_MODULE:
            target, query = f"{folder}/{kind_name}.{name}.html", f"{path.split('::')[-1]}::{name}"
        else:
            continue
        out.append(Entry(query, target))
    return out


# -- wiki (cppreference) -----------------------------------------------------------------------
_SYMBOL = re.compile(r'<a href="([^"]+)"[^>]*>\s*<code>(.*?)</code>\s*</a>', re.S)
_HEADING = re.compile(r'<h1 id="firstHeading"[^>]*>(.*?) Symbol Index</h1>', re.S)


def wiki(corpus: Corpus) -> list[Entry]:
    index = corpus.root / corpus.subtree / "symbol_index.html"
    if not index.is_file():
        raise SystemExit(f"{index} is missing: this cppreference has no symbol index")
    out = []
    pages = [index] + sorted((corpus.root / corpus.subtree / "symbol_index").glob("*.html"))
    for page in pages:
        rel = str(page.relative_to(corpus.root))
        text = page.read_text(encoding="utf-8", errors="replace")
        heading = _HEADING.search(text)
        namespace = html.unescape(heading.group(1)).strip() if heading else "std"
        namespace = namespace if namespace.startswith("std") else "std"
        for href, label in _SYMBOL.findall(text):
            name = html.unescape(re.sub(r"<[^>]+>", "", label)).replace("()", "").replace("<>", "").strip()
            target, _ = _page(rel, href)
            # A link to another page of the index (a namespace's own index) names no page.
            if target and "symbol_index" not in target and re.match(r"^[A-Za-z_][A-Za-z0-9_:]*$", name):
                out.append(Entry(f"{namespace}::{name}", target))
    return out


EXTRACTORS = {"sphinx": sphinx, "javadoc": javadoc, "rustdoc": rustdoc, "wiki": wiki}


def derive(corpus: Corpus) -> tuple[dict[str, list[str]], dict]:
    """{query: [target pages, first = the first entry's]} over the served pages, and counts."""
    served = set(page_files(corpus))
    entries = EXTRACTORS[corpus.kind](corpus)
    merged: dict[str, list[str]] = {}
    outside = 0
    for e in entries:
        target = e.target
        if target.endswith("/"):
            target += "index.html"
        if target not in served or not e.query.strip():
            outside += 1
            continue
        targets = merged.setdefault(e.query, [])
        if target not in targets:
            targets.append(target)
    return merged, {"entries": len(entries), "not_served": outside, "distinct_queries": len(merged)}


def sample(merged: dict[str, list[str]], k: int = SAMPLE, seed: int = SEED) -> list[dict]:
    queries = sorted(merged)
    chosen = random.Random(seed).sample(queries, min(k, len(queries)))
    return [{"q": q, "targets": merged[q]} for q in chosen]


def package_version(package: str) -> str:
    try:
        return subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def document(corpus: Corpus) -> dict:
    merged, counts = derive(corpus)
    return {
        "corpus": corpus.name, "package": corpus.package, "version": package_version(corpus.package),
        "served": f"{corpus.root}/{corpus.subtree}", "index": corpus.kind, "rule": "bench/relevance_queries.py",
        "seed": SEED, "sample": SAMPLE, **counts, "queries": sample(merged),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", help="a corpus (repeatable; default all installed)")
    parser.add_argument("--check", action="store_true", help="re-derive and compare with the committed files")
    args = parser.parse_args()
    failed = False
    for corpus in by_name(args.corpus):
        if not corpus.installed():
            print(f"{corpus.name}: {corpus.package} is not installed; skipped", file=sys.stderr)
            continue
        doc = document(corpus)
        text = json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
        if args.check:
            same = corpus.queries_file.is_file() and corpus.queries_file.read_text(encoding="utf-8") == text
            failed |= not same
            print(f"{corpus.name}: {'same' if same else 'DIFFERS from'} {corpus.queries_file}")
        else:
            corpus.queries_file.write_text(text, encoding="utf-8")
            print(f"{corpus.name}: {doc['entries']} index entries, {doc['not_served']} outside the served pages, "
                  f"{len(doc['queries'])} of {doc['distinct_queries']} distinct queries -> {corpus.queries_file}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
