"""A Spark standalone cluster on this machine: one master and N workers from the installed PySpark.

Layer: runtime. Imports ``caffeine.config``, ``caffeine.errors`` and the runtime's own
``home``, ``ports`` and ``process``; never imports PySpark (it only finds its launcher).
``caffeine spark up|down|status`` drive it (``caffeine.commands.runtime``); the batch job
(``spark.job``) asks ``executor_conf`` how a driver on this machine uses it.

PyPI's PySpark ships ``pyspark/bin/spark-class`` but not Spark's ``sbin`` scripts, so the
daemons are started the way ``sbin/start-master.sh`` and ``start-worker.sh`` would, in the
foreground of a detached process (``caffeine.runtime.process.spawn``)::

    spark-class org.apache.spark.deploy.master.Master --host 127.0.0.1 --port P --webui-port U
    spark-class org.apache.spark.deploy.worker.Worker spark://127.0.0.1:P --host 127.0.0.1 \\
        --port Wi --webui-port WUi --cores C --memory M --work-dir <home>/spark/work

``spark-class`` execs the JVM, so the spawned pid is the daemon itself. Everything binds and
advertises loopback (``SPARK_LOCAL_IP=127.0.0.1``, ``--host 127.0.0.1``; executors inherit the
worker's environment; the master's REST submission server is off). Every daemon carries the
runtime's marker arguments (``-Dcaffeine.home=<home> -Dcaffeine.piece=spark-master`` /
``spark-worker-<i>``, through ``SPARK_DAEMON_JAVA_OPTS``), and a job whose driver uses
``executor_conf`` marks its executors the same way (``spark-executor``, through
``spark.executor.extraJavaOptions``), so ``down``, a failed ``up`` and .ci/run's last-resort
clean-up find all of them, pid files or not. Files, all under the runtime home::

    <home>/logs/spark-master.log, spark-worker-<i>.log   the daemons' output
    <home>/spark/work/<app>/<executor>/stderr            each executor's output
    <home>/spark/local/                                  shuffle and spill files
    <home>/run/spark-*.pid

Ports are settings (``CAFFEINE_SPARK_MASTER_PORT``, ``..._MASTER_WEBUI_PORT``,
``..._WORKER_PORT``, ``..._WORKER_WEBUI_PORT``: worker i uses the base + i - 1).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from caffeine.config import PROJECT_ROOT, Settings
from caffeine.errors import CaffeineError
from caffeine.runtime.home import Layout
from caffeine.runtime.ports import describe_pids, listener_pids, port_accepts, port_is_free
from caffeine.runtime.process import HOME_MARKER, PIECE_MARKER, find_pieces, pid_alive, spawn, terminate, wait_reaped

MASTER = "spark-master"
WORKER = "spark-worker"  # spark-worker-1, spark-worker-2, ...
EXECUTOR = "spark-executor"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
LOOPBACK = "127.0.0.1"

Progress = Callable[[str], None]


class SparkClusterError(CaffeineError):
    pass


def spark_class() -> Path:
    """``pyspark/bin/spark-class`` of the installed PySpark (found, not imported)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkClusterError(
            "the Spark cluster runs the installed PySpark, and PySpark is not installed: "
            "pip install 'caffeine[spark]'"
        )
    path = Path(list(spec.submodule_search_locations)[0]).resolve() / "bin" / "spark-class"
    if not path.is_file():
        raise SparkClusterError(f"{path} not found: this PySpark has no launcher scripts")
    return path


def master_url(settings: Settings) -> str:
    return f"spark://{LOOPBACK}:{settings.spark_master_port}"


def is_local_master(settings: Settings, master: str | None) -> bool:
    """Whether ``master`` names this machine's standalone master (``caffeine spark up``'s)."""
    if not master or not master.startswith("spark://"):
        return False
    host, _, port = master[len("spark://"):].rstrip("/").rpartition(":")
    return host in (LOOPBACK, "localhost") and port == str(settings.spark_master_port)


