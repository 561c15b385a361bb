"""Real calls that prove the local HBase answers through each Thrift server, and the oracle.

Layer: runtime. Contract: each probe opens its own short-lived connection, makes one real call
with a bounded socket timeout, closes the connection, and returns ``(ok, detail)`` instead of
raising; ``detail`` is a short human explanation (table count, or the error).

- Thrift1: happybase ``Connection.tables()`` (a master RPC: lists the tables).
- Thrift2: a ``get`` of one row of ``hbase:meta`` through the Thrift2 IDL loaded with
  thriftpy2: it only succeeds once the master has finished initializing and the region server
  serves meta, i.e. when reads and writes of user tables can work.

- Oracle: ``OracleClient.status()`` (protocol request 0: the oracle's next timestamp, allocating
  nothing). This is the runtime's one import from above it (``caffeine.oracle.client``, which
  itself needs only ``caffeine.config`` and the standard library), done inside the probe.

Both servers speak the buffered transport and binary protocol (``-threadpool``).
"""

from __future__ import annotations

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


def probe_thrift2(host: str, port: int, idl_path: Path, timeout_s: float = 10.0) -> tuple[bool, str]:
    from thriftpy2.protocol import TBinaryProtocolFactory
    from thriftpy2.rpc import make_client
    from thriftpy2.transport import TBufferedTransportFactory

    try:
        hb = load_thrift2(str(idl_path))
    except Exception as exc:  # noqa: BLE001
        return False, f"cannot load the Thrift2 IDL {idl_path}: {_short(exc)}"
    client = None
    try:
        client = make_client(
            hb.THBaseService,
            host,
            port,
            timeout=int(timeout_s * 1000),
            trans_factory=TBufferedTransportFactory(),
            proto_factory=TBinaryProtocolFactory(),
        )
        client.get(b"hbase:meta", hb.TGet(row=_META_PROBE_ROW))
        return True, "get(hbase:meta) answered"
    except Exception as exc:  # noqa: BLE001
        return False, f"get(hbase:meta) failed: {_short(exc)}"
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass


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
