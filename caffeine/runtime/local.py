"""``LocalHBase``: start, stop, restart, kill and report the local runtime of one home.

Layer: runtime. The API that ``caffeine up/down/status``, the test suite and later commands
use. Its pieces (standalone ``hbase``, ``thrift1``, ``thrift2`` unless ``hbase`` answers it,
``oracle`` and, unless ``CAFFEINE_ORACLE_STANDBY_PORT=0``, ``standby``; in the cluster mode
``zookeeper``, ``master`` and ``regionserver-1..N`` in place of ``hbase``: one process each,
all bound to 127.0.0.1, all files under ``Settings.home``) are listed in ``catalogue``. This module
decides what to start, stop or restart and in which order, under a per-home lock; it looks at
the machine through ``survey``, waits through ``startup``, stops through ``shutdown``, and
explains failures with ``diagnostics``.

Contract:

- ``up()`` resolves the jars (cached), writes the config, starts whichever pieces are not
  running (none: harmless, "already running"), after checking that none of their ports is
  held by another process, and returns only when everything is really usable: every port
  accepts AND a real call answers through each Thrift server (``caffeine.runtime.health``),
  then the oracle (started after that) answers ``OracleClient.status()``, then its standby
  (started last) answers with a standby's refusal; in the cluster mode ZooKeeper is started
  first and the others once its port accepts, and every region server must have reported for
  duty to the master; each phase is polled
  up to ``Settings.startup_timeout_s``. Otherwise it raises ``LocalHBaseError`` naming the
  piece, with the relevant log lines and the log path. Processes it started stay running
  either way, so the log can be inspected; ``down()`` cleans up.
- An oracle that already answers on ``oracle_port`` (or the standby's port) but was not
  started by ``up`` for this home (one run by hand, ``python -m caffeine.oracle``) is
  *external*: ``up`` says so and uses it instead of starting one of its own (none at all, when
  none of ours runs: a standby of ours beside it might keep another high-water mark),
  ``status`` reports it (healthy when it answers), and ``down`` leaves it alone. Anything else
  holding that port is a ``PortInUse`` conflict, like the JVMs' ports. (Two oracles for one
  table prefix never both serve anyway: the lease, see ``caffeine.oracle.hwm``.)
- The two oracles of ours run with ``--standby``: whichever holds the lease serves, the other
  refuses requests and takes over when the first stops (at once) or dies (after its lease
  runs out, about 3.5 s), and clients follow (``Settings.oracle_endpoints``). A dead one that
  ``up`` or ``restart`` starts again comes back as the standby.
- ``down()`` stops every piece in reverse start order, the oracles first (the standby, then
  the other, which hands its lease back) and HBase last and cleanly (its memstores flushed,
  so data written before ``down`` is there after ``up``), escalating to SIGKILL after
  ``Settings.shutdown_timeout_s`` (see ``shutdown``). Idempotent; when it returns, no process
  of this home runs.
- ``status()`` reports each piece (pids, ports accepting, health by a real call, log path;
  a region server's region and request counts); it never starts or stops anything and never
  downloads.
- The mode (standalone, or a cluster of N region servers: ``Settings.regionservers``) is the
  settings' for ``up``, which refuses to start one mode while the other, or more region
  servers than asked, run under the home (``caffeine down`` first), and starts a missing
  region server again. ``status`` and ``down`` follow what runs (``modes.running_settings``),
  so a plain ``caffeine down`` stops a cluster started with ``caffeine up --regionservers 3``.
- ``restart_thrift2()`` stops and starts the piece that answers Thrift2 and waits until it answers
  (a test restarts it mid-run to exercise client reconnects), ``restart_oracle()`` the same
  for the oracle; ``restart(name)`` does it for any piece (a cluster's master or one region
  server alone: SIGTERM, then a new JVM). ``up``, ``down``, ``restart`` and ``kill`` hold a
  per-home file lock, so concurrent callers queue up instead of starting a piece twice.
- ``kill(name)`` is a crash, for crash tests: SIGKILL to one piece's processes (no flush, no
  clean shutdown, no lease handed back), returning once they are gone; the other pieces keep
  running. ``restart(name)`` (or ``up()``) then starts it again: for "hbase" the new JVM splits
  and replays the killed one's write-ahead logs, so every write HBase acknowledged is back
  (each WAL sync reaches the OS before HBase answers; see ``siteconf``).
- ``check_ports(names)`` raises ``PortInUse`` (which port, which process holds it, which
  ``CAFFEINE_*`` setting moves it) for ports that are taken; ``up`` runs it before starting.
  An oracle answering on the oracle port is not a conflict (``up`` uses it, see above).
- ``thrift2_idl_path()`` is the Thrift2 IDL extracted from this version's jar; resolves the
  jars if needed, starts nothing.

Processes are recognised by marker arguments on their command line (``-Dcaffeine.home=<home>
-Dcaffeine.piece=<name>``, ``process.find_pieces``), so the state is read from the machine,
not from files that might be stale.
"""

