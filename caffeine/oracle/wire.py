"""The oracle's wire protocol: its constants, and reading one answer (the client's side).

Layer: oracle. Imports the standard library and ``caffeine.oracle.errors`` only, so the client
loads no server code; the server's side is ``caffeine.oracle.connection``.

Wire protocol (TCP, binary, big-endian; a connection carries any number of requests, answered
in order, so clients may pipeline):

    request   4 bytes  unsigned N
    response  8 bytes  unsigned

    N in 1..1_000_000  allocate: the response is ``first``; the client owns the contiguous
                       range ``first .. first + N - 1``.
    N == 0             status ("ping"): the response is the oracle's *next* timestamp, allocating
                       nothing. Every timestamp this oracle process handed out is below it, and
                       it changes only when timestamps are handed out, so two equal answers
                       mean nothing was handed out in between ("wait until quiescent"). Not
                       wall-clock adjusted: the next allocation returns at least this value.
    N > 1_000_000      a protocol error: the server closes the connection.

There is no error response: a request the server cannot answer safely (the high-water mark
must move and HBase does not answer) has its connection closed, and the client retries with
its own deadline (``caffeine.oracle.client``). The one exception is a standby's refusal: a
server that is not the active oracle answers every request with the 7 bytes
``NOT_ACTIVE_ANSWER`` and closes the connection, so clients move on to their next address at
once. Seven bytes, so that a client which does not know the refusal reads a short answer and
a closed connection (and retries), never a timestamp; and no timestamp starts with them
(every one is below 2**62, its first byte below 0x40).
"""

from __future__ import annotations

import socket
import struct

from caffeine.oracle.errors import OracleNotActive

MAX_BATCH = 1_000_000
STATUS_REQUEST = 0
REQUEST = struct.Struct(">I")
RESPONSE = struct.Struct(">Q")
# A standby's answer to every request (see above).
NOT_ACTIVE_ANSWER = b"standby"


def read_answer(sock: socket.socket, data: bytes, address: tuple[str, int]) -> int:
    """The answer whose first bytes ``data`` are (read on until all 8 are in). A connection
    closed early raises ``OracleNotActive`` after a standby's refusal, ``ConnectionResetError``
    otherwise."""
    while len(data) < 8:
        chunk = sock.recv(8 - len(data))
        if not chunk:
            if data == NOT_ACTIVE_ANSWER:
                raise OracleNotActive(f"the oracle at {address[0]}:{address[1]} is a standby, not the active one")
            raise ConnectionResetError("the oracle closed the connection")
        data += chunk
    return RESPONSE.unpack(data)[0]
