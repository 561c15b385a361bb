"""HBase's Thrift1 interface (happybase): connections, and the reads that take that way.

Layer: storage. Used by ``hbase.py`` only; nothing else touches happybase. Requests are
built from, and answers turned into, the storage model: column names from a ``ReadSpec``, a
``TScan``, a ``Row`` from Thrift1's ``{b"family:qualifier": TCell}``.

Thrift1 expresses an upper time bound (half-open, so an inclusive ``max_ts`` is sent as
``max_ts + 1``) and answers the newest version of each column, nothing more: only reads with
no lower bound and one version go this way (``answers``).
"""

from __future__ import annotations

import happybase
from Hbase_thrift import TScan  # the module happybase registers for its Thrift1 IDL

from caffeine.config import Settings
from caffeine.storage.model import GUARD_FAMILY, GUARD_QUALIFIER, Cell, ReadSpec, Row


def connect(settings: Settings) -> happybase.Connection:
    """An open happybase connection to the Thrift1 server ``settings`` name."""
    conn = happybase.Connection(
        settings.thrift1_host, settings.thrift1_port, timeout=settings.thrift_timeout_ms, autoconnect=False
    )
    conn.open()
    return conn


def answers(spec: ReadSpec) -> bool:
    """Whether Thrift1 can answer a read of ``spec`` (newest version, no lower bound)."""
    return spec.versions == 1 and spec.min_ts == 0


def end_ts(spec: ReadSpec) -> int | None:
    """``spec``'s inclusive upper bound as Thrift1's exclusive one (None: unbounded)."""
    return None if spec.max_ts is None else spec.max_ts + 1


def get_row(client, name: bytes, row: bytes, columns: list[bytes], spec: ReadSpec) -> list:
    """Thrift1's answer to a read of one row (a list of at most one ``TRowResult``)."""
    if spec.max_ts is None:
        return client.getRowWithColumns(name, row, columns, {})
    return client.getRowWithColumnsTs(name, row, columns, end_ts(spec), {})


def get_rows(client, name: bytes, rows: list[bytes], columns: list[bytes], spec: ReadSpec) -> list:
    """Thrift1's answer to a read of several rows (a ``TRowResult`` per row found)."""
    if spec.max_ts is None:
        return client.getRowsWithColumns(name, rows, columns, {})
    return client.getRowsWithColumnsTs(name, rows, columns, end_ts(spec), {})


def column_names(spec: ReadSpec, every_family: tuple[bytes, ...], with_guard: bool) -> list[bytes]:
    """The ``family`` and ``family:qualifier`` names a read of ``spec`` asks for;
    ``every_family`` (the table's) when the spec names none."""
    if spec.families or spec.columns:
        cols = [f for f in spec.families] + [f + b":" + q for f, q in spec.columns]
    else:
        cols = list(every_family)
    if with_guard:
        cols.append(GUARD_FAMILY + b":" + GUARD_QUALIFIER)
    return cols


def row_of(key: bytes, columns: dict, spec: ReadSpec, with_guard: bool) -> Row:
    """A Row from Thrift1's ``{b"family:qualifier": TCell(value, timestamp)}``."""
    cells = []
    guard = None
    # The server applied the columns and the upper bound already; re-checking every cell
    # costs more than the rest of the conversion on wide rows (postings).
    trusted = spec.min_ts == 0 and not spec.columns
    for name, tcell in columns.items():
        value, ts = tcell.value, tcell.timestamp
        family, _, qualifier = name.partition(b":")
        if family == GUARD_FAMILY:
            guard = value if with_guard else None
        elif trusted or (spec.selects(family, qualifier) and spec.covers(ts)):
            cells.append(Cell(family, qualifier, ts, value))
    return Row(key, cells, guard)


def tscan(start: bytes, stop: bytes | None, columns: list[bytes], spec: ReadSpec, page_size: int,
          filter_string: bytes | None) -> TScan:
    """One scan page's request."""
    return TScan(
        startRow=start,
        stopRow=stop,
        timestamp=end_ts(spec),
        columns=columns,
        caching=page_size,
        filterString=filter_string,
    )


def scan_page(client, name: bytes, tscan: TScan, page_size: int, attributes: dict | None = None) -> list:
    """One scan page (up to ``page_size`` ``TRowResult``s) on a scanner of its own;
    ``attributes`` go on the server's Scan."""
    scanner = client.scannerOpenWithScan(name, tscan, attributes or {})
    # Closed only after a page that arrived: after a failure (a timeout may leave the reply
    # in flight) nothing more may be sent on this connection, which the pool discards; the
    # server expires the scanner's lease.
    rows = client.scannerGetList(scanner, page_size)
    client.scannerClose(scanner)
    return rows
