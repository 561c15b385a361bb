"""The small web the search tests index: seeded filler pages and pages whose answers are known.

Layer: test support. ``build_web`` is the web (``tests/search/test_api.py``'s docstring says
what each known page is for), ``page`` one page of it as the crawler records it (page:meta,
content), ``index_web`` feeds pages into ``repository`` and runs the observer chain in-process
until quiescent. ``tests/search/conftest.py`` indexes it once per module (``indexed``).
"""

from __future__ import annotations

import json
import random

from caffeine.index.schema import PAGE_CONTENT, PAGE_META, REPOSITORY
from caffeine.observers.app import application

BASE = "http://web.test/"
FILLER = ("amber basalt cedar dune ember fjord granite heath inlet juniper kelp loam moss "
          "nectar oak pebble quartz reed sage tundra umber vale willow yarrow").split()


def page(url: str, title: str, body: str, links=(), status: int = 200, head: str = "") -> tuple[str, tuple[dict, bytes]]:
    """A fetched page as the crawler records it; ``head``: markup for its ``<head>`` (a
    canonical link, a robots meta)."""
    anchors = "".join(f'<p><a href="{target}">{anchor}</a></p>' for target, anchor in links)
    html = f"<html><head><title>{title}</title>{head}</head><body><p>{body}</p>{anchors}</body></html>"
    meta = {"url": url, "status": status, "content_type": "text/html; charset=utf-8", "fetched_at": 1_700_000_000.0,
            "final_url": url, "error": None, "truncated": False, "bytes": len(html)}
    return url, (meta, html.encode())


def build_web(fillers: int = 36, seed: int = 11) -> dict[str, tuple[dict, bytes]]:
    rng = random.Random(seed)
    u = lambda name: BASE + name  # noqa: E731
    pages = dict([
        page(u("espresso.html"), "All about espresso",
             "espresso is coffee brewed by forcing hot water through finely ground beans; a good espresso "
             "has crema", links=[(u("popular.html"), "a popular page")]),
        page(u("dup-a.html"), "Zanzibar notes", "zanzibar spice island notes cloves nutmeg"),
        page(u("dup-b.html"), "Zanzibar notes", "zanzibar spice island notes cloves nutmeg"),
        page(u("mirror/dup-c.html"), "Zanzibar notes", "zanzibar spice island notes cloves nutmeg"),
        page(u("popular.html"), "Quokka facts", "quokka smiles on rottnest island plenty"),
        page(u("lonely.html"), "Quokka trivia", "quokka smiles on rottnest island seldom"),
        page(u("walrus.html"), "Walrus and marmot", "walrus tusks and a marmot burrow"),
        page(u("escape.html"), "Markup &lt;b&gt; in text",
             "xylophone &lt;script&gt;alert(1)&lt;/script&gt; &amp; more xylophone"),
        page(u("gone.html"), "Gone", "nothing", status=404),
    ])
    for i in range(fillers):
        words = [rng.choice(FILLER) for _ in range(rng.randrange(8, 30))]
        if i % 3 == 0:
            words.insert(rng.randrange(len(words)), "marmot")
        links = [(u(f"f{rng.randrange(fillers)}.html"), rng.choice(FILLER)) for _ in range(rng.randrange(1, 4))]
        if i < 6:  # six pages vote for popular.html, four for dup-b.html, one for dup-a.html
            links.append((u("popular.html"), "see also"))
        if 6 <= i < 10:
            links.append((u("dup-b.html"), "see also"))
        if i == 10:
            links.append((u("dup-a.html"), "see also"))
        if i == 11:
            links.append((u("espresso.html"), "see also"))
        url, record = page(u(f"f{i}.html"), f"Filler {i}", " ".join(words), links)
        pages[url] = record
    return pages


def feed(cluster, pages, batch: int = 10) -> None:
    """Write pages as the crawler does (page:meta, page:content), ``batch`` per transaction."""
    items = sorted(pages.items())

    def write(chunk):
        def fn(txn):
            for url, (meta, content) in chunk:
                txn.set(REPOSITORY, url, PAGE_META, json.dumps(meta))
                txn.set(REPOSITORY, url, PAGE_CONTENT, content)
        return fn

    for i in range(0, len(items), batch):
        cluster.run(write(items[i:i + batch]))  # retried on conflicts with the running chain


def index_web(cluster, pages, timeout_s: float = 300) -> None:
    """Feed the pages and run the observer chain in-process until quiescent."""
    from caffeine.percolator.engine_status import wait_until_quiescent
    from caffeine.percolator.worker import Worker

    application.install(cluster)
    with Worker(cluster, application, threads=4):
        feed(cluster, pages)
        wait_until_quiescent(cluster, application.observed_tables, timeout_s=timeout_s, poll_s=0.1)
