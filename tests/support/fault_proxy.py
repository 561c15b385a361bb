"""A TCP proxy that injects network and server faults between a client and a Thrift server.

Layer: test support. Sits in front of one HBase Thrift server (Thrift1 or Thrift2; buffered
transport, binary protocol, not framed) on 127.0.0.1 at an ephemeral port::

    with FaultProxy("127.0.0.1", 9091, service=t2.THBaseService, write_methods=THRIFT2_WRITES,
                    seed=1, rates={"drop_reply": 0.05}) as proxy:
        ...point clients at 127.0.0.1:proxy.port...
        proxy.set_rates()            # faults off (or on again with other rates), at run time
    proxy.counts                     # what it did

Contract:

- Each accepted connection gets its own connection to the target. Requests and replies are
  parsed as whole Thrift binary-protocol messages (strict or old-style header, then the
  struct, skipped field by field), so every fault lands on a message boundary and names a
  method. A connection carries one call at a time (synchronous Thrift): request, then reply.
- Per request, at most one of these faults is drawn (seeded ``random.Random``):

  ``reset``              the request is NOT forwarded whole: a strict prefix of it (possibly
                         empty) reaches the server, then both connections are closed, the
                         client's with an RST. Nothing is applied.
  ``drop_reply``         the request is forwarded and the server answers (so a write is
                         applied); the reply is discarded and the client connection closed.
  ``error_after_apply``  (write methods only) the request is forwarded, the server's real reply
                         read and discarded, and a REPLY message for the same method name and
                         seqid sent instead, its result struct carrying the IDL's exception
                         (``TIOError``/``IOError``, field ``io``). This is what a Thrift server
                         answers when its own HBase client gave up after the region server
                         applied the write: the client is told "error" for an applied write.

  Independently, ``delay`` holds the request, and again the reply, for up to
  ``max_delay_s`` with that probability each.
- ``counts`` (a dict, read it any time): ``forwarded`` (requests sent whole to the server),
  ``dropped_replies``, ``errors_after_apply``, ``delays``, ``resets``; ``faults_by_method``
  counts (kind, method) pairs.
- ``close()`` (or leaving the ``with``) stops accepting, closes every socket and joins every
  thread it started; nothing is left behind.

Thrift1 scanners are server-side state keyed by id: a connection dropped mid-scan leaves the
scanner to the server's lease, and the client's retry opens a new one.
"""

from __future__ import annotations

import random
import select
import socket
import struct
import threading
from collections import Counter

from thriftpy2.protocol import TBinaryProtocol
from thriftpy2.thrift import TMessageType
from thriftpy2.transport import TMemoryBuffer

KINDS = ("drop_reply", "error_after_apply", "delay", "reset")

# Write methods of HBase's Thrift2 service (hbase.thrift) and of its Thrift1 service (Hbase.thrift).
THRIFT2_WRITES = frozenset({
    "checkAndMutate", "mutateRow", "put", "putMultiple", "deleteSingle", "deleteMultiple",
    "checkAndPut", "checkAndDelete", "increment", "append",
})
THRIFT1_WRITES = frozenset({
    "mutateRow", "mutateRowTs", "mutateRows", "mutateRowsTs", "atomicIncrement", "deleteAll",
    "deleteAllTs", "deleteAllRow", "deleteAllRowTs", "increment", "incrementRows", "append",
    "checkAndPut",
})

INJECTED_MESSAGE = "injected: server-side error after apply"

# Thrift binary protocol type ids.
_STOP, _BOOL, _BYTE, _DOUBLE, _I16, _I32, _I64, _STRING, _STRUCT, _MAP, _SET, _LIST = (
    0, 2, 3, 4, 6, 8, 10, 11, 12, 13, 14, 15)
_FIXED = {_BOOL: 1, _BYTE: 1, _DOUBLE: 8, _I16: 2, _I32: 4, _I64: 8}
_VERSION_1 = 0x80010000
_MAX_LENGTH = 256 << 20  # a length beyond this means the stream is not what we think it is


class ProtocolError(Exception):
    """The byte stream is not a Thrift binary-protocol message."""


