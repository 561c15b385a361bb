"""How the search engine's answers spell times and the links between the API's resources.

Layer: search. Standard library only; no I/O. The engine's answers are shaped like the web
app's response models (``api.models``), links included: a result's ``document`` and
``cluster`` paths are the API's ``/documents`` and ``/dups`` routes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from urllib.parse import quote

__all__ = ["iso", "document_link", "cluster_link"]


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
