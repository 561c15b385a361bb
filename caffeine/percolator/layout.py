"""How a Percolator-managed table is laid out in HBase.

Layer: percolator. Internal (imports ``caffeine.storage``).

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
``a``       ack     data of ack columns (per observer: the change it last  all (GC trims)
                    ran for); their locks and writes are in ``l``/``w``
==========  ======  =====================================================  =============

Ack columns are transactional like any other (two observer runs for one change conflict on
them, so at most one commits); only their data lives in ``a`` instead of ``d``, so that a
row's application data and its observer bookkeeping are read and shown apart. Their names
start with ``ACK_PREFIX``, which applications may not use.

Short family names on purpose: HBase stores the family name in every cell it writes.

A table may start as several regions (``split_keys``), so that HBase spreads it over its
region servers from the first write; where to cut is the application's knowledge of its
row keys, handed down as a ``SplitPolicy`` (the indexing application's is
``caffeine.index.schema.split_points``), and how many regions the deployment's
(``Settings.regions_per_table``): ``split_keys(policy, table, settings)``.
"""

from __future__ import annotations

from typing import Callable, Sequence

from caffeine.config import Settings
from caffeine.storage import MAX_TS, FamilySpec, Store, TableExists

# Given a table's logical name and a number of regions, the keys to split it at (at most
# regions - 1, strictly increasing; none: one region).
SplitPolicy = Callable[[str, int], Sequence[bytes]]

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
    NOTIFY: FamilySpec(max_versions=1, in_memory=True, bloom="ROW", churn=True),
    ACK: FamilySpec(max_versions=ALL_VERSIONS, bloom="ROWCOL"),
}

# Tables the system itself uses (owner registry, oracle, worker coordination, observer
# registry) live under the same prefix but are not Percolator-managed; user tables may not
# take these names.
RESERVED_TABLES = frozenset({"oracle", "owners", "workers", "observers"})


def ensure_system_table(store: Store, table: str, family: bytes) -> None:
    """Create one of the system's own tables (``RESERVED_TABLES``) unless it exists: one
    family of small, hot cells (one version each, blocks kept in memory)."""
    if table not in RESERVED_TABLES:
        raise ValueError(f"{table!r} is not one of the system's own tables")
    store.ensure_table(table, {family: FamilySpec(max_versions=1, in_memory=True)})


ACK_PREFIX = "__ack__/"
_ACK_PREFIX_BYTES = ACK_PREFIX.encode()


def ack_column(observer_name: str) -> str:
    """The transactional column an observer's runs acknowledge changes in."""
    return ACK_PREFIX + observer_name


def data_family(qual: bytes) -> bytes:
    """Where a column's values live: ``a`` for ack columns, ``d`` for everything else."""
    return ACK if qual.startswith(_ACK_PREFIX_BYTES) else DATA


def qualifier(column: str | bytes) -> bytes:
    return column if isinstance(column, bytes) else column.encode("utf-8")


def column_name(qual: bytes) -> str:
    return qual.decode("utf-8", errors="surrogateescape")


def is_percolator_table(store: Store, table: str) -> bool:
    """Whether ``table`` is laid out as a Percolator table (it has all five families).

    Serving tables (the index, the batch job's tables) and the system's own tables have
    other families; what reads the protocol's families (GC, scans of locks) must skip them.
    """
    return table not in RESERVED_TABLES and set(FAMILIES) <= set(store.families(table))


def split_keys(policy: SplitPolicy | None, table: str, settings: Settings) -> tuple[bytes, ...]:
    """Where ``policy`` cuts ``table`` into the deployment's ``regions_per_table`` regions
    (none without a policy, or with one region per table)."""
    regions = settings.regions_per_table
    return tuple(policy(table, regions)) if policy is not None and regions > 1 else ()


def create_table(store: Store, table: str, *, exist_ok: bool = False, split_keys: Sequence[bytes] = ()) -> bool:
    """Create a Percolator-managed table, split at ``split_keys`` if any; returns False if it
    existed and ``exist_ok`` (its families then brought up to date:
    ``Store.upgrade_families``; its regions stay as they are)."""
    if table in RESERVED_TABLES:
        raise ValueError(f"table name {table!r} is reserved for Caffeine's own bookkeeping")
    try:
        store.create_table(table, FAMILIES, split_keys)
        return True
    except TableExists:
        if exist_ok:
            store.upgrade_families(table, FAMILIES)
            return False
        raise


__all__ = [
    "DATA", "LOCK", "WRITE", "NOTIFY", "ACK", "FAMILIES", "FAMILY_NAMES", "MAX_TS",
    "RESERVED_TABLES", "ensure_system_table", "ACK_PREFIX", "is_percolator_table", "ack_column", "data_family", "qualifier", "column_name", "create_table",
    "SplitPolicy", "split_keys",
]