class _Reader:
    """Whole messages from a socket: bytes are kept until the message they belong to ends."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        while len(self.buf) < end:
            chunk = self.sock.recv(max(65536, end - len(self.buf)))
            if not chunk:
                raise EOFError("peer closed the connection")
            self.buf += chunk
        out = bytes(self.buf[self.pos:end])
        self.pos = end
        return out

    def i32(self) -> int:
        return struct.unpack("!i", self.take(4))[0]

    def length(self) -> int:
        n = self.i32()
        if n < 0 or n > _MAX_LENGTH:
            raise ProtocolError(f"implausible length {n}")
        return n

    def skip(self, ttype: int, depth: int = 0) -> None:
        if depth > 64:
            raise ProtocolError("nesting too deep")
        if ttype in _FIXED:
            self.take(_FIXED[ttype])
        elif ttype == _STRING:
            self.take(self.length())
        elif ttype == _STRUCT:
            while True:
                ftype = self.take(1)[0]
                if ftype == _STOP:
                    return
                self.take(2)  # field id
                self.skip(ftype, depth + 1)
        elif ttype == _MAP:
            ktype, vtype = self.take(2)
            for _ in range(self.length()):
                self.skip(ktype, depth + 1)
                self.skip(vtype, depth + 1)
        elif ttype in (_SET, _LIST):
            etype = self.take(1)[0]
            for _ in range(self.length()):
                self.skip(etype, depth + 1)
        else:
            raise ProtocolError(f"unknown type id {ttype}")

    def message(self) -> tuple[str, int, int, bytes]:
        """The next whole message: (method name, message type, seqid, its bytes)."""
        head = self.i32()
        if head < 0:
            if head & 0xFFFF0000 != _VERSION_1:
                raise ProtocolError(f"bad version word {head & 0xFFFFFFFF:#x}")
            mtype = head & 0xFF
            name = self.take(self.length())
        else:  # old-style header: name length first
            if head > _MAX_LENGTH:
                raise ProtocolError(f"implausible name length {head}")
            name = self.take(head)
            mtype = self.take(1)[0]
        seqid = self.i32()
        self.skip(_STRUCT)
        raw = bytes(self.buf[:self.pos])
        del self.buf[:self.pos]
        self.pos = 0
        return name.decode("utf-8", "replace"), mtype, seqid, raw


class FaultProxy:
    """See the module docstring."""

    def __init__(self, target_host: str, target_port: int, *, service, write_methods=frozenset(),
                 seed: int = 0, rates: dict[str, float] | None = None, max_delay_s: float = 0.2,
                 name: str = "proxy") -> None:
        self.target = (target_host, target_port)
        self.service = service
        # Only methods of this service can be answered with an error; each must declare one.
        self.write_methods = frozenset(m for m in write_methods if hasattr(service, f"{m}_result"))
        for method in self.write_methods:
            self._exception_field(method)
        self.max_delay_s = max_delay_s
        self.name = name
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._rates = self._checked(rates or {})
        self.counts = {"forwarded": 0, "dropped_replies": 0, "errors_after_apply": 0, "delays": 0, "resets": 0}
        self.faults_by_method: Counter = Counter()
        self._closing = threading.Event()
        self._conns: dict[threading.Thread, tuple[socket.socket, ...]] = {}
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name=f"{name}-accept", daemon=True)
        self._acceptor.start()

    # -- control ---------------------------------------------------------------------------
    @staticmethod
    def _checked(rates: dict[str, float]) -> dict[str, float]:
        unknown = set(rates) - set(KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {KINDS}")
        rates = {k: float(rates.get(k, 0.0)) for k in KINDS}
        if any(not 0.0 <= r <= 1.0 for r in rates.values()):
            raise ValueError(f"rates must lie in [0, 1]: {rates}")
        return rates

    def set_rates(self, rates: dict[str, float] | None = None, **more: float) -> None:
        """Replace every rate (kinds not named become 0): ``set_rates()`` turns faults off."""
        checked = self._checked({**(rates or {}), **more})
        with self._lock:
            self._rates = checked

    @property
    def rates(self) -> dict[str, float]:
        with self._lock:
            return dict(self._rates)

    def close(self) -> None:
        self._closing.set()
        try:
            self._listener.close()
        except OSError:
            pass
        self._acceptor.join(timeout=10)
        with self._lock:
            conns = list(self._conns.items())
        for _, socks in conns:
            for s in socks:
                _shutdown(s)
        for thread, _ in conns:
            thread.join(timeout=10)
        alive = [t.name for t in [self._acceptor, *(t for t, _ in conns)] if t.is_alive()]
        if alive:
            raise RuntimeError(f"{self.name}: threads still running after close(): {alive}")

    def __enter__(self) -> "FaultProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals -------------------------------------------------------------------------
    def _count(self, key: str, method: str | None = None) -> None:
        with self._lock:
            self.counts[key] += 1
            if method is not None:
                self.faults_by_method[(key, method)] += 1

    def _draw(self, method: str) -> tuple[str | None, bool, bool, float, float]:
        """(fault, delay request?, delay reply?, request delay, reply delay) for one request."""
        with self._lock:
            rates, rng = self._rates, self._rng
            fault = None
            r = rng.random()
            for kind in ("reset", "drop_reply", "error_after_apply"):
                rate = rates[kind]
                if kind == "error_after_apply" and method not in self.write_methods:
                    rate = 0.0
                if r < rate:
                    fault = kind
                    break
                r -= rate
            hold_request = rng.random() < rates["delay"]
            hold_reply = rng.random() < rates["delay"]
            return (fault, hold_request, hold_reply,
                    rng.uniform(0, self.max_delay_s), rng.uniform(0, self.max_delay_s))

    def _prefix_length(self, n: int) -> int:
        with self._lock:
            return self._rng.randrange(n) if n else 0

    def _exception_field(self, method: str) -> tuple[type, str, type]:
        """(result struct, name and class of its I/O exception field) of ``method``."""
        result_cls = getattr(self.service, f"{method}_result")
        for fid, spec in sorted(result_cls.thrift_spec.items()):
            if fid != 0 and spec[1] == "io":
                return result_cls, spec[1], spec[2]
        raise ValueError(f"{method} declares no 'io' exception: it cannot be answered with an injected error")

    def _error_reply(self, method: str, seqid: int) -> bytes:
        """A REPLY for ``method``/``seqid`` whose result carries the IDL's exception field."""
        result_cls, field_name, exc_cls = self._exception_field(method)
        buf = TMemoryBuffer()
        proto = TBinaryProtocol(buf)
        proto.write_message_begin(method, TMessageType.REPLY, seqid)
        result_cls(**{field_name: exc_cls(message=INJECTED_MESSAGE)}).write(proto)
        proto.write_message_end()
        return buf.getvalue()

    def _accept_loop(self) -> None:
        while not self._closing.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], 0.2)
                if not ready:
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):
                return  # the listener was closed
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            thread = threading.Thread(target=self._serve, args=(client, server),
                                      name=f"{self.name}-conn", daemon=True)
            with self._lock:
                if self._closing.is_set():
                    _close(client)
                    _close(server)
                    return
                self._conns[thread] = (client, server)
            thread.start()

    def _serve(self, client: socket.socket, server: socket.socket) -> None:
        from_client, from_server = _Reader(client), _Reader(server)
        rst = False
        try:
            while not self._closing.is_set():
                method, mtype, seqid, request = from_client.message()
                fault, hold_request, hold_reply, request_delay, reply_delay = self._draw(method)
                if hold_request:
                    self._count("delays")
                    if self._closing.wait(request_delay):
                        return
                if fault == "reset":
                    self._count("resets", method)
                    server.sendall(request[:self._prefix_length(len(request))])
                    rst = True
                    return
                server.sendall(request)
                self._count("forwarded")
                if mtype == TMessageType.ONEWAY:
                    continue
                reply = from_server.message()[3]
                if fault == "drop_reply":
                    self._count("dropped_replies", method)
                    return
                if fault == "error_after_apply":
                    self._count("errors_after_apply", method)
                    reply = self._error_reply(method, seqid)
                elif hold_reply:
                    self._count("delays")
                    if self._closing.wait(reply_delay):
                        return
                client.sendall(reply)
        except (OSError, EOFError, ProtocolError):
            pass  # either side went away, or close() shut the sockets
        finally:
            if rst:
                try:  # an RST, not a FIN: the client sees "connection reset"
                    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            _close(client)
            _close(server)
            with self._lock:
                self._conns.pop(threading.current_thread(), None)


def _shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass
