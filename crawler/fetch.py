"""Fetching one URL: redirects with a limit and loop detection, timeouts, a size cap.

Layer: crawler. Imports httpx and ``caffeine.index.urls``; no HBase. ``Fetcher.fetch``
never raises for anything a server or the network does: every outcome is a ``FetchResult``
whose ``meta()`` is the ``page:meta`` JSON of docs/INDEXING.md.

Outcome rules (what ``status``, ``error``, ``content`` mean):

* ``status`` is the HTTP status of the last response received, or 0 when none was (bad
  URL, connection refused, timeout before the headers, not HTTP at all, forbidden by
  robots.txt before any request). ``error`` is None exactly when the fetch completed; an
  HTTP error status (404, 410, 500) is a completed fetch with ``error`` None: the status
  says it all.
* Redirects (301, 302, 303, 307, 308 with a Location) are followed up to
  ``max_redirects`` hops; a Location that does not normalize to an http(s) URL, one that
  repeats a URL of the chain (a loop), one more hop than allowed, or one robots.txt
  forbids ends the fetch with the last 3xx status and an error naming the chain.
  ``final_url`` is the (normalized) URL the last response came from. A Location that
  normalizes to a URL of the chain but carries a session id the normalization drops (a
  cookie-less servlet: ``/p`` -> ``/p;jsessionid=X``) is requested as sent, once per fetch;
  a second such hop is a loop. Row keys and ``final_url`` stay normalized.
* ``content`` is stored (not None) only for a 2xx response whose Content-Type is HTML
  (``text/html``, ``application/xhtml+xml``). Other types, and a missing Content-Type, are
  recorded with their metadata only, and their body is not even downloaded: the document
  observer decides "is HTML" from ``content_type`` alone, and the two must agree.
  ``fetch(..., html_only=False)`` (robots.txt) keeps any type.
* The body is read up to ``max_bytes`` (after content decoding, so a gzip bomb stops at the
  cap too); a longer body is cut there and ``truncated`` is True.
* ``timeout`` bounds connecting and each wait for bytes; the whole fetch, redirects
  included, is also bounded by ``4 * timeout`` so a server trickling bytes cannot hold a
  worker forever. A body cut short by the server or a timeout records an error and no
  content (a partial page would index as a different page).
* With an ``archive`` (``crawler.archive.WarcArchive``, ``crawl --warc``) every response
  received, redirect hops and robots.txt included, is read to the cap and archived with its
  request; the outcome is the same as without one.
* A redirect target that ``follow`` refuses (``crawler.scope``: outside the crawl's scope, a
  crawler-trap limit) is not requested: the fetch ends with the 3xx status, ``final_url``
  the URL that answered it, and an error naming the target and the reason. ``follow`` is
  asked before ``may_fetch`` (robots.txt), so no request goes to a refused target's site.
* Connections go through ``crawler.addresses.GuardedBackend``: a host whose addresses the
  fetcher's ``address_policy`` refuses is never connected to, and the fetch ends with status
  0 (or the 3xx status of the hop that led there) and an error starting ``address refused``.
  A ``Fetcher`` built without a policy connects to global addresses only; a caller that
  needs others (a test on loopback, a tool fetching what its user typed) passes one, and
  ``crawler.crawl`` gives it the crawl's policy.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import httpcore
import httpx

from caffeine.index.directives import header_directives, in_order
from caffeine.index.urls import normalize_url, with_session_id
from crawler.addresses import AddressPolicy, AddressRefused, Connector, GuardedBackend, Resolver

__all__ = ["FetchResult", "Fetcher", "USER_AGENT", "ROBOTS_AGENT", "HTML_TYPES"]

ROBOTS_AGENT = "CaffeineBot"  # the token robots.txt rules (and robots meta tags: ROBOTS_TOKEN) are matched against
USER_AGENT = "CaffeineBot/0.1 (incremental indexer; respects robots.txt)"
HTML_TYPES = ("text/html", "application/xhtml+xml")
_REDIRECTS = (301, 302, 303, 307, 308)
_TOTAL_TIMEOUT_FACTOR = 4


@dataclass(frozen=True)
class FetchResult:
    url: str
    status: int
    content_type: str | None
    final_url: str
    error: str | None
    truncated: bool
    content: bytes | None
    fetched_at: float
    robots: tuple[str, ...] = ()  # X-Robots-Tag directives for this crawler (caffeine.index.directives)

    @property
    def ok(self) -> bool:
        """A completed fetch with a 2xx status."""
        return self.error is None and 200 <= self.status < 300

    def meta(self) -> dict:
        """The ``page:meta`` object (docs/INDEXING.md), exactly its fields; ``robots`` only
        when the response's ``X-Robots-Tag`` headers gave this crawler directives."""
        meta = {
            "url": self.url,
            "status": self.status,
            "content_type": self.content_type,
            "fetched_at": self.fetched_at,
            "final_url": self.final_url,
            "error": self.error,
            "truncated": self.truncated,
            "bytes": len(self.content) if self.content is not None else 0,
        }
        if self.robots:
            meta["robots"] = list(self.robots)
        return meta


