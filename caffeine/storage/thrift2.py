"""HBase's Thrift2 interface: the IDL, connections, and its requests and answers.

Layer: storage. Used by ``hbase.py``, and by ``caffeine.runtime.health``, whose probes make
one call each with the same IDL loader, client and codec; nothing else touches Thrift2.
``load_thrift2`` is the one loader of the IDL in this code base. ``Thrift2Codec`` builds
Thrift2's structs from the storage model (``TGet``, ``TScan``, the guarded ``TPut``,
``TRowMutations``, ``TDelete``) and turns its ``TColumnValue`` lists back into ``Row``s. It
sends nothing: ``HBaseStore`` makes the calls.

- Time ranges are half-open on the wire, inclusive in ``ReadSpec`` (see ``ttimerange``).
- Every write carries the row guard's new token (``guarded_tput``): compare-and-set and the
  read-back after an unknown outcome rely on each write replacing it.
"""

from __future__ import annotations

import threading
from typing import Sequence

import thriftpy2
from thriftpy2.protocol import TBinaryProtocolFactory
from thriftpy2.rpc import make_client
from thriftpy2.transport import TBufferedTransportFactory

from caffeine.storage.model import (
    GUARD_FAMILY,
    GUARD_QUALIFIER,
    GUARD_TS,
    Cell,
    Delete,
    DeleteUpTo,
    FamilySpec,
    Mutation,
    Put,
    PutFields,
    ReadSpec,
    Row,
    check_row,
    reject_reserved,
)

_lock = threading.Lock()
_modules: dict[str, object] = {}


def load_thrift2(idl_path: str):
    """The Thrift2 IDL at ``idl_path`` as a Python module, parsed once per process and path.
    Each path gets a module name of its own: thriftpy2 caches a parse by module name, so a
    second path under the first one's name would get the first path's module."""
    with _lock:
        module = _modules.get(idl_path)
        if module is None:
            name = f"caffeine_hbase2_{len(_modules)}_thrift" if _modules else "caffeine_hbase2_thrift"
            module = thriftpy2.load(idl_path, module_name=name)
            _modules[idl_path] = module
        return module


def connect(t2, host: str, port: int, timeout_ms: int):
    """A client of the Thrift2 server at ``host:port`` (``t2``: the loaded IDL), in the
    buffered transport and binary protocol the servers speak."""
    return make_client(
        t2.THBaseService, host, port,
        trans_factory=TBufferedTransportFactory(), proto_factory=TBinaryProtocolFactory(), timeout=timeout_ms,
    )


