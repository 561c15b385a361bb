"""Admin calls of a store that wraps another: passed to the wrapped one.

Layer: storage.
"""

from __future__ import annotations

from typing import Sequence

from caffeine.storage.model import FamilySpec
from caffeine.storage.regions import Region


class InnerAdmin:
    """Table and family administration (``Store``'s admin methods) done by ``self.inner``, for
    a store that only changes how data calls are sent (``BatchingStore``). Listed before
    ``Store`` among the bases, so these come first."""

    inner: object  # the wrapped Store

    def create_table(self, table: str, families: dict[bytes, FamilySpec], split_keys: Sequence[bytes] = ()) -> None:
        self.inner.create_table(table, families, split_keys)

    def regions(self, table: str) -> list[Region]:
        return self.inner.regions(table)

    def drop_table(self, table: str) -> None:
        self.inner.drop_table(table)

    def list_tables(self) -> list[str]:
        return self.inner.list_tables()

    def table_exists(self, table: str) -> bool:
        return self.inner.table_exists(table)

    def ensure_table(self, table: str, families: dict[bytes, FamilySpec]) -> None:
        self.inner.ensure_table(table, families)

    def upgrade_families(self, table: str, families: dict[bytes, FamilySpec]) -> list[bytes]:
        return self.inner.upgrade_families(table, families)

    def families(self, table: str) -> tuple[bytes, ...]:
        return self.inner.families(table)
