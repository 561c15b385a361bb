"""The HBase store: happybase (Thrift1) for admin, reads and scans; Thrift2 for atomic writes.

Layer: storage. Nothing above this module touches happybase or Thrift. ``HBaseStore`` makes
the calls (through a ``ConnectionPool`` per server) and decides which server serves what;
each protocol's requests and answers are built and read in a module of their own:
``thrift1.py`` (happybase), ``thrift2.py`` (the IDL and ``Thrift2Codec``), and what their
errors say in ``thrift_errors.py``.

Which protocol does what, and why:

- Thrift1 (happybase) cannot apply a row's puts and deletes atomically (``mutateRow`` sends
  them as two operations and stamps all puts with one timestamp), so every write goes through
  Thrift2: ``mutateRow`` (atomic row mutations, a timestamp per cell) and ``checkAndMutate``
  (compare the row guard, then mutate, under the row lock).
- Reads of the newest version below a bound (what the protocol reads most) go through
  happybase. Thrift1 can express neither a lower time bound nor several versions per column
  of a family, so those reads use Thrift2's ``get``/``getMultiple``/``getScannerResults``.
- Summary reads (``read_latest``, ``read_cells``, ``read_prefix``, ``read_common``) are in
  ``hbase_summaries.py``.
- HBase time ranges are half-open ``[min, max)``; ``ReadSpec`` ranges are inclusive, so an
  upper bound T is sent as T + 1 by both codecs (pinned by ``test_read_as_of_includes_t``).
- Thrift2 ``checkAndMutate`` in HBase 2.6.1 throws NullPointerException on a null expected
  value; an *empty* value with EQUAL matches a missing cell, so an absent guard is sent as
  ``b""`` and guards are never empty.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Sequence

from caffeine.config import Settings
from caffeine.storage import thrift1, thrift2
from caffeine.storage.errors import OutcomeUnknown, StorageError, TableExists, TableNotFound
from caffeine.storage.hbase_summaries import SummaryReads
from caffeine.storage.idl import thrift2_idl_path
from caffeine.storage.model import (
    COUNT_FAMILY,
    GUARD_FAMILY,
    GUARD_QUALIFIER,
    Delete,
    DeleteUpTo,
    FamilySpec,
    Mutation,
    Put,
    RESERVED_FAMILIES,
    ReadSpec,
    Row,
    as_bytes,
    check_row,
    fresh_tokens,
    reject_reserved,
)
from caffeine.storage.regions import Region, check_split_keys
from caffeine.storage.shards import SHARD_ATTRIBUTE, check_shard
from caffeine.storage.pool import ConnectionPool
from caffeine.storage.thrift2 import Thrift2Codec, load_thrift2
from caffeine.storage.thrift_errors import describe_error, names_missing_table, step_answers

__all__ = ["HBaseStore", "load_thrift2"]

# The family configuration that makes the coprocessor keep a family's live-cell count.
COUNT_CONFIG_KEY = "caffeine.count"
COUNT_CONFIG_LIVE = "live"
# The family configuration that makes the coprocessor flush and major-compact a churn family
# (FamilySpec.churn) on its own once its memstore holds this many cells (puts and delete
# markers): a scan then walks at most about that many cells of history. The workers' and the
# back-pressure's notification scans walk that history again and again (client scans were a
# fifth of the region server's JFR samples under the pipeline); 1,024 instead of 4,096 took
# HBase's CPU per page from 19.8 to 15.1 ms and documents/s from 39 to 48 on one runtime at
# 3,000 pages, and at 5,000 pages HBase's from 22.3 to 19.9 ms, pages/s from 34.6 to 38.9
# (docs/PERFORMANCE.md). The coprocessor looks every 2 s (caffeine.churn.check.ms), so below
# about two seconds' notifications a smaller threshold changes little.
CHURN_CONFIG_KEY = "caffeine.churn.cells"
CHURN_CELLS = 1024
# Thresholds earlier releases gave every churn family they created: ``upgrade_families``
# moves a family that still has one to today's (any other value was tuned, and stays).
EARLIER_CHURN_CELLS = frozenset({"4096"})


# The count family (one small cell per counted row, rewritten by every write of the row):
# the coprocessor reads a row's count cell on every write, and seeking it walked a 64 KB
# block of count cells from its start; with an index of the rows per block it bisects.
# That halved the region server's CPU per counted write (bench/bench_counted_writes.py).
COUNT_FAMILY_SPEC = FamilySpec(max_versions=1, in_memory=True, encoding="ROW_INDEX_V1")


def family_configuration(families: dict[bytes, FamilySpec]) -> dict[bytes, dict[str, str]]:
    """The HBase family configuration that asks the coprocessor for what ``families`` declare:
    live-cell counts (``counted``), compaction on its own (``churn``)."""
    configuration: dict[bytes, dict[str, str]] = {}
    for name, spec in families.items():
        if spec.counted:
            configuration.setdefault(name, {})[COUNT_CONFIG_KEY] = COUNT_CONFIG_LIVE
        if spec.churn:
            configuration.setdefault(name, {})[CHURN_CONFIG_KEY] = str(CHURN_CELLS)
    return configuration


def _checked_batch(rows, kinds, what: str) -> list[tuple[bytes, list]]:
    """A batch write's ``{row: mutations}`` as (row, mutations) pairs, once every row key is
    valid and every mutation one of ``kinds`` outside the reserved families (else ValueError,
    before anything is sent)."""
    out = []
    for row, mutations in rows.items():
        check_row(row)
        for m in mutations:
            if not isinstance(m, kinds):
                raise ValueError(f"{what}, not {m!r}")
            reject_reserved(m.family)
        out.append((row, list(mutations)))
    return out


def _cells_tputs(codec, rows) -> list:
    """``Store.put_cells``' rows as unguarded TPuts, once every row key is valid and no family
    reserved (else ValueError, before anything is sent); rows without cells left out."""
    checked_families: set[bytes] = set()
    tputs = []
    for row, cells in rows.items():
        check_row(row)
        if cells:
            tputs.append(codec.cells_tput(row, cells, checked_families))
    return tputs


def _scan_filter(key_only: bool, first_cell_only: bool) -> bytes | None:
    """The server-side filter of a scan (HBase's filter language)."""
    filters = []
    if key_only:
        filters.append(b"KeyOnlyFilter()")
    if first_cell_only:
        filters.append(b"FirstKeyOnlyFilter()")
    return b" AND ".join(filters) or None


class HBaseStore(SummaryReads):
    """A Store over the Thrift servers named in ``settings``.

    Table names given to its methods are logical; the HBase table is
    ``settings.table_prefix + name``. ``thrift2_idl`` is the path of HBase's Thrift2 IDL
    (by default ``settings.thrift2_idl``, else the one packaged with Caffeine).
    """

    def __init__(self, settings: Settings, thrift2_idl: str | None = None) -> None:
        super().__init__()
        self.settings = settings
        self.prefix = settings.table_prefix
        self.t2 = load_thrift2(str(thrift2_idl or thrift2_idl_path(settings)))
        self.codec = Thrift2Codec(self.t2)
        self.thrift1 = ConnectionPool(
            f"Thrift1 server {settings.thrift1_host}:{settings.thrift1_port}",
            lambda: thrift1.connect(settings), lambda c: c.close(),
            size=settings.pool_size, stats=self.stats, label="thrift1",
        )
        self.thrift2 = ConnectionPool(
            f"Thrift2 server {settings.thrift2_host}:{settings.thrift2_port}",
            lambda: thrift2.connect(self.t2, settings.thrift2_host, settings.thrift2_port, settings.thrift_timeout_ms),
            lambda c: c.close(),
            size=settings.pool_size, stats=self.stats, label="thrift2",
        )
        self._families: dict[str, tuple[bytes, ...]] = {}
        # Whether summary reads ask for packed answers (``_summary_reads``): until refused.
        self._packing = True
        # Whether ``read_common`` asks the server to intersect: until a coprocessor refuses.
        self._intersecting = True
        # Threads reading the rows of one read at once (``_get_multiple``), made on first use.
        self._readers: ThreadPoolExecutor | None = None
        self._readers_lock = threading.Lock()

    def _name(self, table: str) -> bytes:
        return (self.prefix + table).encode()

    # -- admin -----------------------------------------------------------------------------
    def create_table(self, table: str, families: dict[bytes, FamilySpec], split_keys: Sequence[bytes] = ()) -> None:
        for family in families:
            reject_reserved(family)
        keys = check_split_keys(split_keys)
        reserved = {GUARD_FAMILY: FamilySpec(max_versions=1, in_memory=True)}
        counted = [name for name, spec in families.items() if spec.counted]
        if counted:
            reserved[COUNT_FAMILY] = COUNT_FAMILY_SPEC
        all_families = {**families, **reserved}
        configuration = family_configuration(families)
        if configuration or keys or any(spec.block_size or spec.encoding for spec in all_families.values()):
            # Thrift1's column descriptors carry no configuration (the coprocessor finds a
            # counted or churn family by its configuration: coprocessor/.../RowCounts.java,
            # ChurnCompactor.java), no block size and no encoding, and happybase's
            # create_table sends no split keys.
            descriptor = self.codec.ttable_descriptor(self._name(table), all_families, configuration)
            create = lambda c: c.createTable(descriptor, list(keys) or None)  # noqa: E731
            pool = self.thrift2
        else:
            options = {
                name.decode(): dict(
                    max_versions=spec.max_versions,
                    in_memory=spec.in_memory,
                    bloom_filter_type=spec.bloom,
                    block_cache_enabled=True,
                )
                for name, spec in all_families.items()
            }
            create = lambda c: c.create_table(self._name(table).decode(), options)  # noqa: E731
            pool = self.thrift1
        try:
            pool.call(create)
        except StorageError:
            raise
        except Exception as exc:
            # Thrift1 reports an existing table as AlreadyExists (or, from some paths, as
            # an IOError naming TableExistsException); Thrift2 as a TIOError naming it.
            if type(exc).__name__ == "AlreadyExists" or "TableExistsException" in describe_error(exc):
                raise TableExists(table) from None
            raise StorageError(f"creating table {table!r}: {describe_error(exc)}") from exc

    def upgrade_families(self, table: str, families: dict[bytes, FamilySpec]) -> list[bytes]:
        """Bring a table created before to what its families now get at creation, where HBase
        can change it in place: the churn configuration (``family_configuration``) and, when
        it counts a family, the count family's encoding (``COUNT_FAMILY_SPEC``). Each changed
        family's descriptor is read and sent back with just that changed, so everything else
        about it (compression, other configuration, a tuned churn threshold) stays; HBase
        reopens the table's regions, a moment's unavailability clients retry, and the store
        files written from then on have the new layout (older ones keep theirs until
        compacted: reads understand both). A churn threshold an earlier release set by
        default (``EARLIER_CHURN_CELLS``) is moved to today's. Live-cell counts are not
        turned on here: counting a family that holds cells needs its counts built. Returns
        the families changed."""
        churn = {name for name, config in family_configuration(families).items() if CHURN_CONFIG_KEY in config}
        if not churn and not any(spec.counted for spec in families.values()):
            return []  # nothing here that a table's creation sets differently now
        tname = self.t2.TTableName(qualifier=self._name(table))
        descriptor = self._guarded_call(self.thrift2, lambda c: c.getTableDescriptor(tname), table)
        encoding = getattr(self.t2.TDataBlockEncoding, COUNT_FAMILY_SPEC.encoding)
        changed = []
        for column in descriptor.columns or []:
            threshold = (column.configuration or {}).get(CHURN_CONFIG_KEY)
            if column.name in churn and (threshold is None or threshold in EARLIER_CHURN_CELLS):
                column.configuration = {**(column.configuration or {}), CHURN_CONFIG_KEY: str(CHURN_CELLS)}
            elif column.name == COUNT_FAMILY and column.dataBlockEncoding != encoding:
                column.dataBlockEncoding = encoding
            else:
                continue
            self.thrift2.call(lambda c, column=column: c.modifyColumnFamily(tname, column))
            changed.append(column.name)
        return changed

    def regions(self, table: str) -> list[Region]:
        """Thrift1 ``getTableRegions``: each region's start and end row and its server."""
        name = self._name(table)
        infos = self._guarded_call(self.thrift1, lambda c: c.client.getTableRegions(name), table)
        if not infos and name not in self.thrift1.call(lambda c: c.tables()):
            raise TableNotFound(table)
        regions = [Region(as_bytes(i.startKey or b""), as_bytes(i.endKey or b""), f"{as_bytes(i.serverName).decode()}:{i.port}")
                   for i in infos]
        return sorted(regions, key=lambda r: r.start)

    def drop_table(self, table: str) -> None:
        name = self._name(table)

        def drop(conn):
            if name not in conn.tables():
                raise TableNotFound(table)
            conn.delete_table(name, disable=True)

        self.thrift1.call(drop)
        self._families.pop(table, None)

    def list_tables(self) -> list[str]:
        names = self.thrift1.call(lambda conn: conn.tables())
        prefix = self.prefix.encode()
        return sorted(n[len(prefix):].decode() for n in names if n.startswith(prefix))

    def families(self, table: str) -> tuple[bytes, ...]:
        """The table's families other than the reserved ones (cached; Thrift1 needs them named)."""
        cached = self._families.get(table)
        if cached is None:
            name = self._name(table)
            descriptors = self._guarded_call(self.thrift1, lambda c: c.client.getColumnDescriptors(name), table)
            names = (as_bytes(k).rstrip(b":") for k in descriptors)
            cached = tuple(sorted(n for n in names if n not in RESERVED_FAMILIES))
            self._families[table] = cached
        return cached

    # -- reads -----------------------------------------------------------------------------
    def _every_family(self, table: str, spec: ReadSpec) -> tuple[bytes, ...]:
        """The table's families when ``spec`` names none (a read of every family must name
        them on the wire), else nothing (no round trip for them)."""
        return () if spec.families or spec.columns else self.families(table)

    def _columns1(self, table: str, spec: ReadSpec, with_guard: bool) -> list[bytes]:
        return thrift1.column_names(spec, self._every_family(table, spec), with_guard)

    def _tget(self, table: str, row: bytes, spec: ReadSpec, with_guard: bool):
        return self.codec.tget(row, spec, self._every_family(table, spec), with_guard)

    def _read(self, table: str, row: bytes, spec: ReadSpec, with_guard: bool) -> Row:
        check_row(row)
        name = self._name(table)
        if thrift1.answers(spec):
            columns = self._columns1(table, spec, with_guard)
            results = self._guarded_call(self.thrift1, lambda c: thrift1.get_row(c.client, name, row, columns, spec), table)
            return thrift1.row_of(row, results[0].columns if results else {}, spec, with_guard)
        tget = self._tget(table, row, spec, with_guard)
        result = self._guarded_call(self.thrift2, lambda c: c.get(name, tget), table)
        return self.codec.row_of(row, result.columnValues, spec)

    def _guarded_call(self, pool: ConnectionPool, fn, table: str, *, idempotent: bool = True):
        """Run a pooled call, turning the servers' "no such table" into TableNotFound."""
        try:
            return pool.call(fn, idempotent=idempotent)
        except StorageError:
            raise
        except Exception as exc:
            # Thrift1 names TableNotFoundException; Thrift2 writes to a missing table fail with
            # a generic "Failed 1 action", so ask whether the table exists before blaming it.
            if names_missing_table(exc) or self._known_missing(table):
                raise TableNotFound(table) from None
            raise StorageError(f"{pool.name}: {describe_error(exc)}") from exc

    def _known_missing(self, table: str) -> bool:
        """Whether the table is known not to exist; False when that cannot be asked (the
        servers failing too, e.g. while HBase is down): the original error then stands."""
        try:
            return table not in self.list_tables()
        except Exception:
            return False

    def read_row(self, table: str, row: bytes, spec: ReadSpec = ReadSpec()) -> Row:
        return self._read(table, row, spec, with_guard=False)

    def _read_guarded(self, table: str, row: bytes, spec: ReadSpec) -> Row:
        if spec.max_ts is not None:
            raise ValueError("row transactions read without an upper time bound (the guard lives at GUARD_TS)")
        return self._read(table, row, spec, with_guard=True)

    def read_rows(self, table: str, rows: Sequence[bytes], spec: ReadSpec = ReadSpec()) -> dict[bytes, Row]:
        rows = list(dict.fromkeys(rows))
        if not rows:
            return {}
        name = self._name(table)
        out = {row: Row(row) for row in rows}
        if thrift1.answers(spec):
            columns = self._columns1(table, spec, with_guard=False)
            results = self._guarded_call(self.thrift1, lambda c: thrift1.get_rows(c.client, name, rows, columns, spec), table)
            for result in results:
                out[result.row] = thrift1.row_of(result.row, result.columns, spec, False)
            return out
        tgets = [self._tget(table, row, spec, False) for row in rows]
        results = self._guarded_call(self.thrift2, lambda c: c.getMultiple(name, tgets), table)
        for result in results:
            if result.row is not None:
                out[result.row] = self.codec.row_of(result.row, result.columnValues, spec)
        return out

    def scan(self, table, start_row=b"", stop_row=None, spec=ReadSpec(), *, limit=None,
             batch_size=256, key_only=False, first_cell_only=False, shard=None) -> Iterator[Row]:
        name = self._name(table)
        # The coprocessor selects the shard's rows (RowShards.java); without it the attribute
        # is ignored and every row comes back, which the contract allows.
        attributes = {SHARD_ATTRIBUTE: check_shard(shard)} if shard is not None else {}
        returned = 0
        cursor = start_row
        # Each page is a fresh, stateless request starting after the last row returned, so a
        # dropped connection or a restarted Thrift server costs one page, never the scan.
        while limit is None or returned < limit:
            page_size = batch_size if limit is None else min(batch_size, limit - returned)
            page = self._scan_page(table, name, cursor, stop_row, spec, page_size,
                                   _scan_filter(key_only, first_cell_only), attributes)
            for row in page:
                if row:
                    yield row
                    returned += 1
                    if limit is not None and returned >= limit:
                        return
            if len(page) < page_size:
                return
            cursor = page[-1].key + b"\x00"

    def _scan_page(self, table, name, start, stop, spec, page_size, filter_string, attributes) -> list[Row]:
        if thrift1.answers(spec):
            columns = self._columns1(table, spec, with_guard=False)
            tscan = thrift1.tscan(start, stop, columns, spec, page_size, filter_string)
            results = self._guarded_call(
                self.thrift1, lambda c: thrift1.scan_page(c.client, name, tscan, page_size, attributes), table)
            return [thrift1.row_of(r.row, r.columns, spec, False) for r in results]
        tscan = self.codec.tscan(start, stop, spec, self._every_family(table, spec), page_size, filter_string,
                                 attributes)
        results = self._guarded_call(
            self.thrift2, lambda c: c.getScannerResults(name, tscan, page_size), table
        )
        return [self.codec.row_of(r.row, r.columnValues, spec) for r in results]

    # -- writes ----------------------------------------------------------------------------
    def mutate_row(self, table: str, row: bytes, mutations: Sequence[Mutation]) -> None:
        name = self._name(table)
        self.codec.row_mutations(row, mutations, b"")  # validate once, before anything is sent
        # Safe to resend: every cell carries an explicit timestamp, so a replay writes the
        # same versions again. The guard token is drawn afresh for every attempt: a resend of
        # an attempt that did apply must not put the row guard back to a token that other
        # clients may have read since (their compare-and-set would then miss the change).
        self._guarded_call(
            self.thrift2, lambda c: c.mutateRow(name, self.codec.row_mutations(row, mutations, os.urandom(16))), table
        )

    def put_rows(self, table: str, rows) -> None:
        if not rows:
            return
        name = self._name(table)
        cells = _checked_batch(rows, Put, "put_rows takes Puts")

        def tputs():
            # Fresh guard tokens on every attempt, as in mutate_row.
            tokens = fresh_tokens(len(cells))
            return [self.codec.guarded_tput(row, puts, token) for (row, puts), token in zip(cells, tokens)]

        # One putMultiple round trip; safe to resend (explicit timestamps: same cells again).
        self._guarded_call(self.thrift2, lambda c: c.putMultiple(name, tputs()), table)

    def put_cells(self, table: str, rows) -> None:
        """Straight from the tuples to the TPuts, no guard cell (``Store.put_cells``)."""
        if not rows:
            return
        name = self._name(table)
        tputs = _cells_tputs(self.codec, rows)
        if tputs:
            # Built once: nothing in them changes between attempts (no guard token).
            self._guarded_call(self.thrift2, lambda c: c.putMultiple(name, tputs), table)

    def delete_rows(self, table: str, rows) -> None:
        if not rows:
            return
        name = self._name(table)
        tdeletes = []
        for row, deletes in _checked_batch(rows, (Delete, DeleteUpTo), "delete_rows takes Delete/DeleteUpTo"):
            tdeletes += self.codec.tdeletes(row, deletes)
        # Idempotent: deleting an exact version again changes nothing. The server returns
        # the deletes it could not apply; any means a retry is needed.
        failed = self._guarded_call(self.thrift2, lambda c: c.deleteMultiple(name, tdeletes), table)
        if failed:
            raise StorageError(f"{len(failed)} of {len(tdeletes)} batched deletes on {table!r} did not apply")

    def _send_checked(self, table, writes, tokens):
        """Every row whose step writes puts only (its deletes, if any, travel in the request's
        attributes and the coprocessor applies them with the puts) goes in one
        ``putMultiple``: not atomic across rows, the coprocessor fails each refused row's
        operations and lets the others apply. A write that still holds delete mutations goes
        as one atomic ``mutateRow``. Each refusal comes back as ``CAFFEINE-STEP row=<hex>
        ANSWER args`` inside the server's error message; rows the message does not name are
        left for the guard read-back to settle."""
        name = self._name(table)
        puts_only = {row: w for row, w in writes.items() if all(isinstance(m, Put) for m in w.mutations)}
        out = {}
        for row, write in writes.items():
            if row not in puts_only:
                out.update(self._send_checked_row(table, name, row, write, tokens[row]))
        if puts_only:
            out.update(self._send_checked_puts(table, name, puts_only, tokens))
        return out

    def _send_checked_row(self, table, name, row, write, token) -> dict:
        """One checked write as an atomic ``mutateRow``: {row: answer}, or {} when unknown."""
        tmutations = self.codec.row_mutations(row, write.mutations, token, write.attributes)
        try:
            self._guarded_call(self.thrift2, lambda c: c.mutateRow(name, tmutations), table, idempotent=False)
        except StorageError as exc:
            answer = step_answers(exc).get(row)
            if answer is not None:
                return {row: answer}
            if not isinstance(exc, OutcomeUnknown):
                raise
            return {}
        return {row: None}

    def _send_checked_puts(self, table, name, writes, tokens) -> dict:
        """Checked writes of puts only, all in one ``putMultiple``: the answers it proves."""
        tputs = []
        for row, write in writes.items():
            check_row(row)
            tputs.append(self.codec.guarded_tput(row, write.mutations, tokens[row], write.attributes))
        try:
            self._guarded_call(self.thrift2, lambda c: c.putMultiple(name, tputs), table, idempotent=False)
        except StorageError as exc:
            answers = step_answers(exc)
            if not answers and not isinstance(exc, OutcomeUnknown):
                raise
            return {row: answer for row, answer in answers.items() if row in writes}
        return {row: None for row in writes}

    def read_rows_guarded(self, table: str, specs) -> dict[bytes, Row]:
        keys = list(specs)
        return dict(zip(keys, self.read_many(table, [(row, specs[row], True) for row in keys])))

    def read_many(self, table: str, requests) -> list[Row]:
        """One Thrift2 ``getMultiple``: each row with its own columns, versions and time range."""
        if not requests:
            return []
        for row, spec, guarded in requests:
            check_row(row)
            if guarded and spec.max_ts is not None:
                raise ValueError("row transactions read without an upper time bound")
        name = self._name(table)
        tgets = [self._tget(table, row, spec, guarded) for row, spec, guarded in requests]
        results = self._guarded_call(self.thrift2, lambda c: c.getMultiple(name, tgets), table)
        return [self.codec.row_of(row, result.columnValues, spec)
                if result is not None and result.row is not None else Row(row)
                for (row, spec, _), result in zip(requests, results)]

    def _compare_and_apply(self, table, row, expected_guard, mutations, new_guard) -> bool:
        name = self._name(table)
        row_mutations = self.codec.row_mutations(row, mutations, new_guard)
        expected = b"" if expected_guard is None else expected_guard
        return bool(self._guarded_call(
            self.thrift2,
            lambda c: c.checkAndMutate(
                name, row, GUARD_FAMILY, GUARD_QUALIFIER, self.t2.TCompareOp.EQUAL, expected, row_mutations
            ),
            table,
            idempotent=False,
        ))

    def close(self) -> None:
        with self._readers_lock:
            if self._readers is not None:
                # Reads still queued would open connections after the pools are closed.
                self._readers.shutdown(wait=True, cancel_futures=True)
                self._readers = None
        self.thrift1.close_all()
        self.thrift2.close_all()
