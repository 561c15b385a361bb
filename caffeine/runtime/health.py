"""Real calls that prove the local HBase answers through each Thrift server, and the oracle.

Layer: runtime. Contract: each probe opens its own short-lived connection, makes one real call
with a bounded socket timeout, closes the connection, and returns ``(ok, detail)`` instead of
raising; ``detail`` is a short human explanation (table count, or the error).

- Thrift1: happybase ``Connection.tables()`` (a master RPC: lists the tables).
- Thrift2: a ``get`` of one row of ``hbase:meta`` through the Thrift2 IDL loaded with
  thriftpy2: it only succeeds once the master has finished initializing and the region server
  serves meta, i.e. when reads and writes of user tables can work.

- Coprocessor: a Thrift2 put carrying ``caffeine.step=probe`` to a harmless row; Caffeine's
  coprocessor refuses every probe with ``PROBE <version>``, so the put applying means it is
  not loaded (``probe_coprocessor``).

- Oracle: ``OracleClient.status()`` (protocol request 0: the oracle's next timestamp, allocating
  nothing). This and the coprocessor probe's refusal parser (``caffeine.storage.model``, pure)
  are the runtime's imports from above it (``caffeine.oracle.client`` itself needs only
  ``caffeine.config`` and the standard library), both done inside the probes.

Both servers speak the buffered transport and binary protocol (``-threadpool``).
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path
from types import ModuleType

# The row read from hbase:meta; any row works, it does not need to exist.
_META_PROBE_ROW = b"caffeine-health-probe"


@functools.lru_cache(maxsize=8)
def load_thrift2(idl_path: str) -> ModuleType:
    """The Thrift2 IDL as a thriftpy2 module (cached per path)."""
    import thriftpy2

    # A module name of its own, so this never collides with the storage layer's copy.
    return thriftpy2.load(idl_path, module_name="caffeine_runtime_hbase2_thrift")


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def probe_thrift1(host: str, port: int, timeout_s: float = 10.0) -> tuple[bool, str]:
    import happybase

    conn = happybase.Connection(host, port, timeout=int(timeout_s * 1000), autoconnect=False)
    try:
        conn.open()
        tables = conn.tables()
        return True, f"tables() answered ({len(tables)} tables)"
    except Exception as exc:  # noqa: BLE001 - any failure means "not healthy", with the reason
        return False, f"tables() failed: {_short(exc)}"
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass


@contextlib.contextmanager
def _thrift2_client(hb: ModuleType, host: str, port: int, timeout_s: float):
    """A Thrift2 client (buffered transport, binary protocol, as the servers speak), closed after."""
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.rpc import make_client
    from thriftpy2.transport import TBufferedTransportFactory

    client = make_client(
        hb.THBaseService, host, port, timeout=int(timeout_s * 1000),
        trans_factory=TBufferedTransportFactory(), proto_factory=TBinaryProtocolFactory(),
    )
    try:
        yield client
    finally:
        try:
            client.close()
        except Exception:  # noqa: BLE001
            pass


def probe_thrift2(host: str, port: int, idl_path: Path, timeout_s: float = 10.0) -> tuple[bool, str]:
    try:
        hb = load_thrift2(str(idl_path))
    except Exception as exc:  # noqa: BLE001
        return False, f"cannot load the Thrift2 IDL {idl_path}: {_short(exc)}"
    try:
        with _thrift2_client(hb, host, port, timeout_s) as client:
            client.get(b"hbase:meta", hb.TGet(row=_META_PROBE_ROW))
        return True, "get(hbase:meta) answered"
    except Exception as exc:  # noqa: BLE001
        return False, f"get(hbase:meta) failed: {_short(exc)}"


# The row a coprocessor probe writes to: with the coprocessor loaded nothing is written (the
# probe is always refused); without it, one cell at a fixed old timestamp (the same each time).
COPROCESSOR_PROBE_ROW = b"caffeine-coprocessor-probe"


def probe_coprocessor(
    host: str, port: int, idl_path: Path, table: str, timeout_s: float = 10.0
) -> tuple[bool | None, str]:
    """Is Caffeine's coprocessor loaded for ``table``? ``(True, detail)`` loaded, ``(False, detail)``
    not loaded, ``(None, detail)`` unknown (no such table, or the call failed).

    Sends a Thrift2 put carrying ``caffeine.step=probe`` to ``COPROCESSOR_PROBE_ROW`` of
    ``table`` (in the table's first family, found through ``getTableDescriptor``, so this
    layer need not know the families of the tables above it). The coprocessor refuses every
    probe with ``PROBE <version>``; if the put applies, no coprocessor looked at it.
    """
    try:
        hb = load_thrift2(str(idl_path))
    except Exception as exc:  # noqa: BLE001
        return None, f"cannot load the Thrift2 IDL {idl_path}: {_short(exc)}"
    try:
        with _thrift2_client(hb, host, port, timeout_s) as client:
            return _probe_coprocessor_with(client, hb, table)
    except Exception as exc:  # noqa: BLE001
        return None, f"probe failed: {_short(exc)}"


def _probe_coprocessor_with(client, hb: ModuleType, table: str) -> tuple[bool | None, str]:
    # The refusal's wire format has one parser, the storage layer's (pure, no I/O).
    from caffeine.storage.model import parse_refusals

    ns, _, qual = table.rpartition(":")
    tname = hb.TTableName(ns=(ns or "default").encode(), qualifier=qual.encode())
    if not client.tableExists(tname):
        return None, f"no table {table} to probe yet"
    families = sorted(c.name for c in (client.getTableDescriptor(tname).columns or []))
    if not families:
        return None, f"table {table} has no column family"
    put = hb.TPut(
        row=COPROCESSOR_PROBE_ROW,
        columnValues=[hb.TColumnValue(family=families[0], qualifier=b"caffeine-probe", value=b"", timestamp=1)],
        attributes={b"caffeine.step": b"probe"},
    )
    try:
        client.put(table.encode(), put)
    except hb.TIOError as exc:
        message = exc.message.decode("utf-8", "replace") if isinstance(exc.message, bytes) else str(exc.message)
        found = parse_refusals(message).get(COPROCESSOR_PROBE_ROW)
        if found is not None and found.answer == "PROBE":
            version = found.args[0] if found.args else "?"
            return True, f"a probe put to {table} was refused with PROBE {version} (wire protocol {version})"
        return None, f"the probe put to {table} failed: {message.splitlines()[0][:200] if message else '?'}"
    return False, f"a probe put to {table} applied (nothing refused it)"


def probe_oracle(host: str, port: int, settings, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Ask the timestamp oracle at ``host:port`` for its status (allocates nothing)."""
    from caffeine.oracle.client import OracleClient
    from caffeine.oracle.timestamps import describe

    client = OracleClient(settings, host=host, port=port, deadline_s=timeout_s, io_timeout_s=timeout_s)
    try:
        next_ts = client.status()
        return True, f"status() answered: next timestamp {describe(next_ts)}"
    except Exception as exc:  # noqa: BLE001
        return False, f"status() failed: {_short(exc)}"
    finally:
        client.close()
