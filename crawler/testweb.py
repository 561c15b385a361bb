"""A local, reproducible web to crawl: generated sites with known answers, plus bad inputs.

Layer: crawler (test support and a ``caffeine testweb`` command; imports only the standard
library and ``caffeine.index.urls``). Nothing here touches HBase.

Two modes, both served by ``http.server.ThreadingHTTPServer`` on 127.0.0.1:

* **generated** (``TestWeb(pages=N, seed=S)``): a pure function of (pages, seed, version),
  so every run serves the same bytes and a test can compute the expected index on its own
  from ``expected_pages()``:

  - ``/``: links to every site index, the mirror, the duplicate copies, the robots-
    disallowed ``/private/`` pages and the bad-input pages;
  - ``/siteK/``: site K's index, linking (relatively) to every page of the site;
  - ``/siteK/pageJ.html``: text in a seeded pseudo-language (Zipf-distributed words, some
    with non-ASCII letters), one unique marker word (``marker(url)``: the page and its exact
    copies are the only answers to it), a ``<script>``/``<style>`` whose words must not be
    indexed, and outlinks whose targets follow a Zipf law (a few pages get most inlinks);
  - ``/siteK/copyC.html``: the exact bytes of another page (duplicate content);
  - ``/mirrorK/...``: a whole site served again under another prefix, byte for byte (its
    relative links stay inside the mirror);
  - ``/private/...``: disallowed by ``/robots.txt``; ``requests`` shows nobody fetched them;
  - ``/bad/...``: malformed HTML, latin-1 with and without a declared charset, binary junk
    served as text/html, a page larger than the crawler's cap, an empty page, a self-link,
    unparseable links, a redirect loop, a redirect chain longer than 5, a good redirect, a
    redirect into ``/private/``, a 500, a slow page, a PDF, a body shorter than its
    Content-Length, and a response that is not HTTP at all (``SPECIALS`` names them).

  ``set_version(v)`` (or ``POST /_mutate?version=v``) moves to version v: for each version
  step about 10% of the live pages get new text and links and about 5% disappear for good
  (404 or 410); copies and mirrors follow their originals. ``GET /_version`` tells it.

* **directory** (``TestWeb(directory=PATH)``): the files under PATH, e.g. a Debian HTML
  documentation package (``/usr/share/doc/python3.11/html`` from ``python3.11-doc``).

Python API::

    web = TestWeb(pages=60, seed=7)
    with web as base:                  # "http://127.0.0.1:<free port>"
        crawl(base + "/")
        web.expected_pages()           # {url: body} of every 200 page a full crawl stores
        web.set_version(1)
"""

from __future__ import annotations

import functools
import http.server
import os
import random
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from caffeine.index.urls import normalize_url

__all__ = ["TestWeb", "GeneratedWeb", "Response", "SPECIALS", "serve", "write_warc"]

# Name -> path of each bad-input page (generated mode, include_bad=True).
SPECIALS = {
    "malformed": "/bad/malformed.html",
    "latin1": "/bad/latin1.html",
    "latin1_undeclared": "/bad/latin1-undeclared.html",
    "binary": "/bad/binary.html",
    "huge": "/bad/huge.html",
    "empty": "/bad/empty.html",
    "self_link": "/bad/self.html",
    "bad_links": "/bad/links.html",
    "redirect_loop": "/bad/loop-a.html",
    "redirect_chain": "/bad/chain/0.html",
    "redirect_ok": "/bad/redirect.html",
    "redirect_private": "/bad/to-private.html",
    "server_error": "/bad/error.html",
    "slow": "/bad/slow.html",
    "pdf": "/bad/document.pdf",
    "short_body": "/bad/short-body.html",
    "not_http": "/bad/not-http.html",
}
_CHAIN_LENGTH = 8  # longer than the crawler's default limit of 5 redirects
_HTML = "text/html; charset=utf-8"


@dataclass
class Response:
    status: int
    content_type: str | None = _HTML
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    sleep_s: float = 0.0        # wait this long before answering
    stream_bytes: int = 0       # instead of body: this many bytes of generated HTML
    raw: bytes | None = None    # send these bytes instead of an HTTP response, then close
    short_by: int = 0           # declare this many more bytes than are sent, then close


# -- the pseudo-language -------------------------------------------------------------------

