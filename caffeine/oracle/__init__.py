"""The timestamp oracle: strictly increasing timestamps for Percolator's start_ts and commit_ts.

Layer: oracle. Between storage and the transaction layer. ``caffeine.percolator`` imports
``OracleClient`` from here; only the server (``caffeine oracle``) touches storage, to persist
its high-water mark.

- ``timestamps``: the pure encoding, ``(wall-clock ms << 18) | logical``.
- ``wire``: the wire protocol (documented there), and reading one answer.
- ``server``: the asyncio TCP server: the lease, renewals, standing by and taking over;
  ``connection`` serves each client connection.
- ``hwm``: the persisted high-water mark that makes restarts safe.
- ``client``: ``OracleClient``, one batched request per process for all waiting threads,
  following the active oracle among its addresses (an oracle and its standbys).
- ``foreground``: the oracle process's options, and serving with them (``python -m
  caffeine.oracle``, ``caffeine oracle``).

Importing this package loads neither the server nor the storage layer.
"""

from caffeine.oracle.client import OracleClient
from caffeine.oracle.errors import OracleConflict, OracleError, OracleUnavailable

__all__ = ["OracleClient", "OracleConflict", "OracleError", "OracleUnavailable"]
