"""Row prefixes: the summary of the head of one row's cells of a family (``Store.read_prefix``).

Layer: storage. The value type, the request's limits, and the summary a store computes on the
client from a whole row when its server does not summarize (``summarize``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable


# The most cells one ``Store.read_prefix`` may ask of a row (the coprocessor's RowSummaries
# refuses more: a summary is for the head of a row, not a way to read it whole).
MAX_PREFIX = 1_000_000


@dataclass(frozen=True)
class RowPrefix:
    """A summary of one row's cells of one family (``Store.read_prefix``): the first cells with a
    non-empty newest value, in qualifier order, as ``(qualifier, value)``; after them, the
    later such cells written at or after the read's ``since`` timestamp (``recent``); and how
    many such cells the row has in all (``count >= len(cells)``; equal when the prefix is the
    whole row). ``server_side``: whether the server summarized the row (only these cells
    crossed the network) or the client did, from the whole row."""

    cells: tuple[tuple[bytes, bytes], ...]
    count: int
    server_side: bool = False
    recent: tuple[tuple[bytes, bytes], ...] = ()


def check_prefix_request(limit: int, since: int | None) -> None:
    """Raise ValueError for a ``read_prefix`` request no store answers."""
    if limit < 0 or (since is not None and since < 0):
        raise ValueError(f"limit and since must be >= 0, got {limit}, {since}")
    if limit > MAX_PREFIX:
        raise ValueError(f"a prefix read asks for at most {MAX_PREFIX:,} cells, got {limit:,}")


def summarize(cells: Iterable[tuple[bytes, bytes, int]], limit: int, since: int | None, *,
              server_side: bool) -> RowPrefix:
    """The ``RowPrefix`` of a row's ``(qualifier, newest value, timestamp)`` cells given in
    qualifier order."""
    kept: list[tuple[bytes, bytes]] = []
    recent: list[tuple[bytes, bytes]] = []
    count = 0
    for qualifier, value, ts in cells:
        if value:
            if count < limit:
                kept.append((qualifier, value))
            elif since is not None and ts >= since:
                recent.append((qualifier, value))
            count += 1
    return RowPrefix(tuple(kept), count, server_side, tuple(recent))
