"""Archived exchanges replayed as fetches: a WARC ``response`` or ``revisit`` record -> the
``FetchResult`` the crawler would have produced for its URL.

Layer: crawler. Imports warcio, ``caffeine.index`` and ``crawler.fetch`` for the outcome type
and rules, ``crawler.warcframe`` for framing. No I/O beyond reading the archives it is given.

The outcome rules are the crawler's (``crawler.fetch``); ``crawler.ingest`` lists them. A
redirect is followed through the archives' other records (``RecordIndex``: every response
and revisit by URL, record id and payload digest), with the crawler's limit, loop and
unusable-location rules; a revisit is resolved to the record it refers to
(``WARC-Refers-To``, else the payload digest, else ``WARC-Refers-To-Target-URI``): its
payload, with the revisit's own HTTP headers unless those say 304. A record whose HTTP
block (or WARC headers) cannot be read raises ``Unparsable``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from datetime import datetime

from caffeine.index import normalize_url
from caffeine.index.directives import header_directives, in_order
from crawler.fetch import HTML_TYPES, FetchResult
from crawler.warcframe import HEADER_END, Archive, Position

__all__ = ["RecordRef", "RecordIndex", "Replayer", "Unparsable", "warc_headers", "warc_time"]

_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class RecordRef:
    """Where a record is: the index of its file among the ingest's, and its position."""

    file: int
    position: Position


class RecordIndex:
    """Pass 1: where each URL's latest response, each record id and payload digest is."""

    def __init__(self) -> None:
        self.by_url: dict[str, RecordRef] = {}
        self.by_id: dict[str, RecordRef] = {}
        self.by_digest: dict[str, RecordRef] = {}

    def add(self, ref: RecordRef, headers: dict[str, str]) -> None:
        kind = headers.get("warc-type")
        if kind not in ("response", "revisit"):
            return
        url = normalize_url(headers.get("warc-target-uri", "").strip("<>"))
        if url is not None:
            self.by_url[url] = ref
        if headers.get("warc-record-id"):
            self.by_id[headers["warc-record-id"]] = ref
        digest = headers.get("warc-payload-digest")
        if kind == "response" and digest and digest not in self.by_digest:
            self.by_digest[digest] = ref


def warc_headers(data: bytes) -> dict[str, str]:
    """The WARC header fields of a framed record (names lowercased), without warcio. Lines
    may end in CRLF, LF or CR CR LF (``crawler.warcframe`` frames such records too)."""
    end = HEADER_END.search(data)
    head = data[: end.start() if end else len(data)].decode("utf-8", errors="replace")
    fields = {}
    for line in head.split("\n")[1:]:
        name, _, value = line.partition(":")
        fields[name.strip().lower()] = value.strip()
    return fields


class Unparsable(Exception):
    """A record whose HTTP block (or WARC headers) warcio cannot read."""


