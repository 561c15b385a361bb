"""The relevance benchmark's corpora: real documentation sets from Debian's packages.

Each ``Corpus`` names its Debian package, the installed tree, the part of it that is served
and crawled (the larger sets are cut to one documented module or crate, 2,000-4,000 pages, so
each builds in minutes), the page the crawl starts from, and the index of its own that the
judged queries are derived from (``relevance_queries``). Kinds of site, one each: Sphinx
(Python, Django), Javadoc (the JDK's ``java.base``), rustdoc (Rust's ``std``) and a wiki
exported to HTML (cppreference's C++ pages).

``served_tree(corpus)`` is the tree the benchmark serves: a copy of the corpus's pages (HTML
only, the paths relative to the package's root kept, so every relative link inside the cut
resolves) under ``<cache>/<name>``; a link out of the cut answers 404, as a link to a page
a site no longer has would. ``install(corpora)`` installs the missing packages with apt-get
(as root), the benchmark's setup.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"


@dataclass(frozen=True)
class Corpus:
    name: str
    package: str              # the Debian package that installs it
    root: Path                # the installed tree; page paths are relative to it
    subtree: str              # the part served and crawled ("" = all of it)
    seed: str                 # the page the crawl starts from, relative to ``root``
    kind: str                 # which of its own indexes the queries come from (relevance_queries)
    role: str                 # "develop": parameters may be chosen on it; "holdout": reported only

    @property
    def queries_file(self) -> Path:
        return DATA / f"relevance_{self.name}.json"

    def installed(self) -> bool:
        return (self.root / self.seed).is_file()


# Develop / holdout: ranking changes are chosen on the "develop" half and reported on the
# "holdout" half (docs/RANKING.md, "How a ranking change is chosen"); never per-corpus settings.
CORPORA: tuple[Corpus, ...] = (
    Corpus("python", "python3.11-doc", Path("/usr/share/doc/python3.11/html"), "", "index.html",
           "sphinx", "develop"),
    Corpus("javadoc", "openjdk-17-doc", Path("/usr/share/doc/openjdk-17-doc/api"), "java.base/",
           "java.base/module-summary.html", "javadoc", "develop"),
    Corpus("django", "python-django-doc", Path("/usr/share/doc/python-django-doc/html"), "", "index.html",
           "sphinx", "holdout"),
    Corpus("rust", "rust-doc", Path("/usr/share/doc/rust-doc/html"), "std/", "std/index.html",
           "rustdoc", "holdout"),
    Corpus("cppreference", "cppreference-doc-en-html", Path("/usr/share/cppreference/doc/html"), "en/cpp/",
           "en/cpp.html", "wiki", "holdout"),
)


def by_name(names: list[str] | None = None) -> list[Corpus]:
    if not names:
        return list(CORPORA)
    known = {c.name: c for c in CORPORA}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown corpus {', '.join(unknown)}; one of {', '.join(known)}")
    return [known[n] for n in names]


def _prefix_head(corpus: Corpus) -> str:
    return f"bench_rel_{corpus.name}_"


def table_prefix(corpus: Corpus, tag: str) -> str:
    """The table prefix of an index of ``corpus`` built by the benchmark (``tag``: unique)."""
    return f"{_prefix_head(corpus)}{tag}_"


def corpus_of_prefix(prefix: str, corpora: list[Corpus] | tuple[Corpus, ...] = CORPORA) -> Corpus | None:
    """The corpus among ``corpora`` whose ``table_prefix`` ``prefix`` is, or None."""
    found = [c for c in corpora if prefix.startswith(_prefix_head(c))]
    return found[0] if len(found) == 1 else None


def install(corpora: list[Corpus]) -> None:
    """apt-get install the packages of ``corpora`` that are missing (needs root)."""
    missing = sorted({c.package for c in corpora if not c.installed()})
    if not missing:
        return
    if os.geteuid() != 0:
        raise SystemExit(f"missing packages: {' '.join(missing)}; as root: apt-get install {' '.join(missing)}")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True, env=env)


def page_files(corpus: Corpus) -> list[str]:
    """The served pages: every ``.html`` file under the cut, relative to ``root``, sorted."""
    base = corpus.root / corpus.subtree
    pages = sorted(str(p.relative_to(corpus.root)) for p in base.rglob("*.html") if p.is_file())
    if corpus.seed not in pages:
        pages.append(corpus.seed)
    return pages


def cache_dir() -> Path:
    return Path(os.environ.get("CAFFEINE_RELEVANCE_CACHE", "/tmp/caffeine-relevance"))


def served_tree(corpus: Corpus) -> Path:
    """The directory to serve: the cut's pages copied under ``cache_dir()/<name>`` (made once)."""
    target = cache_dir() / corpus.name
    done = target / ".complete"
    if done.is_file():
        return target
    if target.exists():
        shutil.rmtree(target)
    for rel in page_files(corpus):
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(corpus.root / rel, dest)
    done.write_text("")
    return target