_ONSETS = ["b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "ch", "sh", "tr", "gl"]
_VOWELS = ["a", "e", "i", "o", "u", "ä", "ö", "y", "ai", "ou"]
_CODAS = ["", "", "", "n", "r", "s", "l", "m"]
# Markers start with "qu", which no vocabulary word does, and encode the page number in
# syllables, so each marker is unique by construction.
_MARKER_SYLLABLES = [o + v for o in ("b", "d", "k", "l", "m", "n", "r", "t") for v in ("a", "e", "i", "o")]


def _vocabulary(seed: int, size: int) -> list[str]:
    rng = random.Random(f"{seed}:vocabulary")
    words: list[str] = []
    seen = set()
    while len(words) < size:
        syllables = rng.choice((1, 2, 2, 2, 3, 3, 4))
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))
        if word not in seen and not word.startswith("qu"):
            seen.add(word)
            words.append(word)
    return words


def _marker_word(n: int) -> str:
    digits = []
    while True:
        n, d = divmod(n, len(_MARKER_SYLLABLES))
        digits.append(_MARKER_SYLLABLES[d])
        if n == 0:
            break
    return "qu" + "".join(reversed(digits))


def _zipf_cum_weights(n: int, s: float = 1.1) -> list[float]:
    total, out = 0.0, []
    for rank in range(1, n + 1):
        total += 1.0 / rank**s
        out.append(total)
    return out


# -- the generated web ---------------------------------------------------------------------


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
        self.vocab = _vocabulary(seed, 3000)
        self.vocab_weights = _zipf_cum_weights(len(self.vocab))
        # Page i lives in site i % sites; popularity ranks are a seeded permutation.
        self.page_paths = [f"/site{i % self.sites}/page{i // self.sites}.html" for i in range(pages)]
        self.page_index = {p: i for i, p in enumerate(self.page_paths)}
        self.popularity = list(range(pages))
        rng.shuffle(self.popularity)
        self.link_weights = _zipf_cum_weights(pages)
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
        original_path = self._unmirror(path)
        if original_path is None:
            return Response(404, body=b"<html><body>not here</body></html>")
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
            return Response(200, body=self._html("Private", "<p>nobody may crawl this</p>"))
        if self.include_bad and path.startswith("/bad/"):
            return self._special(path)
        return Response(404, body=b"<html><body>not here</body></html>")

    def _unmirror(self, path: str) -> str | None:
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

    def _html(self, title: str, body: str) -> bytes:
        return (
            "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            f"<title>{title}</title></head>\n<body>\n{body}\n</body></html>\n"
        ).encode("utf-8")

    def _root(self) -> bytes:
        items = [f'<li><a href="/site{s}/">Site {s}</a></li>' for s in range(self.sites)]
        items.append(f'<li><a href="/mirror{self.mirrored_site}/">Mirror of site {self.mirrored_site}</a></li>')
        items += [f'<li><a href="{p}">A copy</a></li>' for p in sorted(self.copies)]
        items += [f'<li><a href="{p}">Private</a></li>' for p in self.private_paths]
        if self.include_bad:
            items += [f'<li><a href="{p}">{name}</a></li>' for name, p in SPECIALS.items()]
        return self._html("Test web", "<h1>Test web</h1>\n<ul>\n" + "\n".join(items) + "\n</ul>")

    def _site_index(self, site: int) -> bytes:
        prefix = f"/site{site}/"
        names = [p[len(prefix):] for p in self.page_paths if p.startswith(prefix)]
        names += sorted(p[len(prefix):] for p in self.copies if p.startswith(prefix))
        items = "\n".join(f'<li><a href="{name}">{name}</a></li>' for name in names)
        # Relative links on purpose: the mirror serves these bytes and stays inside itself.
        return self._html(f"Site {site}", f"<h1>Site {site}</h1>\n<ul>\n{items}\n</ul>")

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
            + f'\n<p class="marker">{_marker_word(i)}</p>'
            + "\n<script>var hidden = 'scriptword';</script><style>.marker { color: gray }</style>"
        )
        return self._html(title, body)

    def _special(self, path: str) -> Response:
        name = next((n for n, p in SPECIALS.items() if p == path), None)
        if name is None and path.startswith("/bad/chain/"):
            name = "redirect_chain"
        if name == "malformed":
            return Response(200, body=(
                b"<html><head><title>Malformed <b>page</title><body><p>unclosed <div><table><tr><td>cell"
                b"</i></b></span> <<>> &&&; &#xZZ; &bogus; <a href='/site0/'>good link</a"
                b"<a href=\"/site0/page0.html\">another link<p><p>wordafter malformed <!-- unclosed comment"
            ))
        if name == "latin1":
            return Response(200, "text/html; charset=iso-8859-1",
                            "<html><body><p>café naïve façade</p></body></html>".encode("latin-1"))
        if name == "latin1_undeclared":
            return Response(200, "text/html", "<html><body><p>smörgåsbord crème</p></body></html>".encode("latin-1"))
        if name == "binary":
            return Response(200, "text/html", random.Random(f"{self.seed}:binary").randbytes(8192))
        if name == "huge":
            return Response(200, stream_bytes=self.huge_bytes)
        if name == "empty":
            return Response(200, body=b"")
        if name == "self_link":
            return Response(200, body=self._html("Self", '<p><a href="self.html">me</a> <a href="/bad/self.html#top">me again</a></p>'))
        if name == "bad_links":
            links = ["javascript:alert(1)", "mailto:someone@example.com", "http://[bad", "tel:+123",
                     "ftp://example.com/file", "http://", "http://exa mple.com/", "http://host:99999/", "",
                     "/site0/page0.html"]
            body = "".join(f'<a href="{href}">link {n}</a> ' for n, href in enumerate(links))
            return Response(200, body=self._html("Links", f"<p>{body}</p>"))
        if name == "redirect_loop":
            return Response(302, headers={"Location": "/bad/loop-b.html"})
        if path == "/bad/loop-b.html":
            return Response(302, headers={"Location": "/bad/loop-a.html"})
        if name == "redirect_chain":
            try:
                n = int(path[len("/bad/chain/"):].split(".")[0])
            except ValueError:
                return Response(404)
            if n >= _CHAIN_LENGTH:
                return Response(200, body=self._html("End of chain", "<p>end</p>"))
            return Response(302, headers={"Location": f"/bad/chain/{n + 1}.html"})
        if name == "redirect_ok":
            return Response(301, headers={"Location": "/site0/"})
        if name == "redirect_private":
            return Response(302, headers={"Location": self.private_paths[0]})
        if name == "server_error":
            return Response(500, body=b"<html><body>internal error</body></html>")
        if name == "slow":
            return Response(200, body=self._html("Slow", "<p>finally</p>"), sleep_s=self.slow_s)
        if name == "pdf":
            return Response(200, "application/pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n")
        if name == "short_body":
            return Response(200, body=b"<html><body>cut", short_by=1000)
        if name == "not_http":
            return Response(0, raw=b"THIS IS NOT HTTP\x00\xff\r\n\r\n")
        return Response(404, body=b"<html><body>not here</body></html>")

    # -- what a crawl should find ---------------------------------------------------------------
    def reachable_paths(self) -> list[str]:
        """Generated (non-special, robots-allowed) paths linked from ``/``, at any version."""
        mirror_prefix = f"/site{self.mirrored_site}/"
        paths = ["/"] + [f"/site{s}/" for s in range(self.sites)] + [f"/mirror{self.mirrored_site}/"]
        paths += self.page_paths + sorted(self.copies)
        paths += [f"/mirror{self.mirrored_site}/" + p[len(mirror_prefix):]
                  for p in self.page_paths + sorted(self.copies) if p.startswith(mirror_prefix)]
        return paths


