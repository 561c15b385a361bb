"""Writes into a counted family whose counts depend on the columns a region already holds.

Layer: test support. A counted write of a column the region never held is counted without
reading it (coprocessor/.../CountedColumns.java): the region keeps a filter of every column its
counted families hold, rebuilt when the region opens. ``CountedRows`` writes rows, keeps the
model of what a walk must count, and, once the region has been reopened (or its server
restarted), writes what only an exact knowledge of the stored columns counts right: a put
below a column's newest timestamp (hidden: no change), an empty value over a live cell (one
less), and new columns (one more). A filter that missed a stored column counts the first two
wrong.
"""

from __future__ import annotations

import random

from caffeine.storage import FamilySpec, Put, ReadSpec

FAMILY = b"c"
SPEC = {FAMILY: FamilySpec(counted=True)}


class CountedRows:
    """``rows`` rows of ``table`` (created with ``SPEC``) and the model of their columns."""

    def __init__(self, store, table: str, rows: int = 12, columns: int = 8) -> None:
        self.store, self.table = store, table
        self.keys = [b"row-%02d" % i for i in range(rows)]
        self.columns = columns
        self.model: dict[bytes, dict[bytes, tuple[int, bytes]]] = {k: {} for k in self.keys}

    def _put(self, batch: dict[bytes, list[Put]]) -> None:
        for key, puts in batch.items():
            for p in puts:
                current = self.model[key].get(p.qualifier)
                if current is None or p.ts >= current[0]:
                    self.model[key][p.qualifier] = (p.ts, p.value)
        self.store.put_rows(self.table, batch)

    def write_first(self, ts: int = 10) -> None:
        """Every row gets ``columns`` columns at ``ts``, one in four of them empty."""
        self._put({key: [Put(FAMILY, b"q%02d" % q, ts, b"" if (i + q) % 4 == 0 else b"v%d" % q)
                         for q in range(self.columns)] for i, key in enumerate(self.keys)})

    def write_after_reopen(self, older: int = 5, newer: int = 20) -> None:
        """Over the columns ``write_first`` wrote: a live value below their timestamp (hidden),
        an empty value above it on every other one; and two new columns per row."""
        self._put({key: [Put(FAMILY, b"q%02d" % q, older, b"hidden") for q in range(self.columns)] for key in self.keys})
        self._put({key: [Put(FAMILY, b"q%02d" % q, newer, b"") for q in range(0, self.columns, 2)] for key in self.keys})
        self._put({key: [Put(FAMILY, b"n%02d" % q, newer, b"new") for q in range(2)] for key in self.keys})

    def write_round(self, rng: random.Random, ts_range: tuple[int, int] = (1, 40)) -> None:
        """One batch over every row: each column, with even odds, left alone or written once at
        a random timestamp (above, at or below its newest), live or empty; and now and then a
        new column. Timestamps repeat across rounds (a tie replaces: the later write wins)."""
        batch: dict[bytes, list[Put]] = {}
        for key in self.keys:
            puts = [Put(FAMILY, b"q%02d" % q, rng.randint(*ts_range), rng.choice((b"", b"v%d" % q)))
                    for q in range(self.columns) if rng.random() < 0.5]
            if rng.random() < 0.25:
                puts.append(Put(FAMILY, b"n%06d" % rng.randrange(10 ** 6), rng.randint(*ts_range), b"new"))
            if puts:
                batch[key] = puts
        self._put(batch)

    def expected(self) -> dict[bytes, int]:
        return {key: sum(1 for _, value in cells.values() if value) for key, cells in self.model.items()}

    def counted(self) -> dict[bytes, int]:
        got = self.store.read_prefix(self.table, self.keys, FAMILY, 0)
        return {key: got[key].count for key in self.keys}

    def walked(self) -> dict[bytes, int]:
        counts = {}
        for key in self.keys:
            row = self.store.read_row(self.table, key, ReadSpec(families=(FAMILY,)))
            counts[key] = sum(1 for c in row.newest_cells() if c.value)
        return counts
