"""``TestWeb``: a running test web on 127.0.0.1, and what a crawl of it should find.

Layer: testweb. Imports the standard library and the public ``caffeine.index.normalize_url``. Nothing
here touches HBase.

Two modes: a generated web (``TestWeb(pages=N, seed=S)``, ``testweb.generated``), or the
files under a directory (``TestWeb(directory=PATH)``, e.g. a Debian HTML documentation
package). ``set_version(v)`` (or ``POST /_mutate?version=v``) moves a generated web to
version v; ``GET /_version`` tells it. ``requests`` lists every path requested.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from caffeine.index import normalize_url

from testweb.bad import SPECIALS
from testweb.generated import GeneratedWeb
from testweb.handlers import DirectoryHandler, GeneratedHandler, Server
from testweb.language import marker_word

__all__ = ["TestWeb", "serve"]


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
        self.stopping = threading.Event()  # set by stop(): slow handlers stop waiting
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> str:
        if self.directory is not None:
            handler = type("Handler", (DirectoryHandler,), {"web": self})
            handler = functools.partial(handler, directory=str(self.directory))
        else:
            handler = type("Handler", (GeneratedHandler,), {"web": self})
        self._server = Server(("127.0.0.1", self.port), handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="testweb", daemon=True)
        self._thread.start()
        return self.url

    def stop(self) -> None:
        self.stopping.set()  # wakes slow handlers
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

    def note_request(self, path: str) -> None:
        """Record a request of ``path`` (the handlers call it)."""
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
        g = self.generated_web()
        return {self.abs(p): g.respond(p, self.version).status for p in g.reachable_paths()}

    def gone_pages(self) -> dict[str, int]:
        return {url: s for url, s in self.expected_statuses().items() if s in (404, 410)}

    def disallowed_urls(self) -> list[str]:
        """Linked pages that robots.txt forbids (a crawl must never request them)."""
        return [self.abs(p) for p in self.generated_web().private_paths]

    def special_urls(self) -> dict[str, str]:
        """Bad-input page name (``SPECIALS``) -> URL."""
        g = self.generated_web()
        return {name: self.abs(p) for name, p in SPECIALS.items()} if g.include_bad else {}

    def marker(self, url: str) -> str:
        """The unique word of a generated page (shared by its copies and mirror)."""
        g = self.generated_web()
        path = urllib.parse.urlsplit(url).path
        path = g.original_path(path) or path
        i = g.page_index.get(path, g.copies.get(path))
        if i is None:
            raise KeyError(f"{url} is not a generated page")
        return marker_word(i)

    def generated_web(self) -> GeneratedWeb:
        """The generated web this serves; TypeError for a directory's."""
        if self.generated is None:
            raise TypeError("only a generated test web has this")
        return self.generated


def serve(web: TestWeb, out=None) -> None:
    """Run ``web`` until interrupted (the ``caffeine testweb`` command)."""
    out = out or sys.stdout
    base = web.start()
    try:
        print(f"serving {base}/ ({'directory ' + str(web.directory) if web.directory else 'generated web'}); "
              "Ctrl-C stops", file=out, flush=True)
        while True:
            time.sleep(3600)
    finally:
        web.stop()
