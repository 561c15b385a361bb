"""Real calls that prove the local HBase answers through each Thrift server, and the oracle.

Layer: runtime. Contract: each probe opens its own short-lived connection, makes one real call
with a bounded socket timeout, closes the connection, and returns ``(ok, detail)`` instead of
raising; ``detail`` is a short human explanation (table count, or the error).

- Thrift1: happybase ``Connection.tables()`` (a master RPC: lists the tables).
- Thrift2: a ``get`` of one row of ``hbase:meta`` through the Thrift2 IDL loaded with
  thriftpy2: it only succeeds once the master has finished initializing and the region server
  serves meta, i.e. when reads and writes of user tables can work.

- Coprocessor: the storage layer's row-step probe (``caffeine.storage.probe``, the one the
  commit backends use) sent as one Thrift2 put; Caffeine's coprocessor refuses every probe
  with ``PROBE <version>``, so the put applying means it is not loaded (``coprocessor_loaded``).

- Oracle: ``OracleClient.status()`` (protocol request 0: the oracle's next timestamp, allocating
  nothing). ``oracle_role`` tells an active oracle from a standby (which answers with its
  refusal, ``OracleNotActive``); ``probe_oracle`` counts both as answering (the process is
  alive and speaks the protocol), ``probe_oracles`` only an active one among several
  addresses (what a client needs).

- The cluster mode's servers: ZooKeeper answers its ``srvr`` command (the one four-letter
  word ZooKeeper allows by default); a region server's info server answers ``/jmx`` with its
  ``RegionServer,sub=Server`` metrics, which exist only once it has reported for duty to the
  master (``probe_regionserver``: its region count and request counts come with it).

Thrift2 goes through the storage layer's ``caffeine.storage.thrift2`` (the one IDL loader, the
client, the codec): with ``caffeine.oracle.client`` (itself only ``caffeine.config`` and the
standard library), the runtime's imports from below it, all done inside the probes.

Both servers speak the buffered transport and binary protocol (``-threadpool``).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from types import ModuleType

# The row read from hbase:meta; any row works, it does not need to exist.
_META_PROBE_ROW = b"caffeine-health-probe"


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


def _load_thrift2(idl_path: Path) -> ModuleType:
    from caffeine.storage.thrift2 import load_thrift2

    return load_thrift2(str(idl_path))


@contextlib.contextmanager
def _thrift2_client(hb: ModuleType, host: str, port: int, timeout_s: float):
    """A Thrift2 client of ``host:port``, closed after."""
    from caffeine.storage.thrift2 import connect

    client = connect(hb, host, port, int(timeout_s * 1000))
    try:
        yield client
    finally:
        try:
            client.close()
        except Exception:  # noqa: BLE001
            pass


def probe_thrift2(host: str, port: int, idl_path: Path, timeout_s: float = 10.0) -> tuple[bool, str]:
    try:
        hb = _load_thrift2(idl_path)
    except Exception as exc:  # noqa: BLE001
        return False, f"cannot load the Thrift2 IDL {idl_path}: {_short(exc)}"
    try:
        with _thrift2_client(hb, host, port, timeout_s) as client:
            client.get(b"hbase:meta", hb.TGet(row=_META_PROBE_ROW))
        return True, "get(hbase:meta) answered"
    except Exception as exc:  # noqa: BLE001
        return False, f"get(hbase:meta) failed: {_short(exc)}"


def coprocessor_loaded(
    host: str, port: int, idl_path: Path, table: str, timeout_s: float = 10.0
) -> tuple[bool | None, str]:
    """Is Caffeine's coprocessor loaded for ``table`` (its HBase name)? ``(True, detail)``
    loaded, ``(False, detail)`` not loaded, ``(None, detail)`` unknown (no such table, or the
    call failed).

    Sends the row-step probe (``caffeine.storage.probe``) as one Thrift2 put to ``table``, a
    table created through a ``Store`` (the probe writes only the row guard, whose family such
    a table has). The coprocessor refuses every probe with ``PROBE <version>``; if the put
    applies, no coprocessor looked at it.
    """
    try:
        hb = _load_thrift2(idl_path)
    except Exception as exc:  # noqa: BLE001
        return None, f"cannot load the Thrift2 IDL {idl_path}: {_short(exc)}"
    from caffeine.storage.probe import probe_row_steps

    try:
        with _thrift2_client(hb, host, port, timeout_s) as client:
            ns, _, qual = table.rpartition(":")
            if not client.tableExists(hb.TTableName(ns=(ns or "default").encode(), qualifier=qual.encode())):
                return None, f"no table {table} to probe yet"
            version = probe_row_steps(_OnePut(client, hb), table)
    except _PutFailed as exc:
        return None, f"the probe put to {table} failed: {exc}"
    except Exception as exc:  # noqa: BLE001
        return None, f"probe failed: {_short(exc)}"
    if version is None:
        return False, f"a probe put to {table} applied (nothing refused it)"
    return True, f"a probe put to {table} was refused with PROBE {version} (wire protocol {version})"


class _PutFailed(Exception):
    """The server answered a probe put with an error that is no row step's refusal."""


