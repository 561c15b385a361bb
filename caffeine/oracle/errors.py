"""Errors of the timestamp oracle (see the tree in ``caffeine.errors``).

Layer: oracle. Imports ``caffeine.errors`` only::

    CaffeineError
    └── OracleError
        ├── OracleUnavailable    client: the oracle did not answer within the deadline
        └── OracleConflict       server: another oracle process serves this deployment
"""

from __future__ import annotations

from caffeine.errors import CaffeineError


class OracleError(CaffeineError):
    """Something went wrong getting or handing out timestamps."""


def not_answering_message(host: str, port: int) -> str:
    return (
        f"timestamp oracle at {host}:{port} is not answering; "
        "is `caffeine oracle` (started by `caffeine up`) running?"
    )


class OracleUnavailable(OracleError):
    """The oracle could not be reached (or did not answer) for the whole client deadline."""

    def __init__(self, host: str, port: int, waited_s: float, cause: BaseException | None = None):
        detail = f" (last error: {type(cause).__name__}: {cause})" if cause is not None else ""
        super().__init__(
            f"{not_answering_message(host, port)} Gave up after {waited_s:.1f} s{detail}"
        )
        self.host, self.port, self.waited_s, self.cause = host, port, waited_s, cause


class OracleConflict(OracleError):
    """Another oracle process serves (or served, unnoticed) the same deployment.

    Raised at startup when a live oracle holds the high-water mark's lease, and at run time
    when the persisted mark changed under this oracle (it then stops serving at once). See
    ``caffeine.oracle.hwm`` for why timestamps stay unique and ordered either way.
    """
