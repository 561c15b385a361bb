"""A local, reproducible web to crawl: generated sites with known answers, plus bad inputs.

Layer: testweb. A test fixture at application level (imports the standard library, warcio,
and the public ``caffeine.index``; nothing here touches HBase). The crawler's, ingest's and
the search service's tests, the benchmarks, the demo and ``caffeine testweb`` use it.

    language.py   the seeded pseudo-language: vocabulary, Zipf weights, marker words
    response.py   ``Response``: what a path answers (status, body, misbehaviour)
    bad.py        ``SPECIALS``: the bad-input pages under ``/bad/``
    generated.py  ``GeneratedWeb``: every path's answer at every version (pure)
    handlers.py   the HTTP server and its request handlers
    web.py        ``TestWeb``: a running web and what a crawl of it should find; ``serve``
    warc.py       ``write_warc``: a crawl of the web as a WARC archive
    commands.py   ``caffeine testweb``: serve it (an entry point of the group ``caffeine.commands``)

Two modes, both served by ``http.server.ThreadingHTTPServer`` on 127.0.0.1:

* **generated** (``TestWeb(pages=N, seed=S)``): a pure function of (pages, seed, version),
  so every run serves the same bytes and a test can compute the expected index on its own
  from ``expected_pages()``. Site indexes, pages with unique marker words (``marker(url)``:
  the page and its exact copies are the only answers to it), exact copies, a mirrored site,
  robots-disallowed ``/private/`` pages (``requests`` shows nobody fetched them) and the
  ``/bad/`` pages; ``testweb.generated`` describes them. ``set_version(v)`` (or
  ``POST /_mutate?version=v``) moves to version v: pages change or disappear for good.

* **directory** (``TestWeb(directory=PATH)``): the files under PATH, e.g. a Debian HTML
  documentation package (``/usr/share/doc/python3.11/html`` from ``python3.11-doc``).

Python API::

    web = TestWeb(pages=60, seed=7)
    with web as base:                  # "http://127.0.0.1:<free port>"
        crawl(base + "/")
        web.expected_pages()           # {url: body} of every 200 page a full crawl stores
        web.set_version(1)
"""

from testweb.bad import SPECIALS
from testweb.generated import GeneratedWeb
from testweb.response import Response
from testweb.warc import write_warc
from testweb.web import TestWeb, serve

__all__ = ["TestWeb", "GeneratedWeb", "Response", "SPECIALS", "serve", "write_warc"]