class Thrift2Codec:
    """Thrift2 requests from the storage model, and rows from its answers (``t2``: the IDL)."""

    def __init__(self, t2) -> None:
        self.t2 = t2
        # thriftpy2's generated constructors take keywords at about twice the cost of
        # positions, and a page's export builds a TColumnValue per index cell: the hot
        # constructors below take positions, checked once here against the IDL's field order.
        for struct, fields in ((t2.TColumnValue, ("family", "qualifier", "value", "timestamp")),
                               (t2.TPut, ("row", "columnValues")), (t2.TColumn, ("family", "qualifier"))):
            order = tuple(name for name, _ in struct.default_spec)[:len(fields)]
            if order != fields:
                raise RuntimeError(f"the Thrift2 IDL's {struct.__name__} fields are {order}, not {fields}")

    # -- reads -----------------------------------------------------------------------------
    def tcolumns(self, spec: ReadSpec, every_family: tuple[bytes, ...], with_guard: bool) -> list:
        """The columns a read of ``spec`` asks for; ``every_family`` (the table's) when the
        spec names none."""
        t2 = self.t2
        column = t2.TColumn  # (family, qualifier): positions, see __init__
        cols = [column(f) for f in (spec.families or ())]
        cols += [column(f, q) for f, q in spec.columns]
        if not cols:
            cols = [t2.TColumn(family=f) for f in every_family]
        if with_guard:
            cols.append(t2.TColumn(family=GUARD_FAMILY, qualifier=GUARD_QUALIFIER))
        return cols

    def ttimerange(self, spec: ReadSpec):
        if spec.min_ts == 0 and spec.max_ts is None:
            return None
        upper = (1 << 63) - 1 if spec.max_ts is None else spec.max_ts + 1  # half-open on the wire
        return self.t2.TTimeRange(minStamp=spec.min_ts, maxStamp=upper)

    def tget(self, row: bytes, spec: ReadSpec, every_family: tuple[bytes, ...], with_guard: bool):
        return self.t2.TGet(
            row=row,
            columns=self.tcolumns(spec, every_family, with_guard),
            timeRange=self.ttimerange(spec),
            maxVersions=spec.versions,
        )

    def tscan(self, start: bytes, stop: bytes | None, spec: ReadSpec, every_family: tuple[bytes, ...],
              page_size: int, filter_string: bytes | None, attributes: dict | None = None):
        """One scan page's request (``attributes`` go on the server's Scan)."""
        return self.t2.TScan(
            startRow=start,
            stopRow=stop,
            columns=self.tcolumns(spec, every_family, False),
            caching=page_size,
            maxVersions=spec.versions,
            timeRange=self.ttimerange(spec),
            filterString=filter_string,
            attributes=attributes or None,
        )

    @staticmethod
    def row_of(key: bytes, column_values, spec: ReadSpec) -> Row:
        """A Row from Thrift2's ``TColumnValue`` list (the guard's value as the row's guard)."""
        cells = []
        guard = None
        for cv in column_values or ():
            if cv.family == GUARD_FAMILY:
                guard = cv.value
            elif spec.selects(cv.family, cv.qualifier) and spec.covers(cv.timestamp):
                cells.append(Cell(cv.family, cv.qualifier, cv.timestamp, cv.value or b""))
        return Row(key, cells, guard)

    # -- admin -----------------------------------------------------------------------------
    def ttable_descriptor(self, name: bytes, families: dict[bytes, FamilySpec],
                          configuration: dict[bytes, dict[str, str]]):
        """A TTableDescriptor of table ``name`` with ``families`` (every one, the reserved ones
        included) and each family's ``configuration`` (what Thrift1's descriptors cannot
        carry), cached in the block cache as Thrift1's are."""
        t2 = self.t2
        columns = [
            t2.TColumnFamilyDescriptor(
                name=family,
                maxVersions=spec.max_versions,
                inMemory=spec.in_memory,
                bloomnFilterType=getattr(t2.TBloomFilterType, spec.bloom),
                blockSize=spec.block_size,
                dataBlockEncoding=getattr(t2.TDataBlockEncoding, spec.encoding) if spec.encoding else None,
                blockCacheEnabled=True,
                configuration=configuration.get(family) or None,
            )
            for family, spec in families.items()
        ]
        namespace, _, qualifier = name.rpartition(b":")
        return t2.TTableDescriptor(tableName=t2.TTableName(ns=namespace or None, qualifier=qualifier),
                                   columns=columns)

    # -- writes ----------------------------------------------------------------------------
    def guarded_tput(self, row: bytes, puts: Sequence[Put], new_guard: bytes, attributes=None):
        """One TPut of ``puts`` plus the row guard's new token (carrying ``attributes``, for a
        row step). Every write replaces the guard: that is what compare-and-set and the
        read-back after an unknown outcome rely on."""
        guard = self.t2.TColumnValue(GUARD_FAMILY, GUARD_QUALIFIER, new_guard, GUARD_TS)
        return self.t2.TPut(row, [guard, *self._column_values(puts)],
                            attributes=dict(attributes) if attributes else None)

    def cells_tput(self, row: bytes, cells: Sequence[PutFields], checked_families: set[bytes]):
        """One TPut of ``(family, qualifier, ts, value)`` cells that leaves the row guard as it
        is (``Store.put_cells``). A family is checked (ValueError if reserved) once, then
        added to ``checked_families``, which the caller keeps over a call's rows."""
        value = self.t2.TColumnValue  # (family, qualifier, value, timestamp): positions, see __init__
        values = []
        for family, qualifier, ts, data in cells:
            if family not in checked_families:
                reject_reserved(family)
                checked_families.add(family)
            values.append(value(family, qualifier, data, ts))
        return self.t2.TPut(row, values)

    def _column_values(self, puts: Sequence[Put]) -> list:
        """A TColumnValue per put (ValueError for a reserved family)."""
        value = self.t2.TColumnValue  # (family, qualifier, value, timestamp): positions, see __init__
        values = []
        for p in puts:
            reject_reserved(p.family)
            values.append(value(p.family, p.qualifier, p.value, p.ts))
        return values

    def row_mutations(self, row: bytes, mutations: Sequence[Mutation], new_guard: bytes, attributes=None):
        """One TRowMutations: a single TPut (guard included, carrying ``attributes`` for a row
        step) and one TDelete per delete type."""
        check_row(row)
        t2 = self.t2
        puts, deletes = [], []
        for m in mutations:
            reject_reserved(m.family)
            if isinstance(m, Put):
                puts.append(m)
            elif isinstance(m, (Delete, DeleteUpTo)):
                deletes.append(m)
            else:
                raise TypeError(f"not a mutation: {m!r}")
        ops = [t2.TMutation(put=self.guarded_tput(row, puts, new_guard, attributes))]
        ops += [t2.TMutation(deleteSingle=d) for d in self.tdeletes(row, deletes)]
        return t2.TRowMutations(row=row, mutations=ops)

    def tdeletes(self, row: bytes, deletes: Sequence[Delete | DeleteUpTo]) -> list:
        """One TDelete per delete type in ``deletes`` (the type is per TDelete). deleteType
        is set explicitly every time: the IDL's default is DELETE_COLUMNS (all versions up
        to the timestamp), which would silently widen a single-version delete."""
        t2 = self.t2
        by_type = {t2.TDeleteType.DELETE_COLUMN: [], t2.TDeleteType.DELETE_COLUMNS: []}
        for d in deletes:
            kind = t2.TDeleteType.DELETE_COLUMN if isinstance(d, Delete) else t2.TDeleteType.DELETE_COLUMNS
            by_type[kind].append(t2.TColumn(family=d.family, qualifier=d.qualifier, timestamp=d.ts))
        return [t2.TDelete(row=row, columns=columns, deleteType=kind) for kind, columns in by_type.items() if columns]
