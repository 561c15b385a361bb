"""How a Percolator-managed table is laid out in HBase.

Layer: percolator internals (imports ``caffeine.storage``).

One Percolator row is one HBase row; a user column ``c`` is the qualifier ``c`` (UTF-8) in
each of five families, so all of a cell's protocol state lives in one HBase row and single-row
atomicity is enough (the paper's Figure 5, families instead of column-name suffixes):

==========  ======  =====================================================  =============
family      name    holds                                                  versions
==========  ======  =====================================================  =============
``d``       data    the value written by the transaction at its start_ts   all (GC trims)
``l``       lock    an uncommitted transaction's lock, at its start_ts     1
``w``       write   committed PUT/DELETE at commit_ts; ROLLBACK at start   all (GC trims)
``n``       notify  "this observed column changed" (its own family, so      1
                    the observer scan reads nothing else)
``a``       ack     per observer: the change it last ran for               1
==========  ======  =====================================================  =============

Short family names on purpose: HBase stores the family name in every cell it writes.
"""

from __future__ import annotations

from caffeine.storage import MAX_TS, FamilySpec, Store, TableExists

DATA = b"d"
LOCK = b"l"
WRITE = b"w"
NOTIFY = b"n"
ACK = b"a"

FAMILY_NAMES = {DATA: "data", LOCK: "lock", WRITE: "write", NOTIFY: "notify", ACK: "ack"}

ALL_VERSIONS = 2**31 - 1  # HBase's maximum for VERSIONS

FAMILIES: dict[bytes, FamilySpec] = {
    DATA: FamilySpec(max_versions=ALL_VERSIONS, bloom="ROWCOL"),
    LOCK: FamilySpec(max_versions=1, in_memory=True, bloom="ROWCOL"),
    WRITE: FamilySpec(max_versions=ALL_VERSIONS, in_memory=True, bloom="ROWCOL"),
    NOTIFY: FamilySpec(max_versions=1, in_memory=True, bloom="ROW"),
    ACK: FamilySpec(max_versions=1, bloom="ROWCOL"),
}

# Tables the system itself uses (owner registry, oracle, worker coordination) live under
# the same prefix but are not Percolator-managed; user tables may not take these names.
RESERVED_TABLES = frozenset({"oracle", "owners", "workers"})


def qualifier(column: str | bytes) -> bytes:
    return column if isinstance(column, bytes) else column.encode("utf-8")


def column_name(qual: bytes) -> str:
    return qual.decode("utf-8", errors="surrogateescape")


def create_table(store: Store, table: str, *, exist_ok: bool = False) -> bool:
    """Create a Percolator-managed table; returns False if it existed and ``exist_ok``."""
    if table in RESERVED_TABLES:
        raise ValueError(f"table name {table!r} is reserved for Caffeine's own bookkeeping")
    try:
        store.create_table(table, FAMILIES)
        return True
    except TableExists:
        if exist_ok:
            return False
        raise


__all__ = [
    "DATA", "LOCK", "WRITE", "NOTIFY", "ACK", "FAMILIES", "FAMILY_NAMES", "MAX_TS",
    "RESERVED_TABLES", "qualifier", "column_name", "create_table",
]
