"""URL normalization: one spelling per page, so a URL can be a row key.

Layer: index. Pure; imports the standard library and ``idna``. Used by the crawler (row
keys, frontier), the document observer (link targets) and the Spark job, so all of them key
the same page the same way.

Contract of ``normalize_url(url, base=None) -> str | None``:

* the result is an absolute ``http``/``https`` URL, or None: anything else (``mailto:``,
  ``javascript:``, relative without a base, a bad port, a bad host, ``http://[bad``) is None,
  and nothing raises;
* scheme and host are lowercased; a trailing dot of the host is dropped; hosts are mapped
  by UTS46 (non-transitional, as browsers do: full-width letters and ideographic full stops
  map to ASCII, case folds) and labels that are not plain ASCII become IDNA2008 A-labels
  (``faß.de`` is ``xn--fa-hia.de``, not IDNA2003's ``fass.de``); an invalid IDN label
  (``xn--`` with no valid Punycode) makes the URL None; IPv6 hosts keep their brackets;
* user info (``user:pass@``) is dropped: credentials are not part of a page's identity and
  must never end up in a row key or an index;
* default ports (80 for http, 443 for https) are dropped;
* the fragment is dropped (it names a place in the page, not another page);
* ``.`` and ``..`` segments are resolved (RFC 3986, 5.2.4); an empty path becomes ``/``;
* the query is kept as written (parameter order matters to some servers), only re-encoded,
  but for known session-id parameters, which are dropped: a site that puts a fresh session
  id in every link would otherwise be a new URL per link (a crawler trap) and one page many
  rows. Dropped (names compared case-insensitively): ``PHPSESSID``, ``jsessionid``,
  ``sessionid``, ``session_id``, ``ASPSESSIONID`` (and its ``ASPSESSIONIDxxxxxxxx`` forms),
  ``CFID``/``CFTOKEN`` (not ``sid``: as often a page's own id as a session, and merging
  distinct pages would lose them); also the servlet path
  parameter ``;jsessionid=...``. Where one is dropped, empty parameters go too (``?&`` is
  not left behind); a query left empty is dropped with its ``?``;
* characters that may not appear raw (spaces, non-ASCII, controls) are percent-encoded as
  UTF-8; percent-escapes of unreserved characters (RFC 3986 2.3: letters, digits,
  ``-._~``) are decoded, in path and query (``%7Euser`` is ``~user``: one resource, one
  row), and the other escapes get uppercase hex digits (``%2f`` stays escaped as ``%2F``:
  it is not a ``/``); ASCII tab and newline are removed and surrounding whitespace stripped,
  as browsers do.

Rows keyed under the earlier rules (IDNA2003 hosts, ``%7E`` kept escaped, session ids kept)
are re-keyed by ``caffeine migrate-urls`` (``crawler.migrate``).

Invariant: ``normalize_url(normalize_url(u)) == normalize_url(u)`` for every string ``u``
whose normalization is not None (a property test checks it).

``normalize_link(href, base)`` is ``normalize_url(href, base)`` for a page's links, remembered
across the pages of one directory (parsing resolves hundreds of links a page, mostly the same
ones as its neighbours').
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import quote, urljoin, urlsplit

import idna

__all__ = ["normalize_url", "normalize_link", "with_session_id"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
# Characters left as they are in a path or query: RFC 3986 unreserved + sub-delims + ":@/"
# and "%" (existing escapes are kept, only their hex is uppercased).
_PATH_SAFE = "/%:@!$&'()*+,;=-._~"
_QUERY_SAFE = _PATH_SAFE + "?"
_ESCAPE = re.compile(r"%([0-9a-fA-F]{2})")
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_TAB_NEWLINE = re.compile(r"[\t\n\r]")
_SESSION_PARAMS = frozenset({"phpsessid", "jsessionid", "sessionid", "session_id", "cfid", "cftoken"})
_PATH_SESSION = re.compile(r";jsessionid=[^/;]*", re.IGNORECASE)
_HOST_LABELS = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?(?:\.[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?)*$")


def normalize_url(url: str, base: str | None = None) -> str | None:
    """The normalized absolute form of ``url`` (resolved against ``base``), or None."""
    try:
        return _normalize(url, base)
    except (ValueError, UnicodeError, TypeError, idna.IDNAError):
        return None


# normalize_link's memo: (the base's directory, the link without its fragment) -> its
# normalized target. Bounded: emptied when full (a crawl's pages share a few directories, so
# it refills with the links that recur).
_LINKS: dict[tuple[str, str], str | None] = {}
_LINKS_MAX = 1 << 16
_DIRECTORIES: dict[str, str | None] = {}


def normalize_link(href: str, base: str | None) -> str | None:
    """``normalize_url(href, base)``, remembered across pages for the links that resolve
    against the base's directory alone.

    A page links to the same places as its neighbours (navigation, index, sibling pages:
    hundreds of links a page on a documentation site), and resolving and normalizing each one
    is most of parsing such a page. A relative reference with a path (``page.html``,
    ``../x/``, ``a?q``: not starting with ``/``, ``?``, ``#`` or ``;``, no ``:`` anywhere, so no
    scheme) is resolved by RFC 3986 5.2.2 from the base's scheme, authority and path up to
    its last ``/`` only (the base's last segment, query and fragment are not used), and the
    fragment it carries is dropped by normalization: such links are memoized under (that
    directory, the link without its fragment). Everything else is normalized as it comes.
    ``tests/unit/test_link_memo.py`` checks it against ``normalize_url`` (and
    ``bench/bench_parse.py --compare`` the parses of whole sites).
    """
    link = href.partition("#")[0]
    # Not memoized: a link that starts with a control character or a space, which
    # ``urlsplit`` (leading C0 controls and spaces, as WHATWG does) or ``normalize_url``
    # (whitespace) strips, leaving maybe a query or an empty reference, which keep the page's
    # own last segment; and one that ends with whitespace, kept when a fragment follows and
    # stripped when none does.
    if (base is None or not link or link[0] in "/?;" or ":" in link
            or _stripped(link[0]) or _stripped(link[-1])):
        return normalize_url(href, base)
    directory = _directory(base)
    if directory is None:
        return normalize_url(href, base)
    key = (directory, link)
    try:
        return _LINKS[key]
    except KeyError:
        return _remember(_LINKS, key, normalize_url(link, base))


def _stripped(char: str) -> bool:
    """Whether a character at either end of a link may be stripped before it is resolved."""
    return char <= " " or char.isspace()


def _directory(base: str) -> str | None:
    """``scheme://authority/path-up-to-its-last-slash`` of an http(s) ``base`` as ``urljoin``
    reads it (tabs and newlines removed, surrounding whitespace stripped), or None."""
    try:
        return _DIRECTORIES[base]
    except KeyError:
        pass
    cleaned = _TAB_NEWLINE.sub("", base).strip()
    try:
        parts = urlsplit(cleaned)
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in _DEFAULT_PORTS or not parts.netloc:
        directory = None
    else:
        directory = f"{parts.scheme}://{parts.netloc}{parts.path[:parts.path.rfind('/') + 1]}"
    return _remember(_DIRECTORIES, base, directory)


def _remember(memo: dict, key, value):
    """``value``, stored in ``memo`` under ``key``; a full memo (``_LINKS_MAX``) is emptied first."""
    if len(memo) >= _LINKS_MAX:
        memo.clear()
    memo[key] = value
    return value


def with_session_id(url: str, base: str | None = None) -> str | None:
    """``url`` normalized but for its session ids, which are kept; None when it has none
    (or is not a URL). A fetcher requests this form where a server insists on its session id
    (a cookie-less servlet redirecting ``/p`` to ``/p;jsessionid=X``); row keys stay
    ``normalize_url``'s."""
    try:
        kept = _normalize(url, base, keep_session_ids=True)
        normal = _normalize(url, base)
    except (ValueError, UnicodeError, TypeError, idna.IDNAError):
        return None
    return kept if kept is not None and kept != normal else None


def _normalize(url: str, base: str | None, keep_session_ids: bool = False) -> str | None:
    url = _TAB_NEWLINE.sub("", url).strip()
    if base is not None:
        base = _TAB_NEWLINE.sub("", base).strip()
        url = urljoin(base, url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        return None
    host = _host(parts.hostname, parts.netloc)
    if host is None:
        return None
    port = parts.port  # raises ValueError on a non-numeric or out-of-range port
    netloc = host if port is None or port == _DEFAULT_PORTS[scheme] else f"{host}:{port}"
    path = _path(parts.path or "/", keep_session_ids)
    query = _encode(parts.query, _QUERY_SAFE)
    query = query if keep_session_ids else _without_session_ids(query)
    # A "?" with nothing after it is kept out: "page?" and "page" are the same request.
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _host(hostname: str | None, netloc: str) -> str | None:
    if not hostname:
        return None
    if "[" in netloc:  # urlsplit has already checked the brackets are balanced
        try:
            return f"[{ipaddress.IPv6Address(hostname).compressed}]"
        except ValueError:
            return None
    host = hostname.rstrip(".")
    if not host.isascii() or "xn--" in host:
        host = idna.uts46_remap(host, std3_rules=False, transitional=False).rstrip(".")
        host = ".".join(_a_label(label) for label in host.split("."))
    host = host.lower()
    return host if _HOST_LABELS.match(host) else None


def _a_label(label: str) -> str:
    """An IDNA2008 A-label for a non-ASCII or ``xn--`` label; plain ASCII labels stay (the
    host pattern checks them: IDNA2008 would reject the underscores real hosts use)."""
    if label.isascii() and not label.startswith("xn--"):
        return label
    return idna.alabel(label).decode("ascii")


def _encode(text: str, safe: str) -> str:
    text = quote(text, safe=safe, encoding="utf-8", errors="strict")
    return _ESCAPE.sub(_unescape_unreserved, text)


def _path(raw: str, keep_session_ids: bool = False) -> str:
    """Dot segments resolved, session ids dropped, encoded; repeated until nothing changes
    (an escaped ``%2E%2E`` or ``%6Asessionid`` only shows once decoded), so the result is a
    fixed point and normalizing twice changes nothing."""
    path = raw
    for _ in range(8):
        new = _encode(_remove_dot_segments(path if keep_session_ids else _PATH_SESSION.sub("", path)), _PATH_SAFE)
        if not new.startswith("/"):
            new = "/" + new
        if new == path:
            break
        path = new
    return path


def _without_session_ids(query: str) -> str:
    """The query without its session-id parameters; where one was dropped, the empty
    parameters go too (``?&PHPSESSID=x&`` is no query at all); otherwise it stays as written."""
    if not query:
        return query
    params = query.split("&")
    kept = [p for p in params if not _is_session_id(p)]
    if len(kept) == len(params):
        return query
    return "&".join(p for p in kept if p)


def _is_session_id(param: str) -> bool:
    name = param.partition("=")[0].lower()
    return name in _SESSION_PARAMS or name.startswith("aspsessionid")


def _unescape_unreserved(m: re.Match) -> str:
    char = chr(int(m.group(1), 16))
    return char if char in _UNRESERVED else "%" + m.group(1).upper()


def _remove_dot_segments(path: str) -> str:
    """RFC 3986, section 5.2.4 (a path that climbs above the root stays at the root)."""
    if "." not in path:
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1:
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result
