"""One client connection of the oracle server: requests parsed, answered in order, or refused.

Layer: oracle. Imports the standard library and ``caffeine.oracle`` modules that load no
storage; ``caffeine.oracle.server`` creates one ``Connection`` per client. The bytes are
``caffeine.oracle.wire``'s.

Contract: requests are answered from the server's ``allocator`` as they arrive (many per
event-loop turn, none waiting for HBase) until one needs the high-water mark renewed; that
one, and everything behind it, waits for ``server.allocate_slow`` so answers stay in order.
While the server is not the active oracle (``allocator`` None: a standby, or stepped down),
every request gets ``NOT_ACTIVE_ANSWER`` and the connection is closed. A request the server
cannot answer safely closes the connection without an answer.
"""

from __future__ import annotations

import asyncio
import logging
import time

from caffeine.oracle import timestamps as tsm
from caffeine.oracle.errors import OracleConflict, OracleNotActive
from caffeine.oracle.wire import MAX_BATCH, NOT_ACTIVE_ANSWER, REQUEST, RESPONSE, STATUS_REQUEST

log = logging.getLogger(__name__)


class Connection(asyncio.Protocol):
    """One client connection: parses 4-byte requests, answers 8 bytes each, in order."""

    def __init__(self, server) -> None:
        # The OracleServer (not imported: it imports this module): its allocator,
        # connections and allocate_slow.
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.waiting = False  # a request is parked on a renewal; later ones queue behind it

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.server.connections.add(self)

    def connection_lost(self, exc) -> None:
        self.server.connections.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.waiting:
            self._answer_buffered()

    def _answer_buffered(self) -> None:
        """Answer every complete buffered request that needs no HBase write (the fast path)."""
        allocator = self.server.allocator
        if allocator is None:
            self._refuse()
            return
        buffer = self.buffer
        out = []
        offset = 0
        now_ts = tsm.wall_clock_ts()
        now_mono = time.monotonic()
        while len(buffer) - offset >= 4:
            (n,) = REQUEST.unpack_from(buffer, offset)
            if n == STATUS_REQUEST:
                out.append(RESPONSE.pack(allocator.next_ts))
            elif n > MAX_BATCH:
                log.warning("oracle: protocol error from %s: asked for %d timestamps (max %d); closing",
                            self._peer(), n, MAX_BATCH)
                self._flush(out)
                self.transport.close()
                return
            else:
                first = allocator.try_allocate(n, now_ts, now_mono)
                if first is None:
                    # Park this request, and to keep answers in order everything behind it,
                    # until a renewal has been persisted.
                    self.waiting = True
                    del buffer[:offset]
                    self._flush(out)
                    asyncio.get_running_loop().create_task(self._answer_after_renewal(n))
                    return
                out.append(RESPONSE.pack(first))
            offset += 4
        del buffer[:offset]
        self._flush(out)

    async def _answer_after_renewal(self, n: int) -> None:
        try:
            first = await self.server.allocate_slow(n)
        except Exception as exc:
            # HBase unreachable, or another oracle took over (then the server is stopping):
            # no answer we could give is safe. Closing makes the client retry.
            if not isinstance(exc, (OracleConflict, OracleNotActive)):
                log.warning("oracle: cannot renew the high-water mark (%s: %s); dropping connection "
                            "%s so the client retries", type(exc).__name__, exc, self._peer())
            if self.transport is not None:
                self.transport.close()
            return
        if self.transport is None or self.transport.is_closing():
            return  # the client went away (or we are stopping): this range is never used
        del self.buffer[:4]
        self.transport.write(RESPONSE.pack(first))
        self.waiting = False
        self._answer_buffered()

    def _refuse(self) -> None:
        """Not the active oracle (a standby): say so, and hang up."""
        if self.buffer and self.transport is not None:
            self.buffer.clear()
            self.transport.write(NOT_ACTIVE_ANSWER)
            self.transport.close()

    def _flush(self, out: list[bytes]) -> None:
        if out and self.transport is not None:
            self.transport.write(b"".join(out) if len(out) > 1 else out[0])

    def _peer(self):
        return self.transport.get_extra_info("peername") if self.transport else None
