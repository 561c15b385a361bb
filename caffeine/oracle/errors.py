"""Errors of the timestamp oracle (see the tree in ``caffeine.errors``).

Layer: oracle. Imports ``caffeine.errors`` only::

    CaffeineError
    └── OracleError
        ├── OracleUnavailable    client: no oracle answered within the deadline
        └── OracleConflict       server: another oracle process serves this deployment

    ConnectionError (OSError)
    └── OracleNotActive          client, one address: a standby answered, not the active oracle

``OracleNotActive`` is a connection failure, not an ``OracleError``: the client handles it
like a refused connection, by trying its next address; callers never see it. Its wire form is
``caffeine.oracle.wire.NOT_ACTIVE_ANSWER``.
"""

from __future__ import annotations

from caffeine.errors import CaffeineError


class OracleError(CaffeineError):
    """Something went wrong getting or handing out timestamps."""


def describe_addresses(addresses: list[tuple[str, int]]) -> str:
    """``"127.0.0.1:9099"``, or ``"127.0.0.1:9099 or 127.0.0.1:9098"`` for several."""
    return " or ".join(f"{host}:{port}" for host, port in addresses)


def not_answering_message(addresses: list[tuple[str, int]]) -> str:
    return (
        f"timestamp oracle at {describe_addresses(addresses)} is not answering; "
        "is `caffeine oracle` (started by `caffeine up`) running?"
    )


class OracleUnavailable(OracleError):
    """No oracle could be reached (or answered as the active one) for the whole client deadline.

    ``host``/``port``: the last address tried; ``addresses``: all of them.
    """

    def __init__(self, host: str, port: int, waited_s: float, cause: BaseException | None = None,
                 addresses: list[tuple[str, int]] | None = None):
        addresses = addresses or [(host, port)]
        detail = f" (last error: {type(cause).__name__}: {cause})" if cause is not None else ""
        super().__init__(
            f"{not_answering_message(addresses)} Gave up after {waited_s:.1f} s{detail}"
        )
        self.host, self.port, self.waited_s, self.cause = host, port, waited_s, cause
        self.addresses = addresses


class OracleNotActive(ConnectionError):
    """The oracle at this address is a standby (it answered ``wire.NOT_ACTIVE_ANSWER``)."""


class OracleConflict(OracleError):
    """Another oracle process serves (or served, unnoticed) the same deployment.

    Raised at startup when a live oracle holds the high-water mark's lease, and at run time
    when the persisted mark changed under this oracle (it then stops serving at once). See
    ``caffeine.oracle.hwm`` for why timestamps stay unique and ordered either way.
    """
