"""The relevance benchmark's judged queries: derived by fixed rules from each corpus's own index.

Each extractor of ``bench/relevance_queries.py`` is run on a small index in its format, and
the committed query files are re-derived from the installed packages and compared byte for
byte (skipped for a package that is not installed), so the benchmark's judgments are exactly
what the documented rules give: nobody's hand in them. The paired test of
``bench/relevance_stats.py`` is checked on cases whose answer is known.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import relevance_queries as rq  # noqa: E402
from relevance_corpora import CORPORA, Corpus  # noqa: E402
from relevance_stats import paired_test  # noqa: E402


def corpus(root: Path, kind: str, subtree: str = "", seed: str = "index.html") -> Corpus:
    return Corpus("fixture", "none", root, subtree, seed, kind, "develop")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def queries(c: Corpus) -> dict[str, list[str]]:
    return rq.derive(c)[0]


def test_sphinx_rules(tmp_path):
    write(tmp_path / "genindex-J.html", """<html><body><table class="indextable"><tr><td><ul>
      <li>
    Java
      <ul><li><a href="reference/datamodel.html#index-13">language</a></li></ul></li>
      <li><a href="library/platform.html#platform.java_ver">java_ver() (in module platform)</a></li>
      <li><a href="library/asyncio-queue.html#asyncio.Queue.join">join() (asyncio.Queue method)</a>
      <ul><li><a href="library/stdtypes.html#bytearray.join">(bytearray method)</a></li>
          <li><a href="library/os.path.html#os.path.join">(in module os.path)</a></li></ul></li>
      <li><a href="library/json.html#module-json">json</a></li>
      <li><a href="library/functions.html#open">open()</a></li>
      <li><a href="glossary.html#term-Jython">Jython</a></li>
      <li><a href="c-api/memory.html#c.PyObject_Free">PyObject_Free (C function)</a></li>
      <li><a href="https://elsewhere.example/x.html">an outside link</a></li>
    </ul></td></tr></table></body></html>""")
    write(tmp_path / "genindex-all.html", "<table class='indextable'><li><a href='x.html#dup'>dup</a></li></table>")
    for page in ("reference/datamodel.html", "library/platform.html", "library/asyncio-queue.html",
                 "library/stdtypes.html", "library/os.path.html", "library/json.html", "library/functions.html",
                 "glossary.html", "c-api/memory.html", "index.html"):
        write(tmp_path / page, "<html></html>")
    assert queries(corpus(tmp_path, "sphinx")) == {
        "Java language": ["reference/datamodel.html"],
        "platform.java_ver": ["library/platform.html"],
        "Queue.join": ["library/asyncio-queue.html"],
        "bytearray.join": ["library/stdtypes.html"],
        "os.path.join": ["library/os.path.html"],
        "json": ["library/json.html"],
        "open": ["library/functions.html"],
        "Jython": ["glossary.html"],
        "PyObject_Free": ["c-api/memory.html"],
    }


def test_javadoc_rules(tmp_path):
    write(tmp_path / "index-files" / "index-1.html", """<dl class="index">
