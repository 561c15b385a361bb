"""Real-world charsets and URL spellings, end to end: served, crawled, indexed, counted.

A local server answers with Shift_JIS (labelled ``x-sjis``, in the header and in a meta tag,
and undeclared), GBK (labelled ``gb2312``) and windows-1254 (labelled ``iso-8859-9``) pages,
and a page that links to one resource under three spellings (``/%7Euser/``, ``/%7euser/``,
``/~user/``) and to ``faß.de`` under its Unicode and its IDNA2008 spelling. The crawl runs with
the observer chain to quiescence; the words of every page must be in the postings under the
page's URL, the server must have been asked for ``/~user/`` exactly once, and the outlinks
must hold one URL per resource. Runs on the in-memory store and on real HBase.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections import Counter

from caffeine.index import tokenize
from caffeine.observers.app import application
from caffeine.index.schema import REPOSITORY
from caffeine.percolator.engine_status import wait_until_quiescent
from caffeine.percolator.worker import Worker
from crawler.crawl import crawl
from support.reference_index import incremental

JAPANESE = "日本語のページです。検索エンジンのテストをしています。東京都の天気は晴れです。"
JAPANESE_META = "大阪府の天気は曇りです。明日は雨が降るでしょう。"
JAPANESE_BARE = "京都の寺院は美しいです。秋には紅葉を見に多くの人が訪れます。"
CHINESE = "中文网页的测试内容，搜索引擎。今天北京的天气很好。堃喆镕"  # the last three: GBK, not GB2312
TURKISH = "“ağaç” ışık şeker € fiyatı"


def html(text: str, head: str = "") -> str:
    return f"<html><head>{head}<title>t</title></head><body><p>{text}</p></body></html>"


PAGES = {
    "/sjis.html": ("text/html; charset=x-sjis", html(JAPANESE).encode("shift_jis"), JAPANESE),
    "/sjis-meta.html": ("text/html", html(JAPANESE_META, '<meta http-equiv="Content-Type" '
                                                         'content="text/html; charset=x-sjis">').encode("shift_jis"),
                        JAPANESE_META),
    "/sjis-bare.html": ("text/html", html(JAPANESE_BARE).encode("shift_jis"), JAPANESE_BARE),
    "/gbk.html": ("text/html", html(CHINESE, '<meta charset="gb2312">').encode("gbk"), CHINESE),
    "/tr.html": ("text/html; charset=iso-8859-9", html(TURKISH).encode("cp1254"), TURKISH),
    "/~user/": ("text/html; charset=utf-8", html("tilde home page").encode(), "tilde home page"),
}
HOME = html(" ".join(f'<a href="{p}">{p}</a>' for p in PAGES if p != "/~user/")
            + '<a href="/%7Euser/">a</a> <a href="/%7euser/">b</a> <a href="/~user/">c</a>'
            + '<a href="http://faß.de/">d</a> <a href="http://xn--fa-hia.de/">e</a>').encode()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    asked: list[str]

    def do_GET(self):
        self.asked.append(self.path)
        if self.path == "/":
            ctype, body = "text/html; charset=utf-8", HOME
        elif self.path in PAGES:
            ctype, body, _ = PAGES[self.path]
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):
        pass


def test_legacy_charsets_and_url_spellings_crawled_into_the_index(fresh_cluster):
    asked: list[str] = []
    handler = type("Handler", (_Handler,), {"asked": asked})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with Worker(fresh_cluster, application, threads=2):
            crawl(fresh_cluster, [base + "/"], depth=1, delay=0, timeout=3.0, workers=2)
            wait_until_quiescent(fresh_cluster, application.observed_tables, timeout_s=120, poll_s=0.1)
    finally:
        server.shutdown()
        server.server_close()

    counts = Counter(asked)
    assert counts["/~user/"] == 1 and not [p for p in asked if "%7" in p], asked
    assert all(n == 1 for n in counts.values()), counts

    index = incremental(fresh_cluster)
    for path, (_, _, text) in PAGES.items():
        url = base + path
        assert url in index["docs"], url
        for term in tokenize(text):
            assert url in index["postings"].get(term, {}), (path, term)
    assert "ağaç" in index["postings"] and "堃喆镕" in index["postings"]

    with fresh_cluster.begin() as txn:
        keys = [k.decode() for k, _ in txn.scan(REPOSITORY, columns=["page:meta"])]
        outlinks = json.loads(txn.get_row(REPOSITORY, base + "/", ["doc:outlinks"])["doc:outlinks"])
    assert [k for k in keys if "user" in k] == [base + "/~user/"]
    targets = [target for target, _ in outlinks]
    # Outlinks are one entry per target: three spellings, one URL; two hosts spellings, one host.
    assert targets.count(base + "/~user/") == 1 and not [t for t in targets if "%7" in t]
    assert targets.count("http://xn--fa-hia.de/") == 1 and "http://fass.de/" not in targets
    assert len(targets) == len(PAGES) + 1
