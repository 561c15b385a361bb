"""The batch job on a Spark standalone cluster (``caffeine spark up``), an executor killed mid-job.

A master and two workers (1 core each) start from the installed PySpark under a runtime home
of the test's own, on free loopback ports, while pages are fed into ``repository`` and the
observer chain indexes them. Then ``caffeine verify --master spark://127.0.0.1:<port>`` runs as
a child process: its batch job runs on the cluster, executors reading HBase in their own
processes. As soon as an executor runs a task (it has a Python worker), the test SIGKILLs that
executor's JVM. Spark notices the lost executor, the master starts a new one, the lost tasks
(and the lost shuffle and cached blocks) are recomputed, and the output must still equal the
incremental index cell by cell: verify exits 0.

Needs HBase, Java and PySpark: skipped without Java or PySpark, except under CI, where it fails.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from caffeine.config import PROJECT_ROOT
from caffeine.observers.app import application
from caffeine.percolator.worker import Worker
from caffeine.runtime.ports import cmdline
from support.ports import free_ports
from test_verify import feed, make_web, quiesce


def _require_spark() -> None:
    missing = []
    if importlib.util.find_spec("pyspark") is None:
        missing.append("PySpark")
    if not (shutil.which("java") or os.environ.get("JAVA_HOME")):
        missing.append("Java")
    if missing:
        message = f"a Spark standalone cluster needs {' and '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def _python_workers(pid: int) -> list[int]:
    """The PySpark worker processes (``-m pyspark.daemon``) a JVM started: an executor has one
    once it runs a Python task (other short-lived children of a starting JVM do not count)."""
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid and \
                    any("pyspark" in arg for arg in cmdline(int(proc.name))):
                out.append(int(proc.name))
    return out


@pytest.mark.hbase
@pytest.mark.timeout(420)
@pytest.mark.parametrize("fresh_cluster", ["hbase"], indirect=True)
def test_batch_on_standalone_cluster_survives_a_killed_executor(fresh_cluster, tmp_path):
    _require_spark()
    from caffeine.runtime.spark import EXECUTOR, StandaloneCluster

    [base] = free_ports(1, span=6)
    ports = {
        "CAFFEINE_SPARK_MASTER_PORT": base, "CAFFEINE_SPARK_MASTER_WEBUI_PORT": base + 1,
        "CAFFEINE_SPARK_WORKER_PORT": base + 2, "CAFFEINE_SPARK_WORKER_WEBUI_PORT": base + 4,
    }
    home = tmp_path / "home"
    settings = fresh_cluster.settings.model_copy(update={
        "home": home, "spark_workers": 2, "spark_worker_cores": 1,
        **{k[len("CAFFEINE_"):].lower(): v for k, v in ports.items()}})
    spark_cluster = StandaloneCluster(settings)

    # The cluster starts while the pages are indexed.
    started: dict = {}

    def start():
        try:
            started["status"] = spark_cluster.up(workers=2)
        except BaseException as exc:  # reported by the test below
            started["error"] = exc

    starter = threading.Thread(target=start, daemon=True)
    t0 = time.monotonic()
    starter.start()
    try:
        application.install(fresh_cluster)
        with Worker(fresh_cluster, application, threads=4):
            feed(fresh_cluster, make_web(40, seed=11))
            quiesce(fresh_cluster)
        starter.join(timeout=settings.spark_startup_timeout_s + 30)
        assert "error" not in started, started.get("error")
        status = started["status"]
        assert status.alive_workers() == 2, status.render()
        assert {"spark-master", "spark-worker-1", "spark-worker-2"} <= set(status.pieces), status.render()
        print(f"cluster and index ready after {time.monotonic() - t0:.1f}s", file=sys.stderr)

        env = {k: v for k, v in os.environ.items() if not k.startswith("CAFFEINE_SPARK_")}
        env.update({k: str(v) for k, v in ports.items()})
        env.update(CAFFEINE_HOME=str(home), CAFFEINE_TABLE_PREFIX=settings.table_prefix,
                   PYTHONPATH=os.pathsep.join(p for p in (str(PROJECT_ROOT), env.get("PYTHONPATH")) if p))
        t1 = time.monotonic()
        job = subprocess.Popen(
            [sys.executable, "-m", "caffeine.commands", "verify", "--no-wait", "--partitions", "4",
             "--master", spark_cluster.master_url],
            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # An executor that has a Python worker runs (or ran) a task of the job.
            victim = None
            deadline = time.monotonic() + 180
            while victim is None and job.poll() is None and time.monotonic() < deadline:
                for pid in spark_cluster.pieces().get(EXECUTOR, []):
                    if _python_workers(pid):
                        victim = pid
                        break
                else:
                    time.sleep(0.2)
            assert victim is not None, "no executor ran a task before the job ended"
            os.kill(victim, signal.SIGKILL)
            killed_at = time.monotonic() - t1
            out, err = job.communicate(timeout=300)
        finally:
            if job.poll() is None:
                job.kill()
                job.communicate()
        print(f"executor {victim} killed {killed_at:.1f}s into the job, which took "
              f"{time.monotonic() - t1:.1f}s", file=sys.stderr)
        assert job.returncode == 0, f"verify failed ({job.returncode}):\n{out}\n{err[-4000:]}"
        # The master saw the executor die (the driver, at log level ERROR, says so only when a
        # task was lost with it: a kill between two tasks leaves no line there).
        master_log = (home / "logs" / "spark-master.log").read_text(errors="replace")
        assert "because it is EXITED" in master_log, \
            f"the master did not record the killed executor:\n{master_log[-4000:]}\n{err[-2000:]}"
        # The master replaced the executor: the job finished with a new one beside the other.
        executor_dirs = [d for d in (home / "spark" / "work").glob("app-*/*") if d.is_dir()]
        assert len(executor_dirs) >= 3, executor_dirs
    finally:
        starter.join(timeout=settings.spark_startup_timeout_s + 30)
        stopped = spark_cluster.down()
        assert not spark_cluster.pieces(), f"left running: {spark_cluster.pieces()} (stopped {stopped})"
