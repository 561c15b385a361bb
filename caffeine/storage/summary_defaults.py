"""The summary reads of a store, as every store can answer them: from whole rows.

Layer: storage. ``Store`` inherits these defaults; a store whose server summarizes (HBase with
Caffeine's coprocessor: ``hbase_summaries.py``) overrides them with reads that send back only
the summary. The answers are the same either way; the contracts are in each docstring.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from caffeine.storage.common_cells import CommonCells, check_common_request, intersect
from caffeine.storage.model import ReadSpec
from caffeine.storage.row_prefix import RowPrefix, check_prefix_request, summarize

__all__ = ["SummaryDefaults"]


class SummaryDefaults:
    """``read_latest``, ``read_cells``, ``read_prefix`` and ``read_common`` over ``read_rows``."""

    def read_latest(
        self, table: str, rows: Sequence[bytes], families: Sequence[bytes],
        columns: Sequence[tuple[bytes, bytes]] = (),
    ) -> dict[bytes, dict[bytes, bytes]]:
        """The newest value of every cell of ``families``, and of the single ``columns``
        ((family, qualifier) pairs), in each row, in one round trip where the server allows:
        ``{row: {b"family:qualifier": value}}``, rows without cells left out. No timestamps,
        no Row objects: the fast way through wide rows whose newest versions are all a reader
        wants (a serving table's posting lists, or a thousand of their cells by name)."""
        spec = ReadSpec(families=tuple(families), columns=tuple(columns))
        out = {}
        for key, row in self.read_rows(table, rows, spec).items():
            cells = {c.family + b":" + c.qualifier: c.value for c in row.newest_cells()}
            if cells:
                out[key] = cells
        return out

    def read_cells(self, table: str, wanted: Mapping[bytes, Sequence[tuple[bytes, bytes]]]) -> dict[bytes, dict[bytes, bytes]]:
        """``read_latest`` of different single columns in each row: ``wanted`` maps a row to
        its (family, qualifier) pairs; ``{row: {b"family:qualifier": value}}``, rows without
        such cells left out. One round trip where the server allows, or for a few rows asking
        many, one per row at once (this default makes one per row, in turn). For a reader that needs a few hundred named cells of several wide rows,
        each row's own: the server seeks only those, not their union in every row."""
        out = {}
        for row, columns in wanted.items():
            if columns:
                out.update(self.read_latest(table, [row], (), list(columns)))
        return out

    def read_prefix(self, table: str, rows: Sequence[bytes], family: bytes, limit: int,
                    since: int | None = None) -> dict[bytes, RowPrefix]:
        """Per row: its first ``limit`` cells of ``family`` whose newest value is non-empty, in
        qualifier order; with ``since``, also every later such cell written at a timestamp
        ``>= since``; and the number of such cells in the whole row (``RowPrefix``), in one
        round trip where the server allows (or, for a few rows' long prefixes, one per row at
        once). ``limit=0`` (and no ``since``) asks for the count
        alone. Every key gets an answer (an empty row: no cells, count 0). ``limit`` is at
        most ``MAX_PREFIX`` (ValueError otherwise, before anything is sent).

        Why: a reader of a wide row's first entries, recent ones and size (a common term's
        posting list) pays for those, not for the row. The server reads the prefix and the
        cells since ``since``; a ``FamilySpec.counted`` family's count is kept at write time
        (HBase: by the coprocessor), any other's is a walk of the row. A store that cannot
        summarize on the server reads the rows and summarizes them here
        (``RowPrefix.server_side`` False): the same answer."""
        check_prefix_request(limit, since)
        out = {}
        for key, row in self.read_rows(table, list(dict.fromkeys(rows)), ReadSpec(families=(family,))).items():
            # newest_cells() is in no particular order; a summary's prefix is in qualifier order.
            cells = sorted((c.qualifier, c.value, c.ts) for c in row.newest_cells())
            out[key] = summarize(cells, limit, since, server_side=False)
        return out

    def read_common(self, table: str, rows: Sequence[bytes], family: bytes, limit: int,
                    sizes: Sequence[int] | None = None, *, server_only: bool = False) -> CommonCells | None:
        """The cells of ``family`` that ``rows`` (shortest first; ``sizes``: their expected
        live cells, if known) have in common, in one round trip where the server allows
        (``caffeine.storage.common_cells``: how, why, cost). Duplicate rows count once; 1 to
        ``MAX_COMMON_ROWS`` rows, ``limit`` at most ``MAX_PREFIX`` (else ValueError, nothing
        sent). A store that cannot intersect on the server reads the rows whole and
        intersects them here (``server_side`` False), or returns None for ``server_only``."""
        if server_only:
            return None
        rows = list(dict.fromkeys(rows))
        check_common_request(rows, limit)
        read = self.read_rows(table, rows, ReadSpec(families=(family,)))
        return intersect({key: {c.qualifier: c.value for c in read[key].newest_cells()} for key in rows}, limit,
                         server_side=False)