def executor_conf(settings: Settings, master: str | None) -> dict[str, str]:
    """Spark settings of a driver on this machine whose executors run on a standalone master
    here: everything on loopback, executors that import this checkout's caffeine (``PYTHONPATH``)
    and, on ``caffeine spark up``'s master, the runtime's markers on the executor JVMs and
    ``spark_executor_memory``. Empty for other masters."""
    if not master or not master.startswith("spark://"):
        return {}
    host = master[len("spark://"):].rsplit(":", 1)[0]
    if host not in (LOOPBACK, "localhost"):
        return {}
    home = Layout.from_settings(settings).home
    conf = {
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        # Executors start this interpreter's Python workers (PYSPARK_PYTHON is the driver's),
        # which find caffeine and spark/ on this path.
        "spark.executorEnv.PYTHONPATH": os.pathsep.join(
            p for p in (str(PROJECT_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    }
    if is_local_master(settings, master):
        conf["spark.executor.memory"] = settings.spark_executor_memory
        conf["spark.executor.extraJavaOptions"] = (
            f"{HOME_MARKER}{home} {PIECE_MARKER}{EXECUTOR} -Djava.io.tmpdir={home / 'tmp'}")
    return conf


@dataclass
class ClusterStatus:
    home: Path
    master_url: str
    webui: str
    pieces: dict[str, list[int]]
    workers: list[dict] = field(default_factory=list)  # the master's view (its JSON)
    apps: list[dict] = field(default_factory=list)
    error: str | None = None  # why the master's view is missing

    @property
    def running(self) -> bool:
        return MASTER in self.pieces

    def alive_workers(self) -> int:
        return sum(1 for w in self.workers if w.get("state") == "ALIVE")

    def render(self) -> str:
        lines = [f"Spark standalone cluster in {self.home}"]
        if not self.pieces:
            return lines[0] + ": stopped"
        for piece in sorted(self.pieces, key=_piece_order):
            pids = ", ".join(map(str, self.pieces[piece]))
            lines.append(f"  {piece:<16} pid {pids:<14} log {self.home / 'logs' / (piece + '.log')}"
                         if piece != EXECUTOR else f"  {piece:<16} pid {pids:<14} (a job's executors)")
        if self.running:
            lines.append(f"  master {self.master_url}, web UI {self.webui}")
        if self.error:
            lines.append(f"  master's view unavailable: {self.error}")
        for w in self.workers:
            lines.append(f"  worker {w.get('host')}:{w.get('port')} {w.get('state')}: "
                         f"{w.get('coresused', 0)}/{w.get('cores')} cores, "
                         f"{w.get('memoryused', 0)}/{w.get('memory')} MB used")
        for app in self.apps:
            lines.append(f"  application {app.get('id')} {app.get('name')}: {app.get('state')}, "
                         f"{app.get('cores')} cores")
        return "\n".join(lines)


def _piece_order(piece: str) -> tuple:
    if piece == MASTER:
        return (0, 0)
    if piece.startswith(WORKER + "-") and piece[len(WORKER) + 1:].isdigit():
        return (1, int(piece[len(WORKER) + 1:]))
    return (2, piece)


class StandaloneCluster:
    """The master and workers of one runtime home."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.layout = Layout.from_settings(settings)
        self.home = self.layout.home
        self.spark_dir = self.home / "spark"
        self.work_dir = self.spark_dir / "work"
        self.local_dir = self.spark_dir / "local"

    @property
    def master_url(self) -> str:
        return master_url(self.settings)

    @property
    def webui(self) -> str:
        return f"http://{LOOPBACK}:{self.settings.spark_master_webui_port}"

    def pieces(self) -> dict[str, list[int]]:
        """Running Spark processes of this home by piece name (master, workers, executors)."""
        return {k: v for k, v in find_pieces(self.home).items() if k.startswith("spark-")}

    def master_state(self, timeout: float = 3.0) -> dict:
        """The master's own view: its web UI's JSON (workers, applications)."""
        with urllib.request.urlopen(f"{self.webui}/json/", timeout=timeout) as reply:
            return json.load(reply)

    def status(self) -> ClusterStatus:
        st = ClusterStatus(self.home, self.master_url, self.webui, self.pieces())
        if st.running:
            try:
                state = self.master_state()
                st.workers = state.get("workers", [])
                st.apps = state.get("activeapps", [])
            except OSError as exc:
                st.error = str(exc)
        return st

    # -- starting ----------------------------------------------------------------------------

    def _env(self, piece: str) -> dict[str, str]:
        # The daemons' environment is their executors' too: no CAFFEINE_* of the shell that ran
        # `caffeine spark up` (the driver ships its settings with each job; spark/hbase_io.py).
        env = {k: v for k, v in os.environ.items() if not k.startswith("CAFFEINE_")}
        env.update(
            SPARK_LOCAL_IP=LOOPBACK,
            SPARK_LOCAL_HOSTNAME=LOOPBACK,
            SPARK_PUBLIC_DNS=LOOPBACK,
            SPARK_NO_DAEMONIZE="1",
            SPARK_LOG_DIR=str(self.layout.logs_dir),
            SPARK_WORKER_DIR=str(self.work_dir),
            SPARK_LOCAL_DIRS=str(self.local_dir),
            SPARK_DAEMON_MEMORY=self.settings.spark_daemon_heap,
            # The master's REST submission server (port 6066) is not needed: jobs come from
            # drivers on this machine, in client mode.
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
            SPARK_DAEMON_JAVA_OPTS=(f"{HOME_MARKER}{self.home} {PIECE_MARKER}{piece} "
                                    f"-Djava.io.tmpdir={self.layout.tmp_dir}"),
        )
        return env

    def _spawn(self, piece: str, args: list[str]) -> int:
        for d in (self.layout.logs_dir, self.layout.run_dir, self.layout.tmp_dir, self.work_dir, self.local_dir):
            d.mkdir(parents=True, exist_ok=True)
        proc = spawn([str(spark_class()), *args], self.layout.log_file(piece), self.layout.pid_file(piece),
                     cwd=self.spark_dir, env=self._env(piece))
        return proc.pid

    def _check_free(self, ports: dict[int, str]) -> None:
        for port, what in ports.items():
            if not port_is_free(port, LOOPBACK):
                raise SparkClusterError(
                    f"port {port} ({what}) is in use by {describe_pids(listener_pids(port))}: "
                    f"stop it or move the port (CAFFEINE_SPARK_*_PORT)")

    def up(self, workers: int | None = None, progress: Progress = lambda line: None) -> ClusterStatus:
        """Start the master and ``workers`` workers (those not running yet); wait until the master
        lists every worker alive. On failure, stop what this call started and raise."""
        n = self.settings.spark_workers if workers is None else workers
        if n < 1:
            raise SparkClusterError("a cluster needs at least one worker")
        s = self.settings
        t0 = time.monotonic()
        running = self.pieces()
        started: list[tuple[str, int]] = []
        try:
            if MASTER not in running:
                self._check_free({s.spark_master_port: "Spark master", s.spark_master_webui_port: "its web UI"})
                progress(f"starting the Spark master on {self.master_url}")
                started.append((MASTER, self._spawn(MASTER, [
                    MASTER_CLASS, "--host", LOOPBACK, "--port", str(s.spark_master_port),
                    "--webui-port", str(s.spark_master_webui_port)])))
            self._wait(lambda: port_accepts(s.spark_master_port) and port_accepts(s.spark_master_webui_port),
                       "the Spark master to listen", MASTER, started)
            for i in range(1, n + 1):
                piece = f"{WORKER}-{i}"
                if piece in running:
                    continue
                port, ui = s.spark_worker_port + i - 1, s.spark_worker_webui_port + i - 1
                self._check_free({port: f"Spark worker {i}", ui: f"worker {i}'s web UI"})
                progress(f"starting Spark worker {i} ({s.spark_worker_cores} cores, {s.spark_worker_memory})")
                started.append((piece, self._spawn(piece, [
                    WORKER_CLASS, self.master_url, "--host", LOOPBACK, "--port", str(port),
                    "--webui-port", str(ui), "--cores", str(s.spark_worker_cores),
                    "--memory", s.spark_worker_memory, "--work-dir", str(self.work_dir)])))
            self._wait(lambda: self._alive_workers() >= n, f"{n} workers to register with the master",
                       None, started)
        except BaseException:
            for piece, pid in reversed(started):
                terminate(pid, piece, self.settings.shutdown_timeout_s, progress)
            wait_reaped([pid for _, pid in started])
            raise
        progress(f"Spark cluster up in {time.monotonic() - t0:.1f}s")
        return self.status()

    def _alive_workers(self) -> int:
        try:
            return sum(1 for w in self.master_state().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):
            return 0

    def _wait(self, ready: Callable[[], bool], what: str, piece: str | None, started) -> None:
        deadline = time.monotonic() + self.settings.spark_startup_timeout_s
        while not ready():
            gone = [p for p, pid in started if not pid_alive(pid)]  # bash until spark-class execs
            if gone:
                raise SparkClusterError(f"{gone[0]} exited while waiting for {what}: see "
                                        f"{self.layout.log_file(gone[0])}")
            if time.monotonic() > deadline:
                log = self.layout.log_file(piece or MASTER)
                raise SparkClusterError(f"timed out after {self.settings.spark_startup_timeout_s:.0f}s "
                                        f"waiting for {what}: see {log}")
            time.sleep(0.3)

    # -- stopping ----------------------------------------------------------------------------

    def down(self, progress: Progress = lambda line: None) -> list[str]:
        """Stop every Spark process of this home: workers (which stop their executors), the
        master, then any executor left. Returns the pieces stopped."""
        stopped = []
        pieces = self.pieces()
        order = sorted(pieces, key=lambda p: (p == EXECUTOR, p == MASTER, _piece_order(p)))
        for piece in order + ([EXECUTOR] if EXECUTOR not in order else []):
            pids = pieces.get(piece) if piece != EXECUTOR else self.pieces().get(EXECUTOR)
            for pid in pids or []:
                progress(f"stopping {piece} (pid {pid})")
                terminate(pid, piece, self.settings.shutdown_timeout_s, progress)
                stopped.append(piece)
                wait_reaped([pid])
            pid_file = self.layout.pid_file(piece)
            if pid_file.exists():
                pid_file.unlink()
        return stopped
