"""A table's regions: where HBase cuts a table, and which server holds each part.

Layer: storage. Values only. ``Store.create_table`` takes split keys (``check_split_keys``
says which are valid), ``Store.regions`` answers ``Region`` values; the in-memory store keeps
the keys a table was created with and answers ``regions_of`` them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Region:
    """One region of a table: rows in ``[start, end)`` (``b""``: the table's first or last
    row), served by ``server`` ("host:port" of its region server; the in-memory store's one
    server is "memory")."""

    start: bytes
    end: bytes
    server: str


def check_split_keys(split_keys) -> tuple[bytes, ...]:
    """``split_keys`` as a tuple, once they are non-empty bytes in strictly increasing order
    (what HBase takes as a table's region boundaries); ValueError otherwise."""
    keys = tuple(split_keys)
    for key in keys:
        if not isinstance(key, bytes) or not key:
            raise ValueError(f"split keys must be non-empty bytes, got {key!r}")
    if any(a >= b for a, b in zip(keys, keys[1:])):
        raise ValueError(f"split keys must be strictly increasing, got {keys!r}")
    return keys


def regions_of(split_keys: tuple[bytes, ...], server: str) -> list[Region]:
    """The regions that ``split_keys`` cut a table into, all on ``server``."""
    bounds = (b"", *split_keys, b"")
    return [Region(start, end, server) for start, end in zip(bounds, bounds[1:])]
