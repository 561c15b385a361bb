"""Ending the runtime's processes: cleanly in reverse start order, one piece, or as a crash.

Layer: runtime. Stops processes; starts only HBase's own stop command. Contract:

- ``stop_all(...)`` stops every piece of this home in reverse start order: the oracles first,
  the standby piece before the oracle, each with SIGTERM (the one serving last hands its lease
  back in HBase while HBase still takes the write, so the next ``up`` starts it at once),
  then thrift2, thrift1, then HBase. Then it ends leftovers (a stop JVM that hung, a piece
  started meanwhile) and removes the pid files. When it returns no process of this home runs;
  otherwise it raises ``LocalHBaseError``. Nothing running is harmless (it says so).
- ``stop_piece(...)`` stops one process of one piece: HBase with ``HMaster stop
  --shutDownCluster``, which flushes the memstores (so data written before is there after
  the next start without replaying a write-ahead log), falling back to SIGTERM if that fails
  or the JVM lingers; every other piece with SIGTERM. Each escalates to SIGKILL after
  ``Settings.shutdown_timeout_s`` (see ``process.terminate``).
- ``sigkill(name, pids, ...)`` is a crash, for crash tests: SIGKILL (no flush, no clean
  shutdown, no lease handed back), returning once every pid is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable

from caffeine.config import Settings
from caffeine.runtime.catalogue import HOST, MASTER_CLASS, Piece
from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.home import Layout
from caffeine.runtime.ports import port_accepts
from caffeine.runtime.process import Progress, java_command, spawn, terminate, wait_gone, wait_reaped

# The piece name (marker, log file) of the short-lived JVM that asks HBase to shut down.
STOP_PIECE = "hbase-stop"


def stop_all(
    settings: Settings, layout: Layout, pieces: tuple[Piece, ...], find: Callable[[], dict[str, list[int]]],
    progress: Progress,
) -> None:
    """Stop every piece of ``pieces`` (in start order) that ``find`` reports, in reverse order."""
    found = find()
    if not found:
        progress(f"nothing running under {layout.home}")
    # Reverse start order: the oracles first (the standby piece, then the oracle; whichever
    # serves last hands its lease back), while HBase still takes that write (otherwise the
    # next `up` waits a block for the lease to run out).
    for p in reversed(pieces):
        for pid in found.get(p.name, []):
            stop_piece(settings, layout, p, pid, progress)
            progress(f"{p.name} stopped")
    for name, pids in find().items():
        # Leftovers: a stop JVM that hung, or a piece started while we were stopping.
        for pid in pids:
            terminate(pid, name, 10, progress)
    for p in pieces:
        layout.pid_file(p.name).unlink(missing_ok=True)
    left = find()
    if left:
        raise LocalHBaseError(f"still running after down: {left}")
    wait_reaped([pid for pids in found.values() for pid in pids])


def stop_piece(settings: Settings, layout: Layout, piece: Piece, pid: int, progress: Progress) -> None:
    if piece.name == "hbase":
        _stop_hbase(settings, layout, piece, pid, progress)
    else:
        progress(f"stopping {piece.name} (pid {pid})")
        terminate(pid, piece.name, settings.shutdown_timeout_s, progress)


def sigkill(name: str, pids: list[int], progress: Progress) -> None:
    for pid in pids:
        progress(f"killing {name} (pid {pid}) with SIGKILL")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for pid in pids:
        # SIGKILL cannot be caught; a process still there after this is stuck in the kernel.
        if not wait_gone(pid, 15):
            raise LocalHBaseError(f"{name} (pid {pid}) is still alive 15s after SIGKILL")


def _stop_hbase(settings: Settings, layout: Layout, hb: Piece, pid: int, progress: Progress) -> None:
    timeout = settings.shutdown_timeout_s
    if all(port_accepts(p.number, HOST) for p in hb.ports):
        # A clean cluster shutdown closes the regions, flushing their memstores to store
        # files, so the next start has no write-ahead log to split and replay. (A crash
        # loses no acknowledged write either: the WAL reaches the OS before HBase answers,
        # and the next start replays it; see siteconf.)
        progress(f"stopping hbase (pid {pid}): HMaster stop --shutDownCluster (flushes memstores)")
        cmd = java_command(layout, STOP_PIECE, "256m", MASTER_CLASS, ("stop", "--shutDownCluster"))
        stop_log = layout.log_file(STOP_PIECE)
        proc = spawn(cmd, stop_log, None, cwd=layout.home)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        if rc == 0:
            outcome = _wait_master_exit(pid, hb, timeout)
            if outcome == "exited":
                return
            if outcome == "lingering":
                # Seen when the shutdown arrives while the master is still initializing:
                # regions are closed and every port is shut, but a non-daemon thread keeps
                # the JVM alive. Nothing is left to flush, so SIGTERM is safe.
                progress(f"hbase shut down but its JVM (pid {pid}) lingers; sending SIGTERM")
                terminate(pid, "hbase", timeout, progress)
                return
        why = "timed out" if rc is None else (f"exited with code {rc}" if rc else "did not stop it in time")
        progress(f"clean shutdown {why} (see {stop_log}); sending SIGTERM to hbase (pid {pid})")
    else:
        progress(f"stopping hbase (pid {pid}) with SIGTERM (its ports do not all answer)")
    terminate(pid, "hbase", timeout, progress)


def _wait_master_exit(pid: int, hb: Piece, timeout: float, linger_s: float = 10.0) -> str:
    """After a successful stop request: "exited", "lingering" (all ports closed for
    ``linger_s`` but the JVM is still there) or "timeout"."""
    deadline = time.monotonic() + timeout
    closed_since: float | None = None
    while time.monotonic() < deadline:
        if wait_gone(pid, 0.5):
            return "exited"
        if any(port_accepts(p.number, HOST, timeout=0.5) for p in hb.ports):
            closed_since = None
        elif closed_since is None:
            closed_since = time.monotonic()
        elif time.monotonic() - closed_since >= linger_s:
            return "lingering"
    return "timeout"
