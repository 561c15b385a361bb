"""``crawl --warc``: every HTTP exchange of a crawl archived as WARC request and response records.

Layer: crawler. Imports warcio; no HBase. ``crawler.fetch.Fetcher`` calls ``WarcArchive.write``
once per response it receives (redirect hops, robots.txt and sitemap fetches included), so
the archive holds everything the crawl saw and ``caffeine ingest`` of it rebuilds the crawl's
repository rows (``crawler.ingest``).

What a record holds:

* a ``request`` record (the GET line and the headers sent) and a ``response`` record
  (status line, headers, payload), linked by ``WARC-Concurrent-To``; ``WARC-Date`` is when
  the request was sent, ``WARC-IP-Address`` is not recorded;
* the payload is the body as the crawler read it, after transfer and content decoding, so
  ``Content-Encoding``/``Transfer-Encoding`` are renamed ``X-Archive-Orig-*`` and
  ``Content-Length`` is the stored length (the original kept as ``X-Archive-Orig-Content-Length``);
* a body cut at the crawler's size cap is marked ``WARC-Truncated: length``; one cut short
  by the server or the crawl's time bound ``disconnect`` or ``time``.

The file is written as records arrive (one gzip member per record for ``.gz`` names), from
any number of fetch threads; ``close()`` flushes it. An existing file is appended to (each
run starts with its own ``warcinfo`` record), so ``crawl --resume --warc`` with the same
name extends the archive of the run it continues. ``ingest`` writes only a URL's last
``response``/``revisit`` record (files in the order given, each in file order), so a URL
fetched again in the resumed run gets the newer response (``crawler.ingest``: a URL's
last response).
"""

from __future__ import annotations

import io
import threading
from datetime import datetime, timezone
from urllib.parse import urlsplit

from caffeine.errors import CaffeineError

__all__ = ["WarcArchive"]

_RENAMED = ("content-encoding", "transfer-encoding", "content-length")


class WarcArchive:
    def __init__(self, path: str) -> None:
        from warcio.warcwriter import WARCWriter

        self.path = path
        try:
            self._file = open(path, "ab")
        except OSError as exc:
            raise CaffeineError(f"cannot write the archive {path}: {exc.strerror}") from exc
        self._writer = WARCWriter(self._file, gzip=path.endswith(".gz"), warc_version="1.1")
        self._lock = threading.Lock()
        info = self._writer.create_warcinfo_record(path.rsplit("/", 1)[-1], {
            "software": "caffeine crawl", "format": "WARC File Format 1.1"})
        self._writer.write_record(info)

    def write(self, url: str, request_headers: list[tuple[str, str]], sent_at: float, http_version: str,
              status: int, reason: str, response_headers: list[tuple[str, str]], body: bytes,
              truncated: str | None = None) -> None:
        from warcio.statusandheaders import StatusAndHeaders

        date = datetime.fromtimestamp(sent_at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host = [("Host", parts.netloc)] if not any(k.lower() == "host" for k, _ in request_headers) else []
        request = StatusAndHeaders(f"GET {target} HTTP/1.1", host + list(request_headers), is_http_request=True)
        headers = []
        for name, value in response_headers:
            if name.lower() in _RENAMED:
                headers.append((f"X-Archive-Orig-{name}", value))
            else:
                headers.append((name, value))
        headers.append(("Content-Length", str(len(body))))
        protocol = http_version if http_version.startswith("HTTP/") else "HTTP/1.1"
        response = StatusAndHeaders(f"{status} {reason or 'Status'}", headers, protocol=protocol)
        warc_headers = {"WARC-Date": date}
        if truncated:
            warc_headers["WARC-Truncated"] = truncated
        with self._lock:
            resp = self._writer.create_warc_record(url, "response", payload=io.BytesIO(body),
                                                   http_headers=response, warc_headers_dict=warc_headers)
            req = self._writer.create_warc_record(url, "request", http_headers=request, warc_headers_dict={
                "WARC-Date": date, "WARC-Concurrent-To": resp.rec_headers.get_header("WARC-Record-ID")})
            self._writer.write_record(req)
            self._writer.write_record(resp)

    def close(self) -> None:
        with self._lock:
            self._file.close()  # idempotent
