"""The HBase store's summary reads: the newest values of wide rows, named cells, row
prefixes and the cells rows have in common, answered packed by the coprocessor where it is
loaded (``summaries.py`` builds the requests and reads the answers), and a few wide rows read
one request per row at once.

Where the coprocessor is loaded, ``read_latest``, ``read_cells`` and ``read_prefix`` ask
Thrift2 for each row's answer packed in one cell: one decode per row instead of one per cell,
most of a wide row's read on the client; ``read_common`` asks the first row's region server to
intersect the rows. Without the coprocessor ``read_latest`` uses Thrift1's map, the others
Thrift2's cells (``read_common``: the rows read whole, intersected here).

Layer: storage. ``SummaryReads`` is a mixin of ``HBaseStore`` (``hbase.py``), which provides
what it uses: ``t2`` (the Thrift2 IDL), the ``thrift1``/``thrift2`` connection pools,
``settings``, ``_name``, ``_guarded_call``, ``families``, the reader threads
(``_readers``, ``_readers_lock``) and the flags ``_packing`` and ``_intersecting`` (whether
the coprocessor is still asked for packed answers and intersections).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from caffeine.storage.base import Store
from caffeine.storage.common_cells import CommonCells, check_common_request
from caffeine.storage.errors import StorageError
from caffeine.storage.model import check_row
from caffeine.storage.row_prefix import RowPrefix, check_prefix_request, summarize
from caffeine.storage.summaries import (CELLS_REQUEST, SUMMARY_ATTRIBUTE, SUMMARY_COUNT_QUALIFIER, common_request,
                                        newest_values, packed_cells, prefix_request, refuses_busy, refuses_packing,
                                        split_common)

__all__ = ["SummaryReads", "distinct_rows", "PARALLEL_CELLS", "PARALLEL_ROWS"]

# A read of at most PARALLEL_ROWS rows runs one request per row at once when some row asks
# for at least PARALLEL_CELLS cells by number (a head of that many, or that many named
# columns); smaller reads, reads of many rows, and whole-family reads (whose width is not
# known before) stay one request.
PARALLEL_CELLS = 256
PARALLEL_ROWS = 4


def _asks_many(tget) -> bool:
    """Whether a Thrift2 get asks for ``PARALLEL_CELLS`` or more cells by number: a summary
    of that many, or that many named columns."""
    request = (tget.attributes or {}).get(SUMMARY_ATTRIBUTE, b"")
    if request.startswith((b"packed ", b"prefix ")):
        return int(request.split()[1]) >= PARALLEL_CELLS
    columns = tget.columns or ()
    return len(columns) >= PARALLEL_CELLS and all(c.qualifier is not None for c in columns)


def distinct_rows(rows: Sequence[bytes]) -> list[bytes]:
    """``rows`` without repeats, in order, each a valid row key (``check_row``)."""
    out = list(dict.fromkeys(rows))
    for row in out:
        check_row(row)
    return out


class SummaryReads(Store):
    """``read_latest``, ``read_cells``, ``read_prefix`` and ``read_common`` on HBase (see
    the module docstring for what the host class provides)."""

    def read_latest(self, table: str, rows: Sequence[bytes], families: Sequence[bytes],
                    columns: Sequence[tuple[bytes, bytes]] = ()) -> dict[bytes, dict[bytes, bytes]]:
        rows = distinct_rows(rows)
        if not rows:
            return {}
        name = self._name(table)
        if self._packing:
            # Where the coprocessor is loaded, each row's newest values come back packed in
            # one cell (``summaries``): a wide row (a common term's postings) costs its client
            # one decode instead of one per cell.
            t2 = self.t2
            tcolumns = [*(t2.TColumn(family=f) for f in families), *(t2.TColumn(family=f, qualifier=q) for f, q in columns)]
            if not tcolumns:
                tcolumns = [t2.TColumn(family=f) for f in self.families(table)]
            tgets = [t2.TGet(row=row, columns=tcolumns, maxVersions=1, attributes={SUMMARY_ATTRIBUTE: CELLS_REQUEST})
                     for row in rows]
            results = self._summary_reads(name, lambda packed: tgets, table, fallback=False)
            if results is not None:
                out = {}
                for result in results:
                    got, packed = newest_values(result.columnValues or ())
                    if not packed:
                        # No coprocessor here: a Thrift2 answer of cells as stored, still right;
                        # Thrift1's map is the cheaper read from now on.
                        self._packing = False
                    if result.row is not None and got:
                        out[result.row] = got
                return out
        # Thrift1 already answers {b"family:qualifier": TCell} with the newest version only;
        # taking the values straight from it skips a Cell and a Row per cell.
        names = [*families, *(f + b":" + q for f, q in columns)] or list(self.families(table))
        results = self._guarded_call(
            self.thrift1, lambda conn: conn.client.getRowsWithColumns(name, rows, names, {}), table
        )
        return {
            result.row: {column: tcell.value for column, tcell in result.columns.items()}
            for result in results if result.columns
        }

    def read_cells(self, table: str, wanted) -> dict[bytes, dict[bytes, bytes]]:
        # Thrift2's getMultiple takes one TGet per row, each naming its own columns (Thrift1's
        # getRowsWithColumns names one list for every row): one round trip. Where the
        # coprocessor is loaded, each row's cells come back packed in one (``summaries``).
        wanted = {row: list(columns) for row, columns in wanted.items() if columns}
        if not wanted:
            return {}
        for row in wanted:
            check_row(row)
        name = self._name(table)
        t2 = self.t2

        def tgets(packed: bool):
            attributes = {SUMMARY_ATTRIBUTE: CELLS_REQUEST} if packed else None
            return [t2.TGet(row=row, columns=[t2.TColumn(family=f, qualifier=q) for f, q in columns], maxVersions=1,
                            attributes=attributes) for row, columns in wanted.items()]

        out = {}
        for result in self._summary_reads(name, tgets, table):
            got, _ = newest_values(result.columnValues or ())
            if result.row is not None and got:
                out[result.row] = got
        return out

    def read_prefix(self, table: str, rows: Sequence[bytes], family: bytes, limit: int,
                    since: int | None = None) -> dict[bytes, RowPrefix]:
        # The coprocessor answers a Get carrying SUMMARY_ATTRIBUTE in the region server
        # (coprocessor/.../RowSummaries.java): the prefix, the recent cells and the count,
        # packed in one cell. Without it the server ignores the attribute and sends the whole
        # row (with timestamps), summarized here: the same answer.
        check_prefix_request(limit, since)
        rows = distinct_rows(rows)
        if not rows:
            return {}

        def tgets(packed: bool):
            request = prefix_request(limit, since, packed)
            return [self.t2.TGet(row=row, columns=[self.t2.TColumn(family=family)], maxVersions=1,
                                 attributes={SUMMARY_ATTRIBUTE: request}) for row in rows]

        out = {row: RowPrefix((), 0, False) for row in rows}
        for result in self._summary_reads(self._name(table), tgets, table):
            if result.row is None:
                continue
            values = result.columnValues or ()
            packed = packed_cells(values)
            if packed is not None:
                count, cells = packed[0], [(q, v) for _, q, v in packed[1]]
            elif values and values[-1].qualifier == SUMMARY_COUNT_QUALIFIER:
                count, cells = int(values[-1].value), [(cv.qualifier, cv.value) for cv in values[:-1]]
            else:
                out[result.row] = summarize(((cv.qualifier, cv.value, cv.timestamp) for cv in values), limit, since,
                                            server_side=False)
                continue
            head = min(limit, len(cells))
            out[result.row] = RowPrefix(tuple(cells[:head]), count, True, tuple(cells[head:]))
        return out

    def read_common(self, table: str, rows: Sequence[bytes], family: bytes, limit: int,
                    sizes: Sequence[int] | None = None, *, server_only: bool = False) -> CommonCells | None:
        # The coprocessor answers a Get of the first row carrying a ``common`` request
        # (coprocessor/.../RowsCommon.java) with the rows' common cells packed in one cell.
        # Without it the server sends the first row's cells as stored; one older than the
        # request refuses it: from then on the server is not asked. A region server gathering
        # too many rows from others answers "busy": this read only. Each time, the rows are
        # read whole and intersected here (the same answer), or None for ``server_only``.
        if sizes is not None:
            if len(sizes) != len(rows):
                raise ValueError(f"{len(sizes)} sizes for {len(rows)} rows")
            sizes = list({row: size for row, size in zip(rows, sizes)}.values())   # as the rows, once each
        rows = distinct_rows(rows)
        check_common_request(rows, limit)
        if self._intersecting:
            tget = self.t2.TGet(row=rows[0], columns=[self.t2.TColumn(family=family)], maxVersions=1,
                                attributes={SUMMARY_ATTRIBUTE: common_request(limit, rows, sizes)})
            try:
                results = self._guarded_call(self.thrift2, lambda c: c.getMultiple(self._name(table), [tget]), table)
            except StorageError as exc:
                if refuses_packing(exc):
                    self._intersecting = False  # every region server of a cluster runs the same jar
                elif not refuses_busy(exc):
                    raise
            else:
                packed = packed_cells(results[0].columnValues or ()) if results else None
                if packed is not None:
                    return CommonCells(split_common(rows, packed[1]), packed[0], True)
                if results and results[0].columnValues:
                    self._intersecting = False  # the row as stored: no coprocessor
        if server_only:
            return None
        return super().read_common(table, rows, family, limit, sizes)

    def _summary_reads(self, name: bytes, tgets, table: str, *, fallback: bool = True) -> list | None:
        """``getMultiple`` of ``tgets(packed)`` (``_get_multiple``): packed answers asked for
        until a coprocessor refuses them (one older than packing; ``summaries.refuses_packing``),
        the per-cell form from then on (``fallback`` False: None instead of the per-cell read)."""
        if self._packing:
            try:
                return self._get_multiple(name, tgets(True), table)
            except StorageError as exc:
                if not refuses_packing(exc):
                    raise
                self._packing = False  # every region server of a cluster runs the same jar
        if not fallback:
            return None
        return self._get_multiple(name, tgets(False), table)

    def _get_multiple(self, name: bytes, tgets: list, table: str) -> list:
        """The results of ``tgets``: one ``getMultiple``, or, for 2 to ``PARALLEL_ROWS`` rows of
        which some ask for many cells (``_asks_many``), one per row at once: the first on the
        calling thread, the others on the store's reader threads. Why: the region server
        answers one request's Gets one after the other, and the client decodes one answer
        while the server reads the next: three 2,048-cell heads took 0.75 times as long apart
        as together, three 8,192-cell ones 0.85 times. When one row's request fails, those
        not started are cancelled and the error is raised."""
        if not 2 <= len(tgets) <= PARALLEL_ROWS or not any(_asks_many(g) for g in tgets):
            return self._guarded_call(self.thrift2, lambda c: c.getMultiple(name, tgets), table)
        with self._readers_lock:
            if self._readers is None:
                # As many threads as pooled connections: concurrent callers do not queue here.
                self._readers = ThreadPoolExecutor(self.settings.pool_size, thread_name_prefix="hbase-read")
            readers = self._readers
        futures = [readers.submit(self._guarded_call, self.thrift2, lambda c, g=g: c.getMultiple(name, [g]), table)
                   for g in tgets[1:]]
        try:
            results = list(self._guarded_call(self.thrift2, lambda c: c.getMultiple(name, tgets[:1]), table))
            for future in futures:
                results.extend(future.result())
        except BaseException:
            for future in futures:
                future.cancel()
            raise
        return results
