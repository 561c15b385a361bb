"""The bad-input pages under ``/bad/``: what a crawler must survive (``SPECIALS`` names them).

Layer: testweb. Imports the standard library only; pure.

Malformed HTML, latin-1 with and without a declared charset, binary junk served as
text/html, a page larger than the crawler's cap, an empty page, a self-link, unparseable
links, a redirect loop, a redirect chain longer than 5, a good redirect, a redirect into
``/private/``, a 500, a slow page, a PDF, a body shorter than its Content-Length, and a
response that is not HTTP at all.
"""

from __future__ import annotations

import random

from testweb.response import NOT_FOUND_BODY, Response, html_page

__all__ = ["SPECIALS", "bad_page"]

# Name -> path of each bad-input page.
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


def bad_page(path: str, *, seed: int, huge_bytes: int, slow_s: float, private_path: str) -> Response:
    """The answer for ``path`` under ``/bad/`` (404 for one that is none of ``SPECIALS``):
    binary junk seeded by ``seed``, a huge page of ``huge_bytes``, a slow one after
    ``slow_s`` seconds, a redirect into the robots-disallowed ``private_path``."""
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
        return Response(200, "text/html", random.Random(f"{seed}:binary").randbytes(8192))
    if name == "huge":
        return Response(200, stream_bytes=huge_bytes)
    if name == "empty":
        return Response(200, body=b"")
    if name == "self_link":
        return Response(200, body=html_page("Self", '<p><a href="self.html">me</a> <a href="/bad/self.html#top">me again</a></p>'))
    if name == "bad_links":
        links = ["javascript:alert(1)", "mailto:someone@example.com", "http://[bad", "tel:+123",
                 "ftp://example.com/file", "http://", "http://exa mple.com/", "http://host:99999/", "",
                 "/site0/page0.html"]
        body = "".join(f'<a href="{href}">link {n}</a> ' for n, href in enumerate(links))
        return Response(200, body=html_page("Links", f"<p>{body}</p>"))
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
            return Response(200, body=html_page("End of chain", "<p>end</p>"))
        return Response(302, headers={"Location": f"/bad/chain/{n + 1}.html"})
    if name == "redirect_ok":
        return Response(301, headers={"Location": "/site0/"})
    if name == "redirect_private":
        return Response(302, headers={"Location": private_path})
    if name == "server_error":
        return Response(500, body=b"<html><body>internal error</body></html>")
    if name == "slow":
        return Response(200, body=html_page("Slow", "<p>finally</p>"), sleep_s=slow_s)
    if name == "pdf":
        return Response(200, "application/pdf", b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n")
    if name == "short_body":
        return Response(200, body=b"<html><body>cut", short_by=1000)
    if name == "not_http":
        return Response(0, raw=b"THIS IS NOT HTTP\x00\xff\r\n\r\n")
    return Response(404, body=NOT_FOUND_BODY)

