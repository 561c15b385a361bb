"""Free loopback ports for the servers tests start.

Layer: test support. Draw every port a set of servers needs in one call: the draws of one call
never share a number, while separate calls (or the kernel's ``bind(0)`` twice) may hand the same
free port out twice, and the second server then fails to start.
"""

from __future__ import annotations

import random

from caffeine.runtime.ports import port_is_free


def free_port_blocks(spans: list[int]) -> list[int]:
    """The bases of blocks of consecutive free ports on 127.0.0.1, one block of ``spans[i]``
    ports for each ``i``, no two blocks sharing a port, all below Linux's usual range of
    ephemeral ports (32768 on), which outgoing connections take."""
    taken: set[int] = set()
    bases: list[int] = []
    for span in spans:
        while True:
            base = random.randrange(20000, 32000 - span)
            block = range(base, base + span)
            if taken.isdisjoint(block) and all(port_is_free(p) for p in block):
                bases.append(base)
                taken.update(block)
                break
    return bases


def free_ports(count: int, span: int = 1) -> list[int]:
    """``count`` bases of ``span`` consecutive free ports, all different (``free_port_blocks``)."""
    return free_port_blocks([span] * count)


def free_port() -> int:
    """One free port (``free_port_blocks``)."""
    [port] = free_port_blocks([1])
    return port
