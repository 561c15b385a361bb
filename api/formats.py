"""How the web app sends JSON.

Layer: api. orjson and Starlette's ``Response``; no I/O. Times and links in answers are the
engine's (``caffeine.search.links``).
"""

from __future__ import annotations

import orjson
from starlette.responses import Response


class JSONBytes(Response):
    """A JSON response serialized by orjson, with no validation on the way (FastAPI passes a
    returned ``Response`` through): for answers built in the shape of their response model."""

    media_type = "application/json"

    def render(self, content) -> bytes:
        return orjson.dumps(content)
