"""``parse_html`` per page against the BeautifulSoup implementation it replaced, and proof
that both return identical documents.

    python3 bench/bench_parse.py [--pages 200] [--repeats 5]        # time, old vs new
    python3 bench/bench_parse.py --compare [--fuzz 20000] [--testweb-pages 300]

Timing: over real HTML (Debian's python3.11-doc), each page parsed by the old and the new
implementation in alternation (the order flips each repeat, so both see the same machine
load); per page the median of ``--repeats`` wall-clock times; prints the median over pages
of each, and the median over pages of the per-page ratio old/new.

``--compare``: asserts ``parse_html(...) == reference_parse_html(...)`` (every field of the
``ParsedDocument``) on (a) every page under the docs directory, (b) every page of the
generated test web at versions 0-2, the ``/bad/`` pages included, (c) every input the parse
tests hand to ``parse_html`` (recorded while running them), (d) ``--fuzz`` random HTML
fragments (``tests/support/parse_reference.py``'s ``random_fragment``) and its edge cases; and
on each, that ``parse_links`` (the crawler's) gives what ``parse_html`` gives for the links'
targets, canonical, robots, refresh and encoding. Prints pages compared and differences per
corpus; exits 1 on any difference. No HBase needed.
"""

from __future__ import annotations

import argparse
import io
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "tests"))

from caffeine.index.parse import parse_html, parse_links  # noqa: E402
from support.parse_reference import EDGE_CASES, followed, random_fragment, reference_parse_html  # noqa: E402

DOCS = "/usr/share/doc/python3.11/html"
PARSE_TESTS = ("tests/unit/test_index_core.py", "tests/unit/test_real_web_text.py")
Page = tuple[str, bytes, "str | None"]  # (url, body, content type)


# -- corpora -------------------------------------------------------------------------------
def docs_pages(directory: str) -> list[Page]:
    files = sorted(Path(directory).rglob("*.html"))
    return [(f"http://docs.test/{f.relative_to(directory)}", f.read_bytes(), "text/html") for f in files]


def testweb_pages(pages: int) -> list[Page]:
    """Every path of a generated web (and its /bad/ and /private/ pages) at versions 0-2,
    with the body and content type the server sends."""
    from testweb import SPECIALS, GeneratedWeb
    from testweb.handlers import GeneratedHandler

    web = GeneratedWeb(pages=pages, seed=7)
    paths = web.reachable_paths() + list(SPECIALS.values()) + web.private_paths + ["/nowhere.html"]
    out = []
    for version in range(3):
        for path in paths:
            r = web.respond(path, version)
            body = r.raw if r.raw is not None else r.body
            if r.stream_bytes:  # the huge page: what the handler streams
                sink = type("Sink", (), {"wfile": io.BytesIO()})()
                GeneratedHandler._stream_html(sink, r.stream_bytes)
                body = sink.wfile.getvalue()
            out.append((f"http://127.0.0.1:8000{path}", body, r.content_type))
    return out


def test_inputs() -> list[Page]:
    """What the parse tests pass to ``parse_html``, recorded while running them."""
    import pytest

    import caffeine.index
    import caffeine.index.documents
    import caffeine.index.parse

    recorded: list[Page] = []

    def recording(content, url, content_type):
        recorded.append((url, content, content_type))
        return parse_html(content, url, content_type)

    modules = (caffeine.index, caffeine.index.parse, caffeine.index.documents)
    for module in modules:
        module.parse_html = recording
    try:
        # In this process ("-n 0"): the suite's default is two xdist workers, whose calls this
        # process would never see.
        pytest.main(["-q", "-p", "no:cacheprovider", "-n", "0", "--rootdir", str(ROOT),
                     *[str(ROOT / t) for t in PARSE_TESTS]])
    finally:
        for module in modules:
            module.parse_html = parse_html
    if not recorded:
        raise SystemExit("the parse tests handed parse_html nothing to record: not run in this process?")
    return recorded