# -- the HTTP server -----------------------------------------------------------------------


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    # Idle keep-alive connections hold a handler thread; closing must not wait for them.
    block_on_close = False

    def handle_error(self, request, client_address):
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            return  # the client hung up (size cap, timeout): expected here
        super().handle_error(request, client_address)


class _GeneratedHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "CaffeineTestWeb/1"
    timeout = 30  # idle keep-alive connections end eventually
    web: "TestWeb"

    def log_message(self, format, *args):  # quiet: tests read TestWeb.requests instead
        pass

    def do_GET(self):
        self._answer(head=False)

    def do_HEAD(self):
        self._answer(head=True)

    def do_POST(self):
        parts = urllib.parse.urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if parts.path == "/_mutate":
            query = urllib.parse.parse_qs(parts.query)
            try:
                version = int(query.get("version", [""])[0])
            except ValueError:
                self._send(Response(400, "text/plain", b"version=<int> required\n"), head=False)
                return
            self.web.set_version(version)
            self._send(Response(200, "text/plain", f"version {version}\n".encode()), head=False)
            return
        self._send(Response(405, "text/plain", b"method not allowed\n"), head=False)

    def _answer(self, head: bool) -> None:
        path = urllib.parse.urlsplit(self.path).path
        self.web._record(path)
        if path == "/_version":
            self._send(Response(200, "text/plain", f"{self.web.version}\n".encode()), head)
            return
        self._send(self.web.generated.respond(path, self.web.version), head)

    def _send(self, r: Response, head: bool) -> None:
        if r.raw is not None:
            self.wfile.write(r.raw)
            self.close_connection = True
            return
        if r.sleep_s and self.web._stopped.wait(r.sleep_s):
            self.close_connection = True
            return
        length = r.stream_bytes or len(r.body)
        self.send_response(r.status)
        if r.content_type:
            self.send_header("Content-Type", r.content_type)
        for name, value in r.headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(length + r.short_by))
        if r.short_by:
            self.send_header("Connection", "close")
        self.end_headers()
        if head:
            return
        if r.stream_bytes:
            self._stream_html(r.stream_bytes)
        else:
            self.wfile.write(r.body)
        if r.short_by:
            self.close_connection = True

    def _stream_html(self, n: int) -> None:
        head = b"<html><head><title>Huge</title></head><body>\n"
        chunk = b"<p>" + b"huge page filler words repeated " * 30 + b"</p>\n"
        self.wfile.write(head)
        sent = len(head)
        while sent < n:
            piece = chunk[: n - sent]
            self.wfile.write(piece)
            sent += len(piece)