class Replayer:
    """Turns records of ``archives`` into fetch results, following redirects and revisits
    through ``index`` (built over the same archives, in the same order)."""

    def __init__(self, archives: list[Archive], index: RecordIndex, *, max_bytes: int, max_redirects: int) -> None:
        self.archives = archives
        self.index = index
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects

    def result(self, url: str, i: int, data: bytes) -> FetchResult:
        """The crawler's FetchResult for the response/revisit record ``data`` of ``url``."""
        chain = [url]
        current_file, current_data = i, data
        status, content_type, current = 0, None, url
        robots: tuple[str, ...] = ()
        fetched_at = warc_time(warc_headers(data).get("warc-date"))

        def result(error=None, content=None, truncated=False):
            return FetchResult(url, status, content_type, current, error, truncated, content, fetched_at, robots)

        while True:
            http, body_record, truncation = self._http(current_file, current_data)
            status = _status(http)
            content_type = http.get_header("Content-Type")
            robots = tuple(in_order(header_directives(v for k, v in http.headers if k.lower() == "x-robots-tag")))
            location = http.get_header("Location")
            if status in _REDIRECTS and location:
                target = normalize_url(location, current)
                if target is None:
                    return result(f"redirect to an unusable location {location!r}")
                if target in chain:
                    return result("redirect loop: " + " -> ".join(chain + [target]))
                if len(chain) > self.max_redirects:
                    return result(f"more than {self.max_redirects} redirects: " + " -> ".join(chain + [target]))
                ref = self.index.by_url.get(target)
                record = self._read(ref) if ref else None
                if record is None:
                    current = target  # as the crawler: final_url is the hop it could not take
                    return result(f"redirect to {target} not followed: not in the archive")
                chain.append(target)
                current, current_file, current_data = target, ref.file, record
                continue
            if status in _REDIRECTS:
                return result("redirect without a Location header")
            if not 200 <= status < 300:
                return result()
            mime = (content_type or "").split(";")[0].strip().lower()
            if mime not in HTML_TYPES:
                return result()
            if truncation and truncation != "length":
                return result(f"protocol error: the archived body was cut short (WARC-Truncated: {truncation})")
            try:
                body = body_record.content_stream().read(self.max_bytes + 1)
            except Exception as exc:
                return result(f"undecodable content encoding: {type(exc).__name__}: {exc}")
            truncated = len(body) > self.max_bytes or truncation == "length"
            return result(content=body[: self.max_bytes], truncated=truncated)

    def _http(self, i: int, data: bytes):
        """(HTTP headers, the record whose payload is the body, its WARC-Truncated) of a
        response record, or of the record a revisit refers to."""
        record = _parse(data)
        truncation = (record.rec_headers.get_header("WARC-Truncated") or "").strip().lower() or None
        if record.rec_type == "response":
            if record.http_headers is None:
                raise Unparsable("response record without an HTTP block")
            return record.http_headers, record, truncation
        original_ref = self._original(record)
        original_data = self._read(original_ref) if original_ref else None
        if original_data is None:
            raise Unparsable("revisit of a record that is not in the archive")
        original = _parse(original_data)
        if original.rec_type != "response" or original.http_headers is None:
            raise Unparsable("revisit of a record that is not a response")
        own = record.http_headers
        headers = own if own is not None and _status(own) != 304 else original.http_headers
        original_truncation = (original.rec_headers.get_header("WARC-Truncated") or "").strip().lower() or None
        return headers, original, original_truncation

    def _original(self, record) -> RecordRef | None:
        h = record.rec_headers
        for key, table in ((h.get_header("WARC-Refers-To"), self.index.by_id),
                           (h.get_header("WARC-Payload-Digest"), self.index.by_digest)):
            if key and key in table:
                return table[key]
        target = normalize_url((h.get_header("WARC-Refers-To-Target-URI") or "").strip("<>"))
        return self.index.by_url.get(target) if target else None

    def _read(self, ref: RecordRef) -> bytes | None:
        return self.archives[ref.file].read(ref.position)


def _parse(data: bytes):
    from warcio.recordloader import ArcWarcRecordLoader

    try:
        return ArcWarcRecordLoader().parse_record_stream(io.BytesIO(data), known_format="warc")
    except Exception as exc:  # StatusAndHeadersParserException, ArchiveLoadFailed, ValueError...
        raise Unparsable(f"unparsable HTTP block: {str(exc).strip().splitlines()[0][:200]}") from exc


def _status(http) -> int:
    try:
        status = int(http.get_statuscode())
    except (TypeError, ValueError):
        raise Unparsable(f"unparsable HTTP status line: {http.statusline!r}"[:200]) from None
    if not 100 <= status <= 999:
        raise Unparsable(f"unparsable HTTP status line: {http.statusline!r}"[:200])
    return status


def warc_time(value: str | None) -> float:
    """A ``WARC-Date`` as unix time; 0.0 when missing or not ISO 8601."""
    if value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            pass
    return 0.0