def fuzz_pages(n: int, seed: int = 0) -> list[Page]:
    rng = random.Random(seed)
    types = ("text/html", None, "text/html; charset=utf-8", "text/html; charset=windows-1252")
    urls = ("http://h.test/d/p.html", "http://h.test/", "not a url")
    pages = [(urls[i % len(urls)], case.encode("utf-8", "surrogatepass"), "text/html")
             for i, case in enumerate(EDGE_CASES)]
    for _ in range(n):
        fragment = random_fragment(rng, rng.randrange(1, 30))
        pages.append((rng.choice(urls), fragment.encode("utf-8"), rng.choice(types)))
    return pages


# -- comparing and timing ------------------------------------------------------------------
def compare(name: str, pages: list[Page]) -> int:
    differences = link_differences = 0
    for url, body, content_type in pages:
        old = reference_parse_html(body, url, content_type)
        new = parse_html(body, url, content_type)
        if old != new:
            differences += 1
            if differences <= 5:
                fields = [f for f in ("title", "text", "links", "canonical", "encoding")
                          if getattr(old, f) != getattr(new, f)]
                print(f"  DIFF {name} {url} fields={fields} body={body[:300]!r}", file=sys.stderr)
        if followed(parse_links(body, url, content_type)) != followed(new):
            link_differences += 1
            if link_differences <= 5:
                print(f"  LINKS DIFF {name} {url} body={body[:300]!r}", file=sys.stderr)
    print(f"| {name} | {len(pages)} | {differences} | {link_differences} |")
    return differences + link_differences


def timing(pages: list[Page], repeats: int) -> None:
    old_times: list[list[float]] = [[] for _ in pages]
    new_times: list[list[float]] = [[] for _ in pages]
    links_times: list[list[float]] = [[] for _ in pages]
    for r in range(repeats):
        for i, (url, body, content_type) in enumerate(pages):
            order = ((reference_parse_html, old_times), (parse_html, new_times), (parse_links, links_times))
            for parse, times in order if r % 2 == 0 else order[::-1]:
                t0 = time.perf_counter()
                parse(body, url, content_type)
                times[i].append(time.perf_counter() - t0)
    old = [statistics.median(t) for t in old_times]
    new = [statistics.median(t) for t in new_times]
    links = [statistics.median(t) for t in links_times]
    ratios = [o / n for o, n in zip(old, new)]
    print("| implementation | median ms per page |")
    print("|---|---|")
    print(f"| BeautifulSoup (before) | {1000 * statistics.median(old):.2f} |")
    print(f"| lxml walk (now) | {1000 * statistics.median(new):.2f} |")
    print(f"| lxml walk, links only (``parse_links``, the crawler's) | "
          f"{1000 * statistics.median(links):.2f} |")
    print(f"\nmedian per-page ratio before/now: {statistics.median(ratios):.2f}x "
          f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x) over {len(pages)} pages x {repeats} repeats")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", action="store_true", help="assert identical results on every corpus")
    parser.add_argument("--docs", default=DOCS, help="directory of real HTML pages")
    parser.add_argument("--pages", type=int, default=200, help="docs pages to time (evenly spread)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--fuzz", type=int, default=20000, help="random fragments to compare")
    parser.add_argument("--testweb-pages", type=int, default=300, help="size of the generated web to compare")
    args = parser.parse_args()
    print("command: python3 bench/bench_parse.py " + " ".join(sys.argv[1:]))
    if args.compare:
        corpora = {
            "parse tests' inputs": test_inputs(),
            "python3.11-doc": docs_pages(args.docs),
            "generated test web (v0-2, /bad/ included)": testweb_pages(args.testweb_pages),
            "random fragments + edge cases": fuzz_pages(args.fuzz),
        }
        print("\n| corpus | pages compared | differences | parse_links differences |\n|---|---|---|---|")
        differences = sum(compare(name, pages) for name, pages in corpora.items())
        return 1 if differences else 0
    pages = docs_pages(args.docs)
    pages = pages[::max(1, len(pages) // args.pages)][:args.pages]
    timing(pages, args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
