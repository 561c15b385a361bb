"""Which code sent a storage round trip: the names of the functions on the calling stack.

Shared by the benchmarks that count round trips by caller (``bench_transactions`` in
process, ``bench_pipeline`` inside its worker processes).
"""

from __future__ import annotations

import sys


def caller_path(skip: frozenset[str] | set[str], depth: int = 1) -> str:
    """The first ``depth`` function names not in ``skip`` on the stack of whoever called the
    function that calls this, innermost first, joined with ``<``; ``?`` if there is none."""
    frame = sys._getframe(2)
    names: list[str] = []
    while frame is not None and len(names) < depth:
        if frame.f_code.co_name not in skip:
            names.append(frame.f_code.co_name)
        frame = frame.f_back
    return "<".join(names) or "?"
