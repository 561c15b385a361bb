"""Why a piece failed, told from its log: the errors ``up`` and ``restart`` raise.

Layer: runtime. Reads log files, with ``jars.tail_lines``; starts, stops and probes nothing.
Contract:

- ``relevant_log_lines(path)`` picks the ~20 lines of a log that most likely explain a
  failure (the last block of errors with its stack trace, else the tail); a missing log
  gives ``[]``.
- ``failure(layout, piece, headline)`` is the ``LocalHBaseError`` to raise for ``piece``: the
  headline, the log's path and those lines, so the person at the terminal need not go looking.
- ``not_healthy(status, layout)`` is that error for a status that did not become healthy,
  blaming HBase's servers first while they are not up (no Thrift server can answer without
  them: ZooKeeper, then the master, then the region servers of the cluster mode), else the
  first unhealthy piece.
- ``master_initialized(layout, name)`` tells from the log of the master's piece (``hbase``
  standalone, ``master`` in the cluster mode) whether it has finished initializing: a sign of
  progress, never proof of health (the probes decide that).
"""

from __future__ import annotations

import re
from pathlib import Path

from caffeine.runtime import jars
from caffeine.runtime.catalogue import HBASE_ROLES, MASTER_ROLES, Piece
from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.home import Layout
from caffeine.runtime.local_status import Status

# Written by the master once meta and the namespace table are online: from then on tables can
# be created, read and written.
MASTER_READY_LINE = "Master has completed initialization"

_LEVEL_RE = re.compile(r"\b(ERROR|FATAL)\b|^Exception|^Error|^Caused by:")


def master_initialized(layout: Layout, name: str = "hbase") -> bool:
    # The log is rotated at every start, so the line belongs to the running JVM.
    try:
        with open(layout.log_file(name), "rb") as fh:
            return MASTER_READY_LINE.encode() in fh.read()
    except OSError:
        return False


def failure(layout: Layout, piece: Piece, headline: str) -> LocalHBaseError:
    log = layout.log_file(piece.name)
    excerpt = "\n".join("    " + line for line in relevant_log_lines(log))
    return LocalHBaseError(
        f"{headline}\n  log: {log}\n  last relevant log lines:\n{excerpt or '    (log is empty)'}"
    )


def not_healthy(st: Status, layout: Layout, after: str = "", then: str = "") -> LocalHBaseError:
    """``failure`` for the piece to blame in ``st``: "<piece> not healthy<after> (<state>: <detail>)<then>"."""
    culprit = _blame(st, layout)
    cp = st.piece(culprit.name)
    return failure(layout, culprit, f"{culprit.name} not healthy{after} ({cp.state}: {cp.detail}){then}")


def _blame(st: Status, layout: Layout) -> Piece:
    servers = [p for p in st.pieces if p.piece.role in HBASE_ROLES]
    # A server that is not even listening first (in start order), then a master that has not
    # initialized (it waits for every region server: one that never reports shows as
    # not listening or as unhealthy), then whatever is not healthy.
    for hb in servers:
        if not hb.running or not all(hb.accepting.values()):
            return hb.piece
    for hb in servers:
        if hb.piece.role in MASTER_ROLES and not hb.healthy and not master_initialized(layout, hb.name):
            return hb.piece
    for p in st.pieces:
        if not p.healthy:
            return p.piece
    return servers[0].piece


def relevant_log_lines(path: Path, n: int = 20) -> list[str]:
    """The ~``n`` log lines that most likely explain a failure.

    The block starting at the last ERROR/FATAL line (its stack trace included) if the tail of
    the log has one, otherwise the last ``n`` lines. Long lines are cut.
    """
    lines = jars.tail_lines(path, 400)
    marks = [i for i, line in enumerate(lines) if _LEVEL_RE.search(line)]
    if marks:
        # Walk back to the first error of the last run of errors, so a trace isn't cut in half.
        start = marks[-1]
        for i in reversed(marks[:-1]):
            if start - i <= 3:
                start = i
            else:
                break
        first = max(0, start - 3)
        chosen = lines[first : first + n]
        if first + n < len(lines):
            # The log goes on after the error: keep its end too (how the JVM ended).
            chosen = chosen[: n - 6] + ["..."] + lines[-5:]
    else:
        chosen = lines[-n:]
    return [line if len(line) <= 300 else line[:300] + " ..." for line in chosen]
