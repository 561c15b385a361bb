"""What a Thrift server's answers during an HBase outage must not do to the store's clients.

Layer: storage, against a fake Thrift1 server (no HBase needed). Both found by
tests/faults/test_hbase_kill.py, which keeps HBase dead for longer than a call's socket timeout:

- A pooled connection never answers a call with the reply of an earlier call. While HBase is
  dead, a Thrift1 server answers a scanner call only after the client's socket timeout, with
  an IOError. ``HBaseStore._scan_page`` closes its scanner in ``finally``, on the same
  connection: that call reads the late reply as its own and raises the IOError, a server-side
  error, so the pool keeps the connection, which now lags one reply behind for good. Every
  later call on it returns the previous call's answer (thriftpy2 checks neither the method
  name nor the sequence id of a reply): a read of row B returns row A, and a transaction
  commits what it computed from it (in the HBase-kill test, an observer copied other
  transfers' markers into the rows it was notified for).
- A failed call raises a ``CaffeineError``. When a server answers with an error,
  ``HBaseStore._guarded_call`` asks ``list_tables()`` whether the table exists; while HBase is
  dead that call fails too, and its raw ``Hbase_thrift.IOError`` escapes (the HBase-kill
  test's transfer processes, which survive any ``CaffeineError``, died of it).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from caffeine.config import load_settings
from caffeine.errors import CaffeineError
from caffeine.runtime.home import Layout
from caffeine.storage import ReadSpec

SOCKET_TIMEOUT_MS = 1000
LATE_S = 1.5  # the late scanner reply: after the client's socket timeout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def fake_thrift1():
    """A Thrift1 server whose scanner reads answer late with an IOError; its port."""
    import happybase  # noqa: F401 (registers the Hbase_thrift module)
    import Hbase_thrift
    from thriftpy2.rpc import make_server

    class Handler:
        hbase_down = False  # reads and table listings then fail as when HBase is dead

        def getTableNames(self):
            if self.hbase_down:
                raise Hbase_thrift.IOError(message=b"Zookeeper LIST could not be completed in 10000 ms")
            return [b"sync_t"]

        def scannerOpenWithScan(self, table, scan, attributes):
            return 1

        def scannerGetList(self, scanner, n):
            time.sleep(LATE_S)
            raise Hbase_thrift.IOError(message=b"Zookeeper GET could not be completed in 10000 ms")

        def scannerClose(self, scanner):
            return None

        def getRowWithColumns(self, table, row, columns, attributes):
            if self.hbase_down:
                raise Hbase_thrift.IOError(message=b"Zookeeper GET could not be completed in 10000 ms")
            return [Hbase_thrift.TRowResult(row=row, columns={b"f:q": Hbase_thrift.TCell(value=row, timestamp=1)})]

    port = free_port()
    server = make_server(Hbase_thrift.Hbase, Handler(), "127.0.0.1", port)
    threading.Thread(target=server.serve, name="fake-thrift1", daemon=True).start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    yield port, Handler
    server.close()


def store_on(port: int):
    """An HBaseStore whose Thrift1 server is the fake one (one pooled connection)."""
    from caffeine.storage.hbase import HBaseStore

    base = load_settings(table_prefix="sync_")
    idl = Layout.from_settings(base).thrift2_idl
    if not idl.is_file():
        pytest.skip(f"the Thrift2 IDL is not extracted yet ({idl}); `caffeine up` does it")
    settings = base.model_copy(update={"thrift1_port": port, "thrift_timeout_ms": SOCKET_TIMEOUT_MS,
                                       "pool_size": 1})
    store = HBaseStore(settings, thrift2_idl=str(idl))
    store.thrift1.retry_deadline_s = 0.5
    return store


def test_a_late_scanner_reply_never_answers_a_later_read(fake_thrift1):
    port, _ = fake_thrift1
    store = store_on(port)
    try:
        try:
            list(store.scan("t", spec=ReadSpec(families=(b"f",))))
        except Exception:  # what it raises is the other test's concern; what it leaves behind is ours
            pass
        time.sleep(LATE_S)  # every late reply has arrived
        answers = {}
        for key in (b"row-A", b"row-B", b"row-C"):
            try:
                row = store.read_row("t", key, ReadSpec(families=(b"f",)))
                answers[key] = row.key, [c.value for c in row.versions(b"f", b"q")]
            except Exception as exc:
                answers[key] = type(exc).__name__
        wrong = {key: got for key, got in answers.items() if not (isinstance(got, str) or got == (key, [key]))}
        assert not wrong, f"reads answered with other calls' replies: {wrong}"
    finally:
        store.close()


def test_a_read_while_hbase_is_down_fails_with_a_caffeine_error(fake_thrift1):
    port, handler = fake_thrift1
    handler.hbase_down = True
    store = store_on(port)
    try:
        with pytest.raises(CaffeineError):
            store.read_row("t", b"row-A", ReadSpec(families=(b"f",)))
    finally:
        store.close()