# may_fetch(url) -> None if allowed, else the reason it is not
MayFetch = Callable[[str], "str | None"]


class Fetcher:
    """Thread-safe: one connection pool shared by all workers."""

    def __init__(
        self,
        *,
        timeout: float = 10.0,
        max_bytes: int = 2 * 1024 * 1024,
        max_redirects: int = 5,
        user_agent: str = USER_AGENT,
        pool_size: int = 16,
        archive=None,
        address_policy: AddressPolicy | None = None,
        resolver: Resolver | None = None,
        connector: Connector | None = None,
    ) -> None:
        """``address_policy``: which addresses may be connected to (None: global addresses
        only, ``AddressPolicy()``; replace it
        later through ``self.network.policy``); ``resolver``/``connector``: the hooks of
        ``crawler.addresses.GuardedBackend`` (tests give stubs: no traffic leaves loopback)."""
        self.archive = archive  # a crawler.archive.WarcArchive: every response is archived
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.headers = {
            "User-Agent": user_agent,
            "Accept": "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1",
            "Accept-Encoding": "gzip, deflate",
        }
        # A bare transport, not an httpx.Client: redirects are followed here (loop detection,
        # robots per hop) and the client would parse every Location itself, raising on the
        # bad ones before we could record them; nor should cookies travel between pages.
        self.network = GuardedBackend(address_policy if address_policy is not None else AddressPolicy(),
                                      resolver=resolver, connector=connector)
        self.transport = httpx.HTTPTransport(retries=0)
        # httpx builds its connection pool without a way to give it a network backend; the
        # pool (HTTPTransport._pool, a private attribute: checked here, so an httpx that renames
        # it fails at start rather than connecting unguarded) is replaced by the same one
        # connecting through the guarded backend, so every connection is checked where it is made.
        if not isinstance(getattr(self.transport, "_pool", None), httpcore.ConnectionPool):
            raise RuntimeError("httpx.HTTPTransport has no httpcore.ConnectionPool to guard (httpx version?)")
        self.transport._pool.close()
        self.transport._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(), max_connections=pool_size,
            max_keepalive_connections=pool_size, keepalive_expiry=5.0, retries=0, network_backend=self.network)

    def close(self) -> None:
        self.transport.close()

    def fetch(self, url: str, may_fetch: MayFetch | None = None, *, follow: MayFetch | None = None,
              html_only: bool = True, max_bytes: int | None = None) -> FetchResult:
        """Fetch ``url`` (already normalized); see the module docstring for the outcome.
        ``may_fetch`` is asked before every request, ``follow`` before every redirect hop."""
        fetched_at = time.time()
        deadline = time.monotonic() + self.timeout * _TOTAL_TIMEOUT_FACTOR
        cap = self.max_bytes if max_bytes is None else max_bytes
        chain = [url]  # the normalized URL of every request, in order
        current = url  # the URL requested: chain[-1], or its spelling with a session id
        session_detour = False
        status = 0
        content_type = None
        robots: tuple[str, ...] = ()

        def result(error=None, content=None, truncated=False):
            return FetchResult(url, status, content_type, chain[-1], error, truncated, content, fetched_at, robots)

        try:
            while True:
                reason = may_fetch(current) if may_fetch else None
                if reason is not None:
                    if current == url:
                        return result(reason)
                    return result(f"redirect to {current} not followed: {reason}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return result(f"timeout: no answer within {self.timeout * _TOTAL_TIMEOUT_FACTOR:g}s")
                request = httpx.Request("GET", current, headers=self.headers,
                                        extensions={"timeout": httpx.Timeout(min(self.timeout, remaining)).as_dict()})
                sent_at = time.time()
                response = self.transport.handle_request(request)
                try:
                    status = response.status_code
                    content_type = response.headers.get("content-type")
                    robots = tuple(in_order(header_directives(response.headers.get_list("x-robots-tag"))))
                    archived = None
                    if self.archive is not None:
                        archived = self._archive(current, request, sent_at, response, cap, deadline)
                    if status in _REDIRECTS and "location" in response.headers:
                        target = normalize_url(response.headers["location"], current)
                        if target is None:
                            return result(f"redirect to an unusable location {response.headers['location']!r}")
                        refused = follow(target) if follow else None
                        if refused is not None:
                            return result(f"redirect to {_shorten(target)} not followed: {refused}")
                        if target in chain:
                            # A cookie-less servlet redirects /p to /p;jsessionid=X, which is /p
                            # once normalized: request the Location as sent, once (a server that
                            # redirects that too is a real loop).
                            spelled = None if session_detour else with_session_id(response.headers["location"], current)
                            if spelled is None:
                                return result("redirect loop: " + " -> ".join(chain + [target]))
                            session_detour = True
                            chain.append(target)
                            current = spelled
                            continue
                        if len(chain) > self.max_redirects:
                            return result(f"more than {self.max_redirects} redirects: " + " -> ".join(chain + [target]))
                        chain.append(target)
                        current = target
                        continue
                    if status in _REDIRECTS:
                        return result("redirect without a Location header")
                    if not 200 <= status < 300:
                        return result()
                    if archived is not None:
                        return self._archived_body(response, archived, result, html_only)
                    return self._read_body(response, result, html_only, cap, deadline)
                finally:
                    response.close()
        except AddressRefused as exc:
            return result(str(exc) if current == url else f"redirect to {current} not followed: {exc}")
        except httpx.TimeoutException as exc:
            return result(f"timeout: {_describe(exc)}")
        except httpx.ConnectError as exc:
            return result(f"connection failed: {_describe(exc)}")
        except httpx.DecodingError as exc:
            return result(f"undecodable content encoding: {_describe(exc)}")
        except (httpx.ProtocolError, httpx.NetworkError) as exc:
            return result(f"protocol error: {_describe(exc)}")
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            return result(f"invalid URL: {_describe(exc)}")
        except Exception as exc:  # nothing a server sends may stop the crawl
            return result(f"fetch failed: {type(exc).__name__}: {exc}")

    def _read_body(self, response: httpx.Response, result, html_only: bool, cap: int, deadline: float) -> FetchResult:
        mime = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        if html_only and mime not in HTML_TYPES:
            return result()  # metadata only: not a page we index
        body = bytearray()
        truncated = False
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > cap:
                del body[cap:]
                truncated = True
                break
            if time.monotonic() > deadline:
                return result(f"timeout: body not complete within {self.timeout * _TOTAL_TIMEOUT_FACTOR:g}s")
        return result(content=bytes(body), truncated=truncated)

    def _archive(self, url: str, request: httpx.Request, sent_at: float, response: httpx.Response,
                 cap: int, deadline: float) -> tuple[bytes, str | None, Exception | None]:
        """Read the whole body (up to ``cap``) and archive the exchange; (body, truncation,
        the error that cut the read short). With an archive every body is read, so the
        archive is complete for other tools, but the outcome rules stay those of the module
        docstring: a read error counts only where the crawl would have read the body (a 2xx
        HTML page), so archiving never changes what a crawl records."""
        body = bytearray()
        truncated = None
        error = None
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > cap:
                    del body[cap:]
                    truncated = "length"
                    break
                if time.monotonic() > deadline:
                    truncated = "time"
                    break
        except Exception as exc:  # a short body, a reset, bad content encoding: decided later
            truncated, error = "disconnect", exc
        self._write_archive(url, request, sent_at, response, bytes(body), truncated)
        return bytes(body), truncated, error

    def _write_archive(self, url, request, sent_at, response, body, truncated) -> None:
        version = response.extensions.get("http_version", b"HTTP/1.1")
        reason = response.extensions.get("reason_phrase", b"")
        self.archive.write(
            url, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers.raw], sent_at,
            version.decode("ascii", "replace") if isinstance(version, bytes) else str(version),
            response.status_code, reason.decode("latin-1") if isinstance(reason, bytes) else str(reason),
            [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw], body, truncated)

    def _archived_body(self, response: httpx.Response, archived: tuple[bytes, str | None, Exception | None], result,
                       html_only: bool) -> FetchResult:
        """``_read_body``'s outcome for a body ``_archive`` already read."""
        mime = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
        if html_only and mime not in HTML_TYPES:
            return result()
        body, truncated, error = archived
        if error is not None:
            raise error  # fetch() records it as it does when _read_body meets it
        if truncated == "time":
            return result(f"timeout: body not complete within {self.timeout * _TOTAL_TIMEOUT_FACTOR:g}s")
        return result(content=body, truncated=truncated == "length")


def _shorten(url: str, keep: int = 300) -> str:
    return url if len(url) <= keep else f"{url[:keep]}... ({len(url)} characters)"


def _describe(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= 300 else text[:300] + "..."
