"""A WARC archive of what a full crawl of a generated test web fetches (for ingest tests).

Layer: testweb. Imports the standard library and warcio.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
from pathlib import Path

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from testweb.web import TestWeb

__all__ = ["write_warc"]

_REASONS = {200: "OK", 301: "Moved Permanently", 302: "Found", 404: "Not Found", 410: "Gone",
            500: "Internal Server Error"}


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
    g = web.generated_web()
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
        data = gzip.compress(data)
    Path(path).write_bytes(data)
    return written

