"""Helpers the protocol steps share: reading lock and write cells out of a row snapshot.

Layer: percolator. Protocol steps (pure: no I/O; imports records, layout and storage value types).
"""

from __future__ import annotations

from dataclasses import dataclass

from caffeine.oracle.timestamps import physical_ms
from caffeine.percolator.layout import LOCK, WRITE, data_family
from caffeine.percolator.records import Lock, Write
from caffeine.storage import Delete, DeleteUpTo, Row

# A commit or rollback step reads this many write versions at or above the transaction's
# start_ts; finding neither its own record nor a version below start_ts among them means
# more than this many transactions committed to the cell since, and the caller must look
# deeper (``Inconclusive``) before deciding anything irreversible.
WRITE_VERSIONS_SCANNED = 32


@dataclass(frozen=True, slots=True)
class Inconclusive:
    """The snapshot did not reach back far enough to decide; the caller must look deeper."""

    column: str


def unlock_committed(qual: bytes, start_ts: int) -> DeleteUpTo:
    """The delete that removes a committing transaction's lock on a column: every lock version
    at or below ``start_ts``, not only its own.

    Why every one: each transaction on a column writes a lock and deletes it, and a store keeps
    a deleted version and its marker until a major compaction, so a read of a busy column's
    lock (every prewrite's and commit's check, every snapshot read) would walk each one left
    since. Behind a marker for every version at or below a timestamp, a read skips the whole
    column's history at once.

    Why it hides nothing live: it is written only with or after the transaction's write record
    (a checked commit step, or ``thrift-cas``'s blind secondaries after their records). Until
    then our lock stood, and a prewrite finding any lock is refused, so no other lock was
    written below it; once the record is there, a prewrite with a start at or below ours
    finds it at ``commit_ts``, above its start, and is refused. A rollback keeps the exact
    delete: it also fences a column the transaction may never have locked, where an older
    transaction's lock can stand.
    """
    return DeleteUpTo(LOCK, qual, start_ts)


def unlock_rolled_back(qual: bytes, start_ts: int) -> list[Delete]:
    """The deletes that remove a rolled-back transaction's lock and data on a column: exact
    versions at ``start_ts`` (not ``unlock_committed``'s marker, see there)."""
    return [Delete(LOCK, qual, start_ts), Delete(data_family(qual), qual, start_ts)]


def lock_of(row: Row, qual: bytes) -> Lock | None:
    cell = row.latest(LOCK, qual)
    return Lock.decode(cell.ts, cell.value) if cell else None


def writes_of(row: Row, qual: bytes) -> list[tuple[int, Write]]:
    """(timestamp, record) newest first."""
    return [(c.ts, Write.decode(c.value)) for c in row.versions(WRITE, qual)]


def own_write(row: Row, qual: bytes, start_ts: int) -> tuple[int, Write] | None | Inconclusive:
    """The write record a transaction with ``start_ts`` left on a column, if any.

    Looks at the write versions read (newest first, all at or above ``start_ts`` when the
    read was bounded so). Returns the (ts, record), ``None`` if the snapshot proves there is
    none, or ``Inconclusive`` if it was cut off before reaching ``start_ts``.
    """
    versions = writes_of(row, qual)
    for ts, write in versions:
        if write.start_ts == start_ts:
            return ts, write
        if ts < start_ts:
            return None
    if len(versions) >= WRITE_VERSIONS_SCANNED:
        return Inconclusive(qual.decode("utf-8", "surrogateescape"))
    return None


def lock_expired(lock: Lock, now_ms: int) -> bool:
    """A lock is abandoned once its TTL has run from when it was written (``refreshed_ms``:
    its prewrite, or the last refresh of a long commit), or from its start for a lock that
    carries no write time.

    Judged by the physical part of start_ts, which never runs behind the oracle's clock, so
    clock error can only make a lock look younger, never expire it early.
    """
    return now_ms > max(physical_ms(lock.start_ts), lock.refreshed_ms) + lock.ttl_ms
