"""Whether a store's server runs row steps, and which protocol they speak: the probe.

Layer: storage. The storage model and a store's ``apply_checked``; no I/O of its own. Every
server-side row step (``Store.apply_checked``; HBase: Caffeine's coprocessor) refuses a
*probe*, a checked write of no mutations whose step attribute names ``probe``, with
``PROBE <version>``: the row-step protocol it speaks. Where no row step runs, the probe
applies (it replaces the row guard of ``PROBE_ROW`` and writes nothing else) or the store
says it runs none (``ServerStepsUnavailable``). Which versions a client can use, and what it
does without one, is for the layers above (``caffeine.percolator.backends``,
``caffeine.runtime.health``).
"""

from __future__ import annotations

from typing import Mapping, Protocol

from caffeine.storage.errors import ServerStepsUnavailable
from caffeine.storage.model import CheckedWrite, Refusal

# The one row every probe writes to: outside any key space above (a leading zero byte), in a
# system table the caller names. Where no row step runs, it holds the row guard and nothing else.
PROBE_ROW = b"\x00caffeine-probe"
# The step attribute and the step's name, as the row steps parse them
# (``caffeine.percolator.steps.requests``, ``StepRequest.java`` in ``coprocessor/``).
PROBE = CheckedWrite(((b"caffeine.step", b"probe"),), ())


class ChecksWrites(Protocol):
    """What the probe needs of a store: ``Store.apply_checked``."""

    def apply_checked(self, table: str, writes: Mapping[bytes, CheckedWrite]) -> dict[bytes, Refusal | None]: ...


def probe_row_steps(store: ChecksWrites, table: str) -> str | None:
    """The protocol version of the row steps ``store``'s server runs for ``table`` (a probe
    written to ``PROBE_ROW``), or None where it runs none."""
    try:
        answer = store.apply_checked(table, {PROBE_ROW: PROBE})[PROBE_ROW]
    except ServerStepsUnavailable:
        return None
    if answer is not None and answer.answer == "PROBE":
        return answer.args[0] if answer.args else "?"
    return None  # the probe applied: no row step looked at it


__all__ = ["PROBE", "PROBE_ROW", "ChecksWrites", "probe_row_steps"]