from __future__ import annotations

import fcntl
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from caffeine.config import Settings, load_settings
from caffeine.runtime import coprocessor, jars, siteconf
from caffeine.runtime.catalogue import (HBASE_ROLES, HOST, ORACLE, ORACLES, Piece, master_piece, oracle_env, pieces_for,
                                        thrift2_port_of)
from caffeine.runtime.diagnostics import not_healthy
from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.home import Layout
from caffeine.runtime.process import Progress, find_java, find_pieces, java_command, python_command, spawn
from caffeine.runtime.modes import mode_conflict, port_clashes, ports_in_use, running_settings
from caffeine.runtime.shutdown import sigkill, stop_all, stop_piece
from caffeine.runtime.startup import wait_healthy, wait_listening
from caffeine.runtime.local_status import Status
from caffeine.runtime.survey import coprocessor_status, external_oracle, survey


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


@contextmanager
def _home_lock(layout: Layout, progress: Progress) -> Iterator[None]:
    """One ``up``/``down``/``restart`` at a time per home.

    Without it two concurrent ``caffeine up`` would both see a piece missing and start it
    twice (a JVM binds its ports only seconds after it starts, so the port check cannot
    tell). The second caller waits, then finds everything running.
    """
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    with open(layout.run_dir / ".lock", "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"another caffeine up/down is working on {layout.home}; waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class LocalHBase:
    """The local HBase of one ``Settings.home``; see the module docstring for the contract."""

    def __init__(self, settings: Settings | None = None, progress: Progress | None = None):
        self.settings = settings or load_settings()
        self.layout = Layout.from_settings(self.settings)
        self.pieces = pieces_for(self.settings)
        self._progress = progress or _stderr
        # Popen handles of the processes this object started: lets a startup failure report
        # the exit code and reaps the child instead of leaving a zombie.
        self._started: dict[str, subprocess.Popen] = {}
        # Set by ``_prepare`` when it built the coprocessor jar while HBase ran (on the old one).
        self._rebuilt_under_running_hbase = False

    # -- public API ----------------------------------------------------------------------

    def thrift2_idl_path(self) -> Path:
        return jars.thrift2_idl_path(self.layout, self._progress)

    def status(self, probe_timeout_s: float = 10.0) -> Status:
        found = self._find()
        pieces = self._running_pieces(found)
        st = survey(self.settings, self.layout, pieces, found, probe_timeout_s)
        extra = sorted(set(found) - {p.name for p in pieces})
        if extra:
            st.notes.append(f"also running under this home: {', '.join(extra)}")
        coprocessor_status(st, self.settings, self.layout, probe_timeout_s)
        return st

    def up(self) -> Status:
        """Start what is missing and wait until healthy; returns the healthy status (every piece)."""
        with _home_lock(self.layout, self._progress):
            return self._up()

    def down(self) -> None:
        """Stop every piece (the standby, the oracle, Thrift2, Thrift1, then HBase cleanly); idempotent."""
        with _home_lock(self.layout, self._progress):
            settings = running_settings(self.settings, self._find())
            stop_all(settings, self.layout, pieces_for(settings), self._find, self._progress)

    def restart_thrift2(self) -> Status:
        """Stop and start the piece that answers Thrift2; return once it answers again."""
        return self.restart(next(p.name for p in self.pieces if thrift2_port_of(p) is not None))

    def restart_oracle(self) -> Status:
        """Stop (SIGTERM: it hands its lease back) and start only the oracle; return once it answers.

        With a standby, the standby takes over at once and the restarted oracle becomes the
        standby. Raises ``LocalHBaseError`` if the oracle on the port is external (not ours
        to restart).
        """
        return self.restart(ORACLE)

    def restart(self, name: str) -> Status:
        """Stop and start one piece ("hbase", "thrift1", "thrift2", "oracle", "standby"); return once healthy."""
        with _home_lock(self.layout, self._progress):
            return self._restart(name)

    def kill(self, name: str) -> list[int]:
        """SIGKILL one piece ("hbase", "thrift1", "thrift2", "oracle", "standby"), as a crash would; return
        its pids once they are gone (empty if it was not running). Nothing is restarted."""
        with _home_lock(self.layout, self._progress):
            return self._kill(name)

    def check_ports(self, names: list[str] | None = None) -> None:
        """Raise ``PortInUse`` if a port of the named pieces (default: all) is held by anything.

        Meant for pieces that are not running: a running piece holds its own ports. An oracle
        that answers on an oracle piece's port is not a conflict: ``up`` uses it (it is external).
        """
        pieces = [self._piece(n) for n in (names or self._names())]
        pieces = [p for p in pieces if p.name not in ORACLES or external_oracle(self.settings, p) is None]
        self._preflight(pieces)

    # -- steps ---------------------------------------------------------------------------

    def _up(self) -> Status:
        self._check_ports_distinct()
        coprocessor.check_thrift2_server(self.settings)
        found = self._find()
        self._check_mode(found)
        self._prepare()
        self._check_single(found)
        jvms = self._jvm_pieces()
        oracles = tuple(p for p in self.pieces if p.name in ORACLES)
        missing = [p for p in jvms if p.name not in found]
        # Each oracle piece: ours and running, external (an oracle answers on its port: use
        # it), or to be started, once HBase answers (its port is checked now, with the
        # others', so a conflict stops `up` before anything starts). Beside an external
        # oracle none of ours starts unless one of ours runs already: it might keep its
        # high-water mark elsewhere, and two oracles of different marks in the clients'
        # address list would hand out unrelated timestamps.
        external = {p.name: who for p in oracles if p.name not in found
                    for who in [external_oracle(self.settings, p)] if who is not None}
        for name, who in external.items():
            port = self._piece(name).service_port.number
            self._progress(f"{name}: an oracle already answers on {HOST}:{port} ({who}); not starting "
                           "another (`caffeine down` will leave it running)")
        ours_run = any(p.name in found for p in oracles)
        start_oracles = [p for p in oracles if p.name not in found and p.name not in external
                         and (ours_run or not external)]
        to_start = missing + start_oracles
        if not to_start:
            self._progress("already running: " + ", ".join(f"{n} (pid {found[n][0]})" for n in self._names() if n in found))
        else:
            for p in self.pieces:
                if p.name in found:
                    self._progress(f"{p.name}: already running (pid {found[p.name][0]})")
            self._preflight(to_start)
            for p in missing:
                self._start(p)
                if p.role == "zookeeper":  # the others need it
                    wait_listening(p, self.settings.startup_timeout_s, self._started[p.name])
        self._wait_healthy({p.name for p in missing}, jvms)
        # One oracle at a time, each waited for with the oracles of ours that run: the first
        # started takes the lease (unless one of ours holds it) and serves, the next waits
        # as its standby.
        running = [p for p in oracles if p.name in found]
        for p in start_oracles:
            self._start(p)
            running.append(p)
            self._wait_healthy({p.name}, jvms + tuple(q for q in oracles if q in running))
        if not external:
            st = self._wait_healthy(set(), self.pieces)
        else:
            st = survey(self.settings, self.layout, self.pieces, self._find(), 10.0)
            if not st.healthy:  # e.g. the external oracle stopped answering meanwhile
                raise not_healthy(st, self.layout)
        if not to_start:
            st.notes.append("was already running; nothing started")
        coprocessor_status(st, self.settings, self.layout, 10.0)
        loaded = st.coprocessor[0] if st.coprocessor else None
        if st.coprocessor_wanted and loaded is False and master_piece(self.pieces).name not in found:
            # We started HBase with the jar and the registration: it must be there.
            raise LocalHBaseError(
                f"HBase started, but the coprocessor {coprocessor.OBSERVER_CLASS} does not answer its probe "
                f"({st.coprocessor[1]}); see {self._server_logs()} (CAFFEINE_COPROCESSOR=off runs without it)"
            )
        if self.settings.regionservers > 0 and not self.settings.table_regions:
            st.notes.append(f"tables of the data contract are created split into {self.settings.regions_per_table} regions "
                            f"by commands that run with CAFFEINE_REGIONSERVERS={self.settings.regionservers} (or "
                            "CAFFEINE_TABLE_REGIONS) set")
        if self._rebuilt_under_running_hbase:
            st.notes.append("the coprocessor jar was rebuilt from changed sources; the running HBase keeps the "
                            "old one until it is restarted (`caffeine down && caffeine up`)")
        return st

    def _restart(self, name: str) -> Status:
        piece = self._piece(name)
        found = self._find()
        if name in ORACLES and name not in found:
            external = external_oracle(self.settings, piece)
            if external is not None:
                raise LocalHBaseError(
                    f"the oracle on {HOST}:{piece.service_port.number} was not started by `caffeine up` "
                    f"for {self.layout.home} ({external}); restart it where it was started"
                )
        self._prepare()
        for pid in found.get(name, []):
            stop_piece(self.settings, self.layout, piece, pid, self._progress)  # HBase cleanly: flushes memstores
        self._preflight([piece])
        self._start(piece)
        ours = [p for p in self.pieces if p.name in ORACLES and (p.name in found or p is piece)]
        if ours:
            # Our oracles: they must be (still) there and answering, one as the active one.
            # After an HBase restart they answer status() at once and catch up on their lease
            # by themselves. (A restarted oracle whose standby took over meanwhile comes back
            # as the standby.)
            return self._wait_healthy({name}, self._jvm_pieces() + tuple(ours))
        self._wait_healthy({name}, self._jvm_pieces())
        return survey(self.settings, self.layout, self.pieces, self._find(), 10.0)

    def _kill(self, name: str) -> list[int]:
        self._piece(name)  # an unknown name raises before anything is killed
        pids = self._find().get(name, [])
        sigkill(name, pids, self._progress)
        proc = self._started.pop(name, None)
        if proc is not None:
            proc.poll()  # reap our own child, so it does not linger as a zombie
        self.layout.pid_file(name).unlink(missing_ok=True)
        return pids

    def _find(self) -> dict[str, list[int]]:
        """``find_pieces`` plus the JVMs this object just started.

        Right after fork/exec /proc/<pid>/cmdline can still be empty for a moment, so a scan
        alone could report a just-started JVM as missing.
        """
        found = find_pieces(self.layout.home)
        for name, proc in self._started.items():
            if name not in found and proc.poll() is None:
                found[name] = [proc.pid]
        return found

    def _names(self) -> list[str]:
        return [p.name for p in self.pieces]

    def _jvm_pieces(self) -> tuple[Piece, ...]:
        return tuple(p for p in self.pieces if p.kind == "jvm")

    def _piece(self, name: str) -> Piece:
        for p in self.pieces:
            if p.name == name:
                return p
        raise ValueError(f"unknown piece {name!r}; one of {self._names()}")

    def _prepare(self) -> None:
        """Jars, IDL, config: everything a start needs, none of it starting anything."""
        for host_setting in ("thrift1_host", "thrift2_host", "oracle_host"):
            host = getattr(self.settings, host_setting)
            if host not in ("127.0.0.1", "localhost", "::1"):
                self._progress(
                    f"note: CAFFEINE_{host_setting.upper()}={host} is not this machine; the local "
                    f"HBase and oracle listen on {HOST} only"
                )
        find_java()  # fail early, before a long download, if there is no JDK
        self.layout.make_dirs()
        jars.ensure_jars(self.layout, self._progress)
        jars.thrift2_idl_path(self.layout, self._progress)
        if coprocessor.wanted(self.settings):
            if not coprocessor.is_built(self.layout):
                found = self._find()
                self._rebuilt_under_running_hbase = any(p.role in HBASE_ROLES and p.name in found for p in self.pieces)
            coprocessor.ensure_jar(self.layout, self._progress)
        siteconf.write_conf(self.layout, self.settings)

    def _running_pieces(self, found: dict[str, list[int]]) -> tuple[Piece, ...]:
        settings = running_settings(self.settings, found)
        return self.pieces if settings is self.settings else pieces_for(settings)

    def _check_mode(self, found: dict[str, list[int]]) -> None:
        conflict = mode_conflict(self.settings, self.pieces, found, self.layout.home)
        if conflict:
            raise LocalHBaseError(conflict)

    def _check_ports_distinct(self) -> None:
        clashes = port_clashes(self.pieces)
        if clashes:
            raise LocalHBaseError("the settings give one port to two servers:\n  " + "\n  ".join(clashes))

    def _server_logs(self) -> str:
        """Where the region servers log: the one HBase log standalone, every one's otherwise."""
        if self.settings.regionservers > 0:
            return f"the region servers' logs ({self.layout.logs_dir}/regionserver-*.log)"
        return str(self.layout.log_file("hbase"))

    def _check_single(self, found: dict[str, list[int]]) -> None:
        dup = {n: pids for n, pids in found.items() if len(pids) > 1 and n in self._names()}
        if dup:
            raise LocalHBaseError(
                "more than one JVM per piece runs under this home: "
                + "; ".join(f"{n}: pids {pids}" for n, pids in dup.items())
                + "; run `caffeine down` and start again"
            )

    def _preflight(self, pieces: list[Piece]) -> None:
        """Refuse to start if any port of ``pieces`` is held (by anything), saying by whom."""
        taken = ports_in_use(pieces, self._names())
        if taken is not None:
            raise taken

    def _start(self, piece: Piece) -> None:
        log = self.layout.log_file(piece.name)
        if piece.kind == "jvm":
            # The region servers load the coprocessor: its jar goes on the classpath of HBase's
            # servers only (hbase-site.xml registers it exactly when it is there, see
            # siteconf), the master's too: it reads the same hbase-site.xml.
            loads = piece.role in HBASE_ROLES and piece.role != "zookeeper"
            extra = (coprocessor.jar_path(self.layout),) if loads and coprocessor.wanted(self.settings) else ()
            cmd = java_command(self.layout, piece.name, piece.heap, piece.main_class, piece.args, extra_classpath=extra)
            env = None
        else:
            cmd = python_command(self.layout, piece.name, piece.main_class, piece.args)
            env = oracle_env(self.settings, self.layout.thrift2_idl)
        proc = spawn(cmd, log, self.layout.pid_file(piece.name), cwd=self.layout.home, env=env)
        self._started[piece.name] = proc
        ports = ", ".join(f"{p.label} {p.number}" for p in piece.ports)
        self._progress(f"started {piece.name}: pid {proc.pid}, ports {ports}, log {log}")

    def _wait_healthy(self, started: set[str], pieces: tuple[Piece, ...]) -> Status:
        return wait_healthy(self.settings, self.layout, pieces, started,
                            find=self._find, spawned=self._started, progress=self._progress)
