"""Start, find and stop the local runtime's processes: the HBase JVMs and the timestamp oracle.

Layer: runtime. Contract:

- ``java_command(...)`` builds the full ``java`` command line of one piece: the JDK 17 flags
  HBase needs (``JVM_FLAGS``, the same list docker/hbase/jvm.flags holds), heap, project-local
  tmp dir and log4j2 config, classpath ``"<home>/conf:<lib>/*"`` (plus, for HBase itself, the
  coprocessor jar when it is loaded), and two marker properties
  ``-Dcaffeine.home=<home> -Dcaffeine.piece=<name>`` that identify the process as ours.
- ``python_command(...)`` is the same for a Python piece (the timestamp oracle):
  ``<this interpreter> -m <module> -Dcaffeine.home=<home> -Dcaffeine.piece=<name> <args>``. The
  module (``caffeine.runtime.oracle_main``) drops the two marker arguments before parsing its
  own, so every process of a home, Java or Python, carries the same markers on its command line
  (``ps``/``pgrep -f -- -Dcaffeine.home=<home>`` list them all; .ci/run's last-resort clean-up
  relies on that).
- ``spawn(...)`` starts it detached (own session, like nohup: it outlives the ``caffeine``
  command and a Ctrl-C in the terminal), stdin from /dev/null, stdout+stderr appended to its
  log file (the previous run's log is kept as ``<name>.log.1``), and writes ``<run>/<name>.pid``.
- ``find_pieces(home)`` finds our running processes by scanning /proc for those markers, so the
  answer is right even when a pid file is stale or was deleted, and a recycled pid that now
  belongs to another program is never mistaken for ours.
- ``terminate(pid, ...)`` sends SIGTERM, waits, escalates to SIGKILL after the timeout (saying
  so), and returns once the process is gone.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Callable

from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.home import Layout
from caffeine.runtime.ports import cmdline

# What bin/hbase adds on JDK 11+ (netty reflection, the opens/exports HBase's shaded libraries
# and Hadoop's Kerberos/DNS helpers use), G1, and JUL routed into SLF4J. Without them HBase
# 2.6 fails on JDK 17 with InaccessibleObjectException deep in netty or the WAL.
JVM_FLAGS: tuple[str, ...] = (
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
    "-XX:+UseG1GC",
    # A JVM that ran out of heap is useless but may linger half-alive; exiting makes
    # `caffeine status` / `up` see it as stopped and the log says why.
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.util.logging.config.class=org.apache.hadoop.hbase.logging.JulToSlf4jInitializer",
)

HOME_MARKER = "-Dcaffeine.home="
PIECE_MARKER = "-Dcaffeine.piece="

Progress = Callable[[str], None]


def find_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return str(Path(java_home) / "bin" / "java")
    java = shutil.which("java")
    if not java:
        raise LocalHBaseError("no java on PATH (and JAVA_HOME unset): HBase needs a JDK 11+; JDK 17 is tested")
    return java


def java_command(
    layout: Layout,
    piece: str,
    heap: str,
    main_class: str,
    args: list[str] | tuple[str, ...] = (),
    java: str | None = None,
    extra_classpath: tuple[Path, ...] = (),
) -> list[str]:
    """The ``java`` command of one piece; ``extra_classpath`` (jars) goes after HBase's jars."""
    classpath = ":".join([str(layout.conf_dir), f"{layout.lib_dir}/*", *(str(p) for p in extra_classpath)])
    return [
        java or find_java(),
        f"-Xmx{heap}",
        *JVM_FLAGS,
        # Jetty (the info servers) unpacks its webapps into java.io.tmpdir.
        f"-Djava.io.tmpdir={layout.tmp_dir}",
        f"-Dlog4j2.configurationFile={layout.log4j2_properties}",
        f"{HOME_MARKER}{layout.home}",
        f"{PIECE_MARKER}{piece}",
        # conf first, so hbase-site.xml is found as a classpath resource; the JVM expands "*".
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def python_command(
    layout: Layout,
    piece: str,
    module: str,
    args: list[str] | tuple[str, ...] = (),
    python: str | None = None,
) -> list[str]:
    """``python -m module`` with our marker arguments first (see the module docstring)."""
    return [
        python or sys.executable,
        "-m",
        module,
        f"{HOME_MARKER}{layout.home}",
        f"{PIECE_MARKER}{piece}",
        *args,
    ]


def strip_markers(argv: list[str]) -> list[str]:
    """``argv`` without our marker arguments (what a Python piece hands on to its real CLI)."""
    return [a for a in argv if not a.startswith((HOME_MARKER, PIECE_MARKER))]


def rotate_log(path: Path) -> None:
    """Keep the previous run's log as ``<name>.log.1`` so a fresh log holds only this run."""
    if path.exists() and path.stat().st_size > 0:
        os.replace(path, path.with_name(path.name + ".1"))


def spawn(
    cmd: list[str],
    log_path: Path,
    pid_path: Path | None,
    cwd: Path,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """Start ``cmd`` detached, output to ``log_path``; write its pid to ``pid_path``.

    ``env``: the child's whole environment (default: inherit ours).
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    rotate_log(log_path)
    with open(log_path, "ab") as log:
        stamp = datetime.now().isoformat(timespec="seconds")
        log.write(f"# {stamp} caffeine started: {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            # Own session and process group: the JVM keeps running after `caffeine up` exits
            # and does not receive the terminal's SIGINT/SIGHUP.
            start_new_session=True,
            close_fds=True,
        )
    if pid_path is not None:
        pid_path.parent.mkdir(parents=True, exist_ok=True)
        pid_path.write_text(f"{proc.pid}\n")
    return proc


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie does not count; one of our own children is reaped)."""
    try:
        # Reap it if it is our child that exited, so it does not linger as a zombie.
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie thread-group leader is not yet a dead process: a JVM whose main thread exited
    # first still has threads running and holding its sockets. The process is gone only when
    # none of its tasks is anything but a zombie.
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return True
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the task exited while we looked
        # The state letter follows the parenthesised command name.
        parts = stat.rsplit(")", 1)
        if len(parts) == 2 and parts[1].split()[:1] != ["Z"]:
            return True
    return False


def find_pieces(home: Path) -> dict[str, list[int]]:
    """Our running processes under ``home``, by piece name (normally one pid per piece)."""
    home_arg = f"{HOME_MARKER}{home}"
    found: dict[str, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        args = cmdline(int(proc.name))
        if home_arg not in args:
            continue
        piece = next((a[len(PIECE_MARKER):] for a in args if a.startswith(PIECE_MARKER)), None)
        if piece and pid_alive(int(proc.name)):
            found.setdefault(piece, []).append(int(proc.name))
    for pids in found.values():
        pids.sort()
    return found


def wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while pid_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def terminate(pid: int, name: str, timeout: float, progress: Progress) -> None:
    """SIGTERM ``pid``, wait up to ``timeout`` s, then SIGKILL (with a message); wait until gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if wait_gone(pid, timeout):
        return
    progress(f"{name} (pid {pid}) did not exit {timeout:.0f}s after SIGTERM; sending SIGKILL")
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    if not wait_gone(pid, 15):
        raise LocalHBaseError(f"{name} (pid {pid}) is still alive after SIGKILL")


def wait_reaped(pids: list[int], timeout: float = 5.0) -> None:
    """Give exited processes' parents a moment to reap them.

    A JVM started by an earlier ``caffeine up`` was re-parented to PID 1 when that command
    exited; after it dies it stays a zombie ("[java] <defunct>" in ``pgrep -af java``) until
    PID 1 reaps it, which some container/VM init processes do only periodically. It is dead
    either way (``pid_alive`` says so); this only makes ``down`` return once the process
    table is clean too.
    """
    deadline = time.monotonic() + timeout
    for pid in pids:
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            try:
                os.waitpid(pid, os.WNOHANG)  # if it is our own child, reap it ourselves
            except ChildProcessError:
                pass
            time.sleep(0.1)
