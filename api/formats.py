"""How the API's answers spell times, the links between its resources, and JSON.

Layer: api (orjson and Starlette's ``Response``; no I/O).
"""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import quote

import orjson
from starlette.responses import Response


class JSONBytes(Response):
    """A JSON response serialized by orjson, with no validation on the way (FastAPI passes a
    returned ``Response`` through): for answers built in the shape of their response model."""

    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content)


def iso(ts: float | None) -> str | None:
    """Unix time ``ts`` as ISO 8601 UTC with milliseconds and a ``Z``; None stays None."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def document_link(url: str) -> str:
    """The API path of the page at ``url`` (``/documents``)."""
    return "/documents?url=" + quote(url, safe="")


def cluster_link(fingerprint: str) -> str:
    """The API path of the duplicate cluster ``fingerprint`` (``/dups``)."""
    return "/dups/" + fingerprint