class _OnePut:
    """``Store.apply_checked`` as the probe uses it, on one client: each row's checked write
    as one Thrift2 put, sent once (no retries, no read-back: a probe answers within its
    timeout, or not at all). ``table`` is the HBase name."""

    def __init__(self, client, hb: ModuleType) -> None:
        self.client, self.hb = client, hb

    def apply_checked(self, table, writes):
        from caffeine.storage.thrift2 import Thrift2Codec
        from caffeine.storage.thrift_errors import describe_error, step_answers

        codec, out = Thrift2Codec(self.hb), {}
        for row, write in writes.items():
            try:
                self.client.put(table.encode(), codec.guarded_tput(row, write.mutations, os.urandom(16), write.attributes))
            except self.hb.TIOError as exc:
                answer = step_answers(exc).get(row)
                if answer is None:
                    message = describe_error(exc).partition(": ")[2]
                    raise _PutFailed(message.splitlines()[0][:200] if message else "?") from exc
                out[row] = answer
            else:
                out[row] = None
        return out


def probe_zookeeper(host: str, port: int, timeout_s: float = 3.0) -> tuple[bool, str]:
    """ZooKeeper's ``srvr`` answer: its mode and connection count."""
    import socket

    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(b"srvr")
            chunks = []
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError as exc:
        return False, f"srvr failed: {_short(exc)}"
    fields = dict(line.split(": ", 1) for line in b"".join(chunks).decode("utf-8", "replace").splitlines() if ": " in line)
    if "Mode" not in fields:
        return False, "srvr got no answer (not serving yet)"
    return True, f"srvr answered: mode {fields['Mode']}, {fields.get('Connections', '?')} connections"


# The region server's own metrics bean; HBase registers it when the server has reported for
# duty to the master (HRegionServer.handleReportForDutyResponse).
REGIONSERVER_BEAN = "Hadoop:service=HBase,name=RegionServer,sub=Server"
# What ``probe_regionserver`` returns from that bean, under our names.
REGIONSERVER_METRICS = {
    "regions": "regionCount",
    "requests": "totalRequestCount",
    "read_requests": "readRequestCount",
    "write_requests": "writeRequestCount",
}


JMX_ATTEMPTS = 5
JMX_PAUSE_S = 0.3


def probe_regionserver(host: str, info_port: int, timeout_s: float = 3.0,
                       attempts: int = JMX_ATTEMPTS) -> tuple[bool, str, dict[str, int]]:
    """A region server's ``/jmx``: healthy once it has reported for duty; its region and
    request counts (``REGIONSERVER_METRICS``) as the third value. An answer with no beans is
    asked again, up to ``attempts`` requests in all (1 from a caller that polls anyway)."""
    import json
    import urllib.parse
    import urllib.request

    url = f"http://{host}:{info_port}/jmx?qry=" + urllib.parse.quote(REGIONSERVER_BEAN, safe="=:,")
    # No proxy, whatever the environment says: this is a loopback address.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout_s
    for attempt in range(1, attempts + 1):
        try:
            with opener.open(url, timeout=max(0.5, deadline - time.monotonic())) as answer:
                beans = json.loads(answer.read()).get("beans", [])
        except Exception as exc:  # noqa: BLE001 - any failure means "not healthy", with the reason
            return False, f"/jmx failed: {_short(exc)}", {}
        if beans or attempt >= attempts or time.monotonic() + JMX_PAUSE_S >= deadline:
            break
        # Every bean is gone for a moment while HBase restarts its metrics system, which it
        # does a few seconds after regions open or close (JmxCacheBuster): ask again.
        time.sleep(JMX_PAUSE_S)
    if not beans:
        return False, "not yet reported for duty to the master", {}
    metrics = {ours: int(beans[0].get(theirs, 0)) for ours, theirs in REGIONSERVER_METRICS.items()}
    # HBase counts requests per call (a multi-row call is one) but reads and writes per row.
    return True, (f"online: {metrics['regions']} regions, {metrics['requests']} requests; "
                  f"{metrics['read_requests']} row reads, {metrics['write_requests']} row writes"), metrics


def oracle_role(host: str, port: int, settings, timeout_s: float = 3.0) -> tuple[str | None, str]:
    """Ask the timestamp oracle at ``host:port`` for its status (allocates nothing):
    ``("active", detail)``, ``("standby", detail)``, or ``(None, why not)``."""
    from caffeine.oracle.client import OracleClient
    from caffeine.oracle.errors import OracleNotActive
    from caffeine.oracle.timestamps import describe

    client = OracleClient(settings, host=host, port=port, deadline_s=timeout_s, io_timeout_s=timeout_s)
    try:
        next_ts = client.status()
        return "active", f"active: status() answered: next timestamp {describe(next_ts)}"
    except OracleNotActive:
        return "standby", "standby: refuses requests until it takes over the lease"
    except Exception as exc:  # noqa: BLE001
        return None, f"status() failed: {_short(exc)}"
    finally:
        client.close()


def probe_oracle(host: str, port: int, settings, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Does a timestamp oracle answer at ``host:port``, as the active one or as a standby?"""
    role, detail = oracle_role(host, port, settings, timeout_s)
    return role is not None, detail


def probe_oracles(addresses, settings, timeout_s: float = 3.0) -> tuple[bool, str]:
    """Does one of ``addresses`` answer as the active oracle (what a client needs)?"""
    from caffeine.oracle.client import OracleClient
    from caffeine.oracle.timestamps import describe

    client = OracleClient(settings, addresses=list(addresses), deadline_s=timeout_s, io_timeout_s=timeout_s)
    try:
        next_ts, (host, port) = client.status_at()
        return True, f"status() answered at {host}:{port}: next timestamp {describe(next_ts)}"
    except Exception as exc:  # noqa: BLE001
        return False, f"status() failed: {_short(exc)}"
    finally:
        client.close()