class _DirectoryHandler(http.server.SimpleHTTPRequestHandler):
    web: "TestWeb"

    def log_message(self, format, *args):
        pass

    def send_head(self):
        self.web._record(urllib.parse.urlsplit(self.path).path)
        return super().send_head()


# -- the public wrapper --------------------------------------------------------------------


class TestWeb:
    """A running test web. ``with TestWeb(...) as base_url:`` starts and stops it."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        pages: int = 100,
        seed: int = 0,
        *,
        directory: str | os.PathLike | None = None,
        port: int = 0,
        version: int = 0,
        include_bad: bool = True,
        huge_bytes: int = 3 * 1024 * 1024,
        slow_s: float = 5.0,
        sites: int | None = None,
    ) -> None:
        self.directory = Path(directory).resolve() if directory is not None else None
        self.generated = None if self.directory else GeneratedWeb(
            pages, seed, sites=sites, include_bad=include_bad, huge_bytes=huge_bytes, slow_s=slow_s)
        self.port = port
        self.version = version
        self.requests: list[str] = []  # every path requested, in arrival order
        self._requests_lock = threading.Lock()
        self._stopped = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> str:
        if self.directory is not None:
            handler = type("Handler", (_DirectoryHandler,), {"web": self})
            handler = functools.partial(handler, directory=str(self.directory))
        else:
            handler = type("Handler", (_GeneratedHandler,), {"web": self})
        self._server = _Server(("127.0.0.1", self.port), handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="testweb", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self._stopped.set()  # wakes slow handlers
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _record(self, path: str) -> None:
        with self._requests_lock:
            self.requests.append(path)

    # -- versions and expectations -------------------------------------------------------------
    def set_version(self, version: int) -> None:
        """Change the web to ``version`` (pages change or disappear; see the module doc)."""
        if version < 0:
            raise ValueError("version must be >= 0")
        self.version = version

    def abs(self, path: str) -> str:
        """The normalized absolute URL of ``path`` on this server."""
        return normalize_url(self.url + path)

    def expected_pages(self) -> dict[str, bytes]:
        """URL -> body of every page a full, robots-respecting crawl from ``/`` stores with
        status 200 at the current version (bad-input pages excluded: see ``special_urls``)."""
        if self.directory is not None:
            out = {}
            for path in sorted(self.directory.rglob("*")):
                if path.is_file() and path.suffix.lower() in (".html", ".htm"):
                    rel = path.relative_to(self.directory).as_posix()
                    out[self.abs("/" + urllib.parse.quote(rel))] = path.read_bytes()
            return out
        g = self.generated
        out = {}
        for path in g.reachable_paths():
            r = g.respond(path, self.version)
            if r.status == 200:
                out[self.abs(path)] = r.body
        return out

    def expected_statuses(self) -> dict[str, int]:
        """URL -> HTTP status of every generated page linked from ``/`` (200, 404 or 410)."""
        g = self._generated()
        return {self.abs(p): g.respond(p, self.version).status for p in g.reachable_paths()}

    def gone_pages(self) -> dict[str, int]:
        return {url: s for url, s in self.expected_statuses().items() if s in (404, 410)}

    def disallowed_urls(self) -> list[str]:
        """Linked pages that robots.txt forbids (a crawl must never request them)."""
        return [self.abs(p) for p in self._generated().private_paths]

    def special_urls(self) -> dict[str, str]:
        """Bad-input page name (``SPECIALS``) -> URL."""
        g = self._generated()
        return {name: self.abs(p) for name, p in SPECIALS.items()} if g.include_bad else {}

    def marker(self, url: str) -> str:
        """The unique word of a generated page (shared by its copies and mirror)."""
        g = self._generated()
        path = urllib.parse.urlsplit(url).path
        path = g._unmirror(path) or path
        i = g.page_index.get(path, g.copies.get(path))
        if i is None:
            raise KeyError(f"{url} is not a generated page")
        return _marker_word(i)

    def _generated(self) -> GeneratedWeb:
        if self.generated is None:
            raise TypeError("only a generated test web has this")
        return self.generated


def write_warc(web: TestWeb, path: str | os.PathLike, *, compress: str | None = "records",
               version: str = "1.1", revisits: bool = True) -> int:
    """Write what a full crawl of the generated ``web`` fetches (at its current version) as a
    WARC file with warcio, as a crawler archiving it would: a ``warcinfo`` record, then per
    URL a ``request`` and a ``response`` record (a ``revisit`` instead when ``revisits`` and
    the payload was archived before: copies and mirrors), and a ``metadata`` record every
    tenth URL. ``compress``: "records" (one gzip member per record, the usual ``.warc.gz``),
    "file" (the whole file one gzip stream) or None. ``version``: "1.0" or "1.1". Returns the
    number of response and revisit records. Pages robots.txt forbids are not in it (a crawl
    never fetches them); nor are the bad-input pages."""
    import gzip as gzip_module
    import hashlib
    import io
    import base64

    from warcio.statusandheaders import StatusAndHeaders
    from warcio.warcwriter import WARCWriter

    g = web._generated()
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=compress == "records", warc_version=version)
    writer.write_record(writer.create_warcinfo_record("testweb.warc", {"software": "caffeine testweb",
                                                                        "pages": str(g.pages)}))
    first_by_digest: dict[str, tuple[str, str, str]] = {}
    written = 0
    date = "2026-01-01T00:00:00Z"
    for n, p in enumerate(["/"] + [q for q in g.reachable_paths() if q != "/"]):
        url = web.url + p
        r = g.respond(p, web.version)
        request = StatusAndHeaders(f"GET {p} HTTP/1.1", [("Host", f"127.0.0.1:{web.port}"),
                                                         ("User-Agent", "CaffeineBot/0.1")], is_http_request=True)
        writer.write_record(writer.create_warc_record(url, "request", http_headers=request,
                                                      warc_headers_dict={"WARC-Date": date}))
        headers = [("Content-Type", r.content_type)] if r.content_type else []
        headers += list(r.headers.items()) + [("Content-Length", str(len(r.body)))]
        http = StatusAndHeaders(f"{r.status} {_REASONS.get(r.status, 'Status')}", headers, protocol="HTTP/1.1")
        digest = "sha1:" + base64.b32encode(hashlib.sha1(r.body).digest()).decode()
        if revisits and r.status == 200 and r.body and digest in first_by_digest:
            target, target_date, target_id = first_by_digest[digest]
            record = writer.create_revisit_record(url, digest, target, target_date, http_headers=http,
                                                  warc_headers_dict={"WARC-Date": date, "WARC-Refers-To": target_id})
        else:
            record = writer.create_warc_record(url, "response", payload=io.BytesIO(r.body), http_headers=http,
                                               warc_headers_dict={"WARC-Date": date})
            first_by_digest.setdefault(digest, (url, date, record.rec_headers.get_header("WARC-Record-ID")))
        writer.write_record(record)
        written += 1
        if n % 10 == 0:
            writer.write_record(writer.create_warc_record(url, "metadata", payload=io.BytesIO(b"via: testweb\r\n"),
                                                          warc_content_type="application/warc-fields",
                                                          warc_headers_dict={"WARC-Date": date}))
    data = out.getvalue()
    if compress == "file":
        data = gzip_module.compress(data)
    Path(path).write_bytes(data)
    return written


_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 404: "Not Found", 410: "Gone",
            500: "Internal Server Error"}


def serve(web: TestWeb, out=None) -> None:
    """Run ``web`` until interrupted (the ``caffeine testweb`` command)."""
    import sys

    out = out or sys.stdout
    base = web.start()
    try:
        print(f"serving {base}/ ({'directory ' + str(web.directory) if web.directory else 'generated web'}); "
              "Ctrl-C stops", file=out, flush=True)
        while True:
            time.sleep(3600)
    finally:
        web.stop()
