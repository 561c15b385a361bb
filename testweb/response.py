"""What the test web answers for a path: a ``Response`` (status, headers, body, misbehaviour).

Layer: testweb. Imports the standard library only; pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

HTML = "text/html; charset=utf-8"
NOT_FOUND_BODY = b"<html><body>not here</body></html>"


@dataclass
class Response:
    status: int
    content_type: str | None = HTML
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    sleep_s: float = 0.0        # wait this long before answering
    stream_bytes: int = 0       # instead of body: this many bytes of generated HTML
    raw: bytes | None = None    # send these bytes instead of an HTTP response, then close
    short_by: int = 0           # declare this many more bytes than are sent, then close


def html_page(title: str, body: str) -> bytes:
    """A small UTF-8 HTML document with ``title`` and ``body`` (markup)."""
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{title}</title></head>\n<body>\n{body}\n</body></html>\n"
    ).encode("utf-8")
