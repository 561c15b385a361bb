"""Shards of a table's rows: the rows whose key's CRC-32 modulo ``count`` is ``index``.

Layer: storage. Workers deal a table's rows to themselves this way (``percolator.workers_table``)
and list only their own shard (``Store.scan(shard=...)``); on HBase, Caffeine's coprocessor
selects a scan's shard where the rows are (``coprocessor/.../RowShards.java``, which computes
the same CRC-32 as ``zlib``).
"""

from __future__ import annotations

import zlib

# One shard of a table's rows: (index, count), the rows whose key's CRC-32 modulo count is index
# (``Store.scan(shard=...)``; workers deal rows to themselves this way).
Shard = tuple[int, int]
SHARD_ATTRIBUTE = b"caffeine.shard"  # the coprocessor's scan attribute (RowShards.java)


def in_shard(key: bytes, shard: Shard) -> bool:
    """Whether row ``key`` is in ``shard`` (CRC-32 as zlib, and Java's CRC32, compute it)."""
    index, count = shard
    return zlib.crc32(key) % count == index


def check_shard(shard: Shard) -> bytes:
    """ValueError unless ``shard`` is (index, count) with 0 <= index < count; its attribute value."""
    index, count = shard
    if not (isinstance(index, int) and isinstance(count, int) and 0 <= index < count):
        raise ValueError(f"a shard is (index, count) with 0 <= index < count, not {shard!r}")
    return b"%d/%d" % (index, count)
