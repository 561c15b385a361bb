"""The wait after a start: poll until the pieces answer, saying how far each has come.

Layer: runtime. Looks, through ``survey``; starts and stops nothing. ``wait_listening`` waits
for one port (ZooKeeper's, before the servers that need it). Contract:
``wait_healthy(...)`` returns the healthy ``Status`` of ``pieces`` as soon as every one of
them answers a real call, polling every half second up to ``Settings.startup_timeout_s``.
It raises ``LocalHBaseError`` (with the log lines that explain it, see ``diagnostics``) as
soon as one of ``pieces`` is not running (its exit code when this process started it), or
at the deadline, blaming one piece; either way it leaves every process running, for the
log to be read and ``caffeine down`` to clean up.

Progress goes to ``progress`` once per event, timed from the start of the wait: a port that
accepts, the master finishing its initialization, the oracle's own startup lines, a piece
turning healthy. It is about the pieces just started (all of them when none was); when
nothing was started it is held back and replayed only if the first look is not healthy, so
an ``up`` of a healthy runtime prints no step-by-step noise.
"""

from __future__ import annotations

import subprocess
import time
from typing import Callable, Mapping

from caffeine.config import Settings
from caffeine.runtime import jars
from caffeine.runtime.catalogue import HOST, ORACLES, Piece, master_piece
from caffeine.runtime.diagnostics import failure, master_initialized, not_healthy
from caffeine.runtime.home import Layout
from caffeine.runtime.ports import port_accepts
from caffeine.runtime.process import Progress
from caffeine.runtime.local_status import Status
from caffeine.runtime.survey import survey

# How the oracle marks the lines it writes about its own startup (see caffeine.oracle).
_ORACLE_SAYS = "caffeine oracle:"


class _Reporter:
    """Each event said once, prefixed with the seconds since the wait began; held back if asked."""

    def __init__(self, progress: Progress, hold: bool):
        self._progress = progress
        self._t0 = time.monotonic()
        self._said: set[str] = set()
        self._held: list[str] | None = [] if hold else None

    def said(self, key: str) -> bool:
        return key in self._said

    def once(self, key: str, msg: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        line = f"  [{time.monotonic() - self._t0:5.1f}s] {msg}"
        if self._held is None:
            self._progress(line)
        else:
            self._held.append(line)

    def release(self) -> None:
        """From now on say everything at once, starting with what was held back."""
        if self._held is not None:
            self._progress("waiting for it to become healthy")
            for line in self._held:
                self._progress(line)
            self._held = None


def wait_healthy(
    settings: Settings,
    layout: Layout,
    pieces: tuple[Piece, ...],
    started: set[str],
    *,
    find: Callable[[], dict[str, list[int]]],
    spawned: Mapping[str, subprocess.Popen],
    progress: Progress,
) -> Status:
    """Poll until every one of ``pieces`` runs and is healthy; raise naming the failed piece otherwise.

    ``started``: the pieces just started (their progress is reported); ``pieces`` must all be
    ours (an external oracle is never waited for here). ``find`` lists our running processes
    by piece; ``spawned`` holds the ones this process started, for their exit codes.
    """
    timeout = settings.startup_timeout_s
    deadline = time.monotonic() + timeout
    report = _Reporter(progress, hold=not started)
    if started and started <= set(ORACLES):
        which = "standby timestamp oracle" if started == {"standby"} else "timestamp oracle"
        progress(f"waiting for the {which} to answer (up to {timeout:.0f}s)")
    elif started:
        progress(f"waiting for HBase and both Thrift servers to answer (up to {timeout:.0f}s)")
    while True:
        found = find()
        _raise_if_gone(layout, pieces, found, spawned)
        # Cheap signs of progress first, so they are reported when they happen rather
        # than after a slow probe.
        initialized = _report_signs(layout, pieces, started, report)
        # Before the master is initialized a Thrift call blocks inside the server's HBase
        # client retries; a short probe timeout keeps polling instead of waiting out a
        # stale attempt. Health is still decided by the calls, never by the log line.
        remaining = max(1.0, deadline - time.monotonic())
        st = survey(settings, layout, pieces, found, min(10.0 if initialized else 2.0, remaining), polling=True)
        for p in st.pieces:
            if p.healthy and (not started or p.name in started):
                report.once(f"{p.name}:ok", f"{p.name}: healthy ({p.detail})")
        if st.healthy:
            return st
        report.release()
        if time.monotonic() >= deadline:
            raise not_healthy(
                st, layout, after=f" after {timeout:.0f}s",
                then="; the processes are left running for inspection, `caffeine down` stops them",
            )
        time.sleep(0.5)


def wait_listening(piece: Piece, timeout_s: float, proc: subprocess.Popen) -> None:
    """Until ``piece``'s service port accepts, ``proc`` (its process) exits or ``timeout_s``
    passes, whichever comes first: what must answer before the others start (ZooKeeper).
    Raises nothing: ``wait_healthy`` after it says what failed, with the log."""
    deadline = time.monotonic() + timeout_s
    while not port_accepts(piece.service_port.number, HOST) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)


def _raise_if_gone(
    layout: Layout, pieces: tuple[Piece, ...], found: dict[str, list[int]], spawned: Mapping[str, subprocess.Popen]
) -> None:
    for piece in pieces:
        if piece.name in found:
            continue
        proc = spawned.get(piece.name)
        code = proc.poll() if proc is not None else None
        how = f"exited with code {code}" if code is not None else "is not running"
        others = [n for n in found if n != piece.name]
        left = f"; still running: {', '.join(others)} (`caffeine down` stops them)" if others else ""
        raise failure(layout, piece, f"{piece.name} {how} during startup{left}")


def _report_signs(layout: Layout, pieces: tuple[Piece, ...], started: set[str], report: _Reporter) -> bool:
    """Report ports that accept, the master's initialization and the oracle's own lines for
    the pieces being started (all, when none was); return whether the master is initialized."""
    for piece in (p for p in pieces if not started or p.name in started):
        for port in piece.ports:
            key = f"{piece.name}:{port.number}"
            if not report.said(key) and port_accepts(port.number, HOST):
                report.once(key, f"{piece.name}: {port.label} port {port.number} accepts")
    master = master_piece(pieces)
    initialized = master is not None and master_initialized(layout, master.name)
    if initialized and (not started or master.name in started):
        report.once("master-init", f"{master.name}: master completed initialization")
    for name in started & set(ORACLES):
        # An oracle says what it does while it starts (e.g. waiting out a previous
        # oracle's lease, or standing by): pass its own lines on.
        for line in jars.tail_lines(layout.log_file(name), 200):
            if line.startswith(_ORACLE_SAYS):
                report.once(f"{name}-log:{line}", f"{name}: " + line[len(_ORACLE_SAYS):].strip())
    return initialized
