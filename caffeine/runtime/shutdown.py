"""Ending the runtime's processes: cleanly in reverse start order, one piece, or as a crash.

Layer: runtime. Stops processes; starts only HBase's own stop command. Contract:

- ``stop_all(...)`` stops every piece of this home in reverse start order: the oracles first,
  the standby piece before the oracle, each with SIGTERM (the one serving last hands its lease
  back in HBase while HBase still takes the write, so the next ``up`` starts it at once),
  then thrift2, thrift1, then HBase. Then it ends leftovers (a stop JVM that hung, a piece
  started meanwhile) and removes the pid files. When it returns no process of this home runs;
  otherwise it raises ``LocalHBaseError``. Nothing running is harmless (it says so).
- HBase stops with ``HMaster stop --shutDownCluster``, which closes every region, flushing
  its memstore (so data written before is there after the next start without replaying a
  write-ahead log). Standalone that is the one JVM (``stop_piece`` of ``hbase``); in the
  cluster mode (``stop_cluster``) the master tells every region server to close its regions
  and stop, waits for them, and exits; region servers still there after the timeout get
  SIGTERM, and ZooKeeper, stopped last, SIGTERM. A region server without a running master
  has nobody to hand its regions to: it gets SIGTERM (its write-ahead log is replayed at the
  next start). Each falls back to SIGTERM if the clean way fails or the JVM lingers.
- ``stop_piece(...)`` stops one process of one piece: the standalone HBase as above, every
  other piece with SIGTERM (a cluster's master too: that stops the master only, the region
  servers wait for the next one). Each escalates to SIGKILL after
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
    master = next((p for p in pieces if p.role == "master" and p.name in found), None)
    # Reverse start order: the oracles first (the standby piece, then the oracle; whichever
    # serves last hands its lease back), while HBase still takes that write (otherwise the
    # next `up` waits a block for the lease to run out).
    for p in reversed(pieces):
        if p.role == "regionserver" and master is not None:
            continue  # they stop with the cluster, when the master shuts it down
        for pid in found.get(p.name, []):
            if p is master:
                servers = {r.name: found[r.name] for r in pieces if r.role == "regionserver" and r.name in found}
                stop_cluster(settings, layout, p, pid, servers, progress)
            else:
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
    if piece.role == "hbase":
        _stop_hbase(settings, layout, piece, pid, progress)
    else:
        progress(f"stopping {piece.name} (pid {pid})")
        terminate(pid, piece.name, settings.shutdown_timeout_s, progress)


def stop_cluster(
    settings: Settings, layout: Layout, master: Piece, pid: int, servers: dict[str, list[int]], progress: Progress,
) -> None:
    """Shut the cluster mode's HBase down through its master (``pid``): every region server in
    ``servers`` (name -> pids) closes its regions and exits, then the master; whatever is left
    after ``Settings.shutdown_timeout_s`` gets SIGTERM. ZooKeeper is not stopped here."""
    clean = _stop_hbase(settings, layout, master, pid, progress)
    # After a clean shutdown the region servers are on their way out; otherwise nobody told them.
    deadline = time.monotonic() + (settings.shutdown_timeout_s if clean else 0.0)
    for name, pids in servers.items():
        for rs in pids:
            if not wait_gone(rs, max(0.0, deadline - time.monotonic())):
                if clean:
                    progress(f"{name} (pid {rs}) still runs after the cluster shutdown; sending SIGTERM")
                else:
                    progress(f"stopping {name} (pid {rs})")
                terminate(rs, name, settings.shutdown_timeout_s, progress)
            progress(f"{name} stopped")


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


def _stop_hbase(settings: Settings, layout: Layout, hb: Piece, pid: int, progress: Progress) -> bool:
    """The cluster shutdown through the master ``hb`` (standalone: the one JVM), SIGTERM to
    the master if that fails (``hb.name`` names it in messages); whether the shutdown
    request was taken (the region servers then stop by themselves)."""
    timeout = settings.shutdown_timeout_s
    # The stop command finds the master through ZooKeeper: standalone's is in the JVM (one
    # of its ports), the cluster mode's a piece of its own, stopped after this.
    zookeeper = (settings.zookeeper_port,) if hb.role == "master" else ()
    if all(port_accepts(p, HOST) for p in (*(p.number for p in hb.ports), *zookeeper)):
        # A clean cluster shutdown closes the regions, flushing their memstores to store
        # files, so the next start has no write-ahead log to split and replay. (A crash
        # loses no acknowledged write either: the WAL reaches the OS before HBase answers,
        # and the next start replays it; see siteconf.)
        progress(f"stopping {hb.name} (pid {pid}): HMaster stop --shutDownCluster (flushes memstores)")
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
                return True
            if outcome == "lingering":
                # Seen when the shutdown arrives while the master is still initializing:
                # regions are closed and every port is shut, but a non-daemon thread keeps
                # the JVM alive. Nothing is left to flush, so SIGTERM is safe.
                progress(f"{hb.name} shut down but its JVM (pid {pid}) lingers; sending SIGTERM")
                terminate(pid, hb.name, timeout, progress)
                return True
        why = "timed out" if rc is None else (f"exited with code {rc}" if rc else "did not stop it in time")
        progress(f"clean shutdown {why} (see {stop_log}); sending SIGTERM to {hb.name} (pid {pid})")
    else:
        progress(f"stopping {hb.name} (pid {pid}) with SIGTERM (its ports do not all answer)")
    terminate(pid, hb.name, timeout, progress)
    return False


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
