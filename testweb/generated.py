"""The generated web: what each path answers at each version, a pure function of
(pages, seed, version).

Layer: testweb. Imports the standard library only; pure: no sockets.

- ``/``: links to every site index, the mirror, the duplicate copies, the robots-disallowed
  ``/private/`` pages and the bad-input pages;
- ``/siteK/``: site K's index, linking (relatively) to every page of the site;
- ``/siteK/pageJ.html``: text in a seeded pseudo-language (``testweb.language``), one unique
  marker word (the page and its exact copies are the only answers to it), a
  ``<script>``/``<style>`` whose words must not be indexed, and outlinks whose targets follow
  a Zipf law (a few pages get most inlinks);
- ``/siteK/copyC.html``: the exact bytes of another page (duplicate content);
- ``/mirrorK/...``: a whole site served again under another prefix, byte for byte (its
  relative links stay inside the mirror);
- ``/private/...``: disallowed by ``/robots.txt``;
- ``/bad/...``: the bad-input pages (``testweb.bad``).

Each version step changes the text and links of about 10% of the live pages and removes
about 5% for good (404 or 410); copies and mirrors follow their originals.
"""

from __future__ import annotations

import functools
import random

from testweb.bad import SPECIALS, bad_page
from testweb.language import marker_word, vocabulary, zipf_cum_weights
from testweb.response import NOT_FOUND_BODY, Response, html_page

__all__ = ["GeneratedWeb"]