<dt><a href="../java.base/java/util/ArrayList.html#add(E)" class="member-name-link">add(E)</a> - Method in class java.util.<a href="../java.base/java/util/ArrayList.html" title="class in java.util">ArrayList</a></dt>
<dt><a href="../java.base/java/util/Map.Entry.html#getKey()" class="member-name-link">getKey()</a> - Method in interface java.util.Map.Entry</dt>
<dt><a href="../java.base/java/util/ArrayList.html" class="type-name-link" title="class in java.util">ArrayList</a> - Class in java.util</dt>
<dt><a href="../java.base/java/util/concurrent/package-summary.html">java.util.concurrent</a> - package java.util.concurrent</dt>
<dt><a href="../java.desktop/java/awt/List.html#add(java.lang.String)" class="member-name-link">add(String)</a> - Method in class java.awt.List</dt>
</dl>""")
    for page in ("java.base/java/util/ArrayList.html", "java.base/java/util/Map.Entry.html",
                 "java.base/java/util/concurrent/package-summary.html",
                 "java.base/module-summary.html", "java.desktop/java/awt/List.html"):
        write(tmp_path / page, "<html></html>")
    found = queries(corpus(tmp_path, "javadoc", "java.base/", "java.base/module-summary.html"))
    # The java.desktop member is outside the served module.
    assert found == {"ArrayList.add": ["java.base/java/util/ArrayList.html"],
                     "Map.Entry.getKey": ["java.base/java/util/Map.Entry.html"],
                     "ArrayList": ["java.base/java/util/ArrayList.html"],
                     "java.util.concurrent": ["java.base/java/util/concurrent/package-summary.html"]}


def test_rustdoc_rules(tmp_path):
    index = {"std": {"doc": "", "t": [0, 3, 11, 5, 14, 4, 13],
                     "n": ["collections", "HashMap", "insert", "spawn", "vec", "Option", "Some"],
                     "q": ["std", "std::collections", "", "std::thread", "std", "std::option", ""],
                     "d": [""] * 7, "i": [0, 0, 1, 0, 0, 0, 2],
                     "p": [[3, "HashMap"], [4, "Option"]]}}
    body = json.dumps(index).replace("\\", "\\\\").replace("'", "\\'")
    write(tmp_path / "search-index1.63.0.js", "var searchIndex = JSON.parse('" + body + "');\n")
    for page in ("std/index.html", "std/collections/index.html", "std/collections/struct.HashMap.html",
                 "std/thread/fn.spawn.html", "std/macro.vec.html", "std/option/enum.Option.html"):
        write(tmp_path / page, "<html></html>")
    assert queries(corpus(tmp_path, "rustdoc", "std/", "std/index.html")) == {
        "std::collections": ["std/collections/index.html"],
        "HashMap": ["std/collections/struct.HashMap.html"],
        "HashMap::insert": ["std/collections/struct.HashMap.html"],
        "thread::spawn": ["std/thread/fn.spawn.html"],
        "vec": ["std/macro.vec.html"],
        "Option": ["std/option/enum.Option.html"],
        "Option::Some": ["std/option/enum.Option.html"],
    }


def test_wiki_rules(tmp_path):
    write(tmp_path / "en/cpp/symbol_index.html", """<h1 id="firstHeading" class="firstHeading">C++ Symbol Index</h1>
<a href="../cpp.html" title="cpp"> C++</a>
<p><a href="numeric/math/abs.html"> <code>abs()</code></a> (int) <br>
<a href="numeric/math/fabs.html"> <code>abs()</code></a> (float) <br>
<a href="algorithm/accumulate.html"> <code>accumulate()&lt;&gt;</code></a> <br>
<a href="symbol_index/chrono.html"> <code>chrono</code></a> <br>""")
    write(tmp_path / "en/cpp/symbol_index/chrono.html", """<h1 id="firstHeading" class="firstHeading">std::chrono Symbol Index</h1>
<a href="../chrono/duration.html" title="cpp/chrono/duration"> <code>duration&lt;&gt;</code></a>""")
    for page in ("en/cpp.html", "en/cpp/numeric/math/abs.html", "en/cpp/numeric/math/fabs.html",
                 "en/cpp/algorithm/accumulate.html", "en/cpp/chrono/duration.html"):
        write(tmp_path / page, "<html></html>")
    found = queries(corpus(tmp_path, "wiki", "en/cpp/", "en/cpp.html"))
    assert found == {"std::abs": ["en/cpp/numeric/math/abs.html", "en/cpp/numeric/math/fabs.html"],
                     "std::accumulate": ["en/cpp/algorithm/accumulate.html"],
                     "std::chrono::duration": ["en/cpp/chrono/duration.html"]}


def test_sample_is_fixed_by_its_seed():
    merged = {f"q{i}": [f"p{i}.html"] for i in range(1000)}
    first = rq.sample(merged, 250, seed=7)
    assert len(first) == 250 and len({q["q"] for q in first}) == 250
    assert first == rq.sample(dict(reversed(list(merged.items()))), 250, seed=7)
    assert first != rq.sample(merged, 250, seed=8)


@pytest.mark.parametrize("c", CORPORA, ids=[c.name for c in CORPORA])
def test_committed_queries_are_what_the_rules_derive(c):
    if not c.installed():
        pytest.skip(f"{c.package} is not installed")
    committed = json.loads(c.queries_file.read_text(encoding="utf-8"))
    derived = rq.document(c)
    assert len(committed["queries"]) >= 200
    assert derived["queries"] == committed["queries"], (
        f"re-derive with: python3 bench/relevance_queries.py --corpus {c.name}")


def test_paired_test_on_known_cases():
    same = paired_test([0.5, 1.0, 0.0, 0.25], [0.5, 1.0, 0.0, 0.25])
    assert same.difference == 0 and same.p_value == 1.0 and same.wins == same.losses == 0
    better = paired_test([1.0] * 30, [0.5] * 30)
    assert better.difference == pytest.approx(0.5) and better.p_value < 0.001
    assert better.ci_low == pytest.approx(0.5) and better.wins == 30
    mixed = paired_test([1.0, 0.0] * 20, [0.0, 1.0] * 20)
    assert mixed.p_value > 0.5 and mixed.ci_low < 0 < mixed.ci_high