class GeneratedWeb:
    """What the server answers for each path at each version; pure (no sockets)."""

    def __init__(
        self,
        pages: int = 100,
        seed: int = 0,
        *,
        sites: int | None = None,
        include_bad: bool = True,
        huge_bytes: int = 3 * 1024 * 1024,
        slow_s: float = 5.0,
    ) -> None:
        if pages < 1:
            raise ValueError("pages must be >= 1")
        self.pages = pages
        self.seed = seed
        self.include_bad = include_bad
        self.huge_bytes = huge_bytes
        self.slow_s = slow_s
        self.sites = sites or max(2, min(8, pages // 15))
        rng = random.Random(f"{seed}:layout")
        self.vocab = vocabulary(seed, 3000)
        self.vocab_weights = zipf_cum_weights(len(self.vocab))
        # Page i lives in site i % sites; popularity ranks are a seeded permutation.
        self.page_paths = [f"/site{i % self.sites}/page{i // self.sites}.html" for i in range(pages)]
        self.page_index = {p: i for i, p in enumerate(self.page_paths)}
        self.popularity = list(range(pages))
        rng.shuffle(self.popularity)
        self.link_weights = zipf_cum_weights(pages)
        # Exact copies: ~6% of pages (at least one) get a copy in a random site.
        n_copies = max(1, pages * 6 // 100)
        originals = rng.sample(range(pages), min(n_copies, pages))
        self.copies: dict[str, int] = {}
        for c, original in enumerate(originals):
            self.copies[f"/site{rng.randrange(self.sites)}/copy{c}.html"] = original
        # One mirrored site.
        self.mirrored_site = rng.randrange(self.sites)
        self.private_paths = [f"/private/secret{k}.html" for k in range(3)]

    # -- versions: which pages changed or went away ------------------------------------------
    @functools.lru_cache(maxsize=64)
    def _state(self, version: int) -> tuple[tuple[int, ...], dict[int, int]]:
        """(content version of each page, {page: gone status}) at ``version``."""
        content = [0] * self.pages
        gone: dict[int, int] = {}
        for v in range(1, version + 1):
            rng = random.Random(f"{self.seed}:version:{v}")
            live = [i for i in range(self.pages) if i not in gone]
            for i in rng.sample(live, max(1, len(live) // 10)) if live else []:
                content[i] += 1
            live = [i for i in range(self.pages) if i not in gone]
            for i in rng.sample(live, max(1, len(live) // 20)) if len(live) > 1 else []:
                gone[i] = 404 if rng.random() < 0.5 else 410
        return tuple(content), gone

    # -- answering ---------------------------------------------------------------------------
    def respond(self, path: str, version: int) -> Response:
        if path == "/robots.txt":
            return Response(200, "text/plain", b"User-agent: *\nDisallow: /private/\n")
        if path == "/":
            return Response(200, body=self._root())
        original_path = self.original_path(path)
        if original_path is None:
            return Response(404, body=NOT_FOUND_BODY)
        if original_path != path:  # mirrors answer with the original's bytes
            return self.respond(original_path, version)
        site = self._site_of_index(path)
        if site is not None:
            return Response(200, body=self._site_index(site))
        if path in self.page_index:
            return self._page(self.page_index[path], version)
        if path in self.copies:
            return self._page(self.copies[path], version)
        if path in self.private_paths:
            return Response(200, body=html_page("Private", "<p>nobody may crawl this</p>"))
        if self.include_bad and path.startswith("/bad/"):
            return bad_page(path, seed=self.seed, huge_bytes=self.huge_bytes, slow_s=self.slow_s,
                            private_path=self.private_paths[0])
        return Response(404, body=NOT_FOUND_BODY)

    def original_path(self, path: str) -> str | None:
        """The path whose bytes ``path`` serves: the original of a mirrored one, None for a
        path under another (unmirrored) ``/mirrorK/``, else ``path`` itself."""
        prefix = f"/mirror{self.mirrored_site}/"
        if path.startswith(prefix):
            return f"/site{self.mirrored_site}/" + path[len(prefix):]
        if path.startswith("/mirror"):
            return None
        return path

    def _site_of_index(self, path: str) -> int | None:
        for site in range(self.sites):
            if path in (f"/site{site}/", f"/site{site}/index.html"):
                return site
        return None

    def _root(self) -> bytes:
        items = [f'<li><a href="/site{s}/">Site {s}</a></li>' for s in range(self.sites)]
        items.append(f'<li><a href="/mirror{self.mirrored_site}/">Mirror of site {self.mirrored_site}</a></li>')
        items += [f'<li><a href="{p}">A copy</a></li>' for p in sorted(self.copies)]
        items += [f'<li><a href="{p}">Private</a></li>' for p in self.private_paths]
        if self.include_bad:
            items += [f'<li><a href="{p}">{name}</a></li>' for name, p in SPECIALS.items()]
        return html_page("Test web", "<h1>Test web</h1>\n<ul>\n" + "\n".join(items) + "\n</ul>")

    def _site_index(self, site: int) -> bytes:
        prefix = f"/site{site}/"
        names = [p[len(prefix):] for p in self.page_paths if p.startswith(prefix)]
        names += sorted(p[len(prefix):] for p in self.copies if p.startswith(prefix))
        items = "\n".join(f'<li><a href="{name}">{name}</a></li>' for name in names)
        # Relative links on purpose: the mirror serves these bytes and stays inside itself.
        return html_page(f"Site {site}", f"<h1>Site {site}</h1>\n<ul>\n{items}\n</ul>")

    def _words(self, rng: random.Random, n: int) -> list[str]:
        return rng.choices(self.vocab, cum_weights=self.vocab_weights, k=n)

    def _page(self, i: int, version: int) -> Response:
        content, gone = self._state(version)
        if i in gone:
            status = gone[i]
            return Response(status, body=f"<html><body>{status}</body></html>".encode())
        return Response(200, body=self._page_body(i, content[i]))

    @functools.lru_cache(maxsize=4096)
    def _page_body(self, i: int, content_version: int) -> bytes:
        rng = random.Random(f"{self.seed}:page:{i}:{content_version}")
        own_site_prefix = self.page_paths[i].rsplit("/", 1)[0] + "/"
        title = " ".join(self._words(rng, rng.randint(2, 4))).capitalize()
        paragraphs = []
        for _ in range(rng.randint(2, 5)):
            words = self._words(rng, rng.randint(15, 70))
            for _ in range(rng.randint(0, 3)):
                target = self.page_paths[self.popularity[rng.choices(range(self.pages), cum_weights=self.link_weights)[0]]]
                href = target[len(own_site_prefix):] if target.startswith(own_site_prefix) else target
                anchor = " ".join(self._words(rng, rng.randint(1, 3)))
                words.insert(rng.randrange(len(words) + 1), f'<a href="{href}">{anchor}</a>')
            paragraphs.append("<p>" + " ".join(words) + "</p>")
        body = (
            f"<h1>{title}</h1>\n" + "\n".join(paragraphs)
            + f'\n<p class="marker">{marker_word(i)}</p>'
            + "\n<script>var hidden = 'scriptword';</script><style>.marker { color: gray }</style>"
        )
        return html_page(title, body)

    # -- what a crawl should find ---------------------------------------------------------------
    def reachable_paths(self) -> list[str]:
        """Generated (non-special, robots-allowed) paths linked from ``/``, at any version."""
        mirror_prefix = f"/site{self.mirrored_site}/"
        paths = ["/"] + [f"/site{s}/" for s in range(self.sites)] + [f"/mirror{self.mirrored_site}/"]
        paths += self.page_paths + sorted(self.copies)
        paths += [f"/mirror{self.mirrored_site}/" + p[len(mirror_prefix):]
                  for p in self.page_paths + sorted(self.copies) if p.startswith(mirror_prefix)]
        return paths

