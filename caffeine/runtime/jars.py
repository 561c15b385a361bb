"""HBase's jars from Maven Central, cached per version under ``<home>/lib``; the Thrift2 IDL.

Layer: runtime. Contract:

- ``ensure_jars(layout)`` returns ``<home>/lib/hbase-<version>``, a folder holding the complete
  runtime classpath of that HBase version (use it as ``"<dir>/*"``). The first call runs
  ``mvn -B -q dependency:copy-dependencies -DincludeScope=runtime`` on the packaged ``pom.xml``
  (progress on stderr, a minute or two on an empty ~/.m2); later calls return at once. The
  folder counts as complete only when its marker file exists and names the same pom and
  version, so an interrupted download, or an edited pom, is resolved again, never half-used.
  Maven writes into a ``.partial`` folder that is renamed into place only after it checked out,
  and a file lock keeps two concurrent ``caffeine up`` from resolving at the same time.
- ``thrift2_idl_path(layout)`` returns the Thrift2 IDL (``hbase.thrift``) extracted from the
  hbase-thrift jar of that version, resolving the jars first if needed. Nothing is started.

Failures raise ``LocalHBaseError`` saying what failed, with Maven's last output lines.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Callable, Iterator

from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.home import Layout

MARKER_NAME = ".caffeine-complete"
THRIFT2_IDL_IN_JAR = "org/apache/hadoop/hbase/thrift2/hbase.thrift"

# Jars whose presence in the folder would break the runtime (see the comments in pom.xml):
# a second SLF4J binding, or Hadoop 2's servlet 2.5 API / Jetty 6 that kill the Thrift info
# servers with NoSuchMethodError ServletContext.createFilter.
FORBIDDEN_PREFIXES = (
    "servlet-api-2.",
    "jetty-6.",
    "jetty-util-6.",
    "jetty-sslengine-6.",
    "reload4j-",
    "slf4j-reload4j-",
    "slf4j-log4j12-",
    "logback-classic-",
    "log4j-1.2.",  # log4j 1.x itself (log4j-1.2-api-*, the bridge to log4j2, is wanted)
)

Progress = Callable[[str], None]
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def pom_text() -> str:
    """The packaged pom.xml (the same file docker/hbase copies)."""
    return resources.files("caffeine.runtime").joinpath("pom.xml").read_text(encoding="utf-8")


def required_jars(version: str) -> tuple[str, ...]:
    """File names that a complete lib folder of ``version`` must contain."""
    return (
        f"hbase-server-{version}.jar",
        f"hbase-thrift-{version}.jar",
        f"hbase-zookeeper-{version}.jar",
        "log4j-core-2.17.2.jar",
        "log4j-slf4j-impl-2.17.2.jar",
        "jul-to-slf4j-1.7.33.jar",
        # The servlet 3.1 API the shaded Jetty 9 of the info servers needs.
        "javax.servlet-api-3.1.0.jar",
    )


def check_lib_folder(folder: Path, version: str) -> list[str]:
    """Problems with a resolved lib folder (empty list: usable)."""
    names = {p.name for p in folder.glob("*.jar")}
    problems = [f"missing {n}" for n in required_jars(version) if n not in names]
    problems += [
        f"unwanted {n} (excluded in pom.xml; it breaks logging or the Thrift info servers)"
        for n in sorted(names)
        if n.startswith(FORBIDDEN_PREFIXES)
    ]
    # Two HBase versions in one classpath fail in confusing ways: refuse the folder.
    problems += [
        f"foreign HBase jar {n}"
        for n in sorted(names)
        if n.startswith("hbase-")
        # hbase-thirdparty (hbase-shaded-*, hbase-unsafe) is versioned on its own (4.1.x).
        and not n.startswith(("hbase-shaded-", "hbase-unsafe-"))
        and not n.endswith(f"-{version}.jar")
    ]
    return problems


def _marker_payload(version: str) -> dict:
    return {
        "hbase_version": version,
        "pom_sha256": hashlib.sha256(pom_text().encode("utf-8")).hexdigest(),
    }


def is_complete(layout: Layout) -> bool:
    """True if ``layout.lib_dir`` was fully resolved from the current pom for this version."""
    marker = layout.lib_dir / MARKER_NAME
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    expected = _marker_payload(layout.hbase_version)
    return all(recorded.get(k) == v for k, v in expected.items())


@contextmanager
def _lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def tail_lines(path: Path, n: int) -> list[str]:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 256 * 1024))
            data = fh.read()
    except OSError:
        return []
    return data.decode("utf-8", "replace").splitlines()[-n:]


def find_mvn() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise LocalHBaseError(
            "Maven (mvn) is not on PATH; it is needed once to download HBase's jars from "
            "Maven Central (Debian/Ubuntu: apt-get install maven)"
        )
    return mvn


def ensure_jars(layout: Layout, progress: Progress = _stderr) -> Path:
    """Return the complete lib folder for ``layout.hbase_version``, resolving it if needed."""
    if is_complete(layout):
        return layout.lib_dir
    layout.lib_root.mkdir(parents=True, exist_ok=True)
    with _lock(layout.lib_root / ".lock"):
        # Another process may have finished the download while we waited for the lock.
        if is_complete(layout):
            return layout.lib_dir
        _resolve(layout, progress)
    return layout.lib_dir


def _resolve(layout: Layout, progress: Progress) -> None:
    version = layout.hbase_version
    target = layout.lib_dir
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    # Maven runs on a copy of the pom outside the source tree, so nothing (target/, etc.)
    # is ever written into the package.
    work = layout.lib_root / ".maven"
    work.mkdir(parents=True, exist_ok=True)
    pom = work / "pom.xml"
    pom.write_text(pom_text(), encoding="utf-8")
    layout.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = layout.logs_dir / f"maven-hbase-{version}.log"
    cmd = [
        find_mvn(),
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-f",
        str(pom),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={partial}",
        f"-Dhbase.version={version}",
    ]
    progress(
        f"Resolving HBase {version} jars with Maven into {target} "
        "(first time only; downloads into ~/.m2 can take a few minutes)"
    )
    progress(f"  $ {' '.join(cmd)}")
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        next_report = started + 10
        try:
            while True:
                try:
                    rc = proc.wait(timeout=1.0)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if time.monotonic() >= next_report:
                    # -q keeps Maven silent, so report what has landed so far.
                    count = len(list(partial.glob("*.jar"))) if partial.is_dir() else 0
                    progress(f"  ... still resolving ({time.monotonic() - started:.0f}s, {count} jars copied so far)")
                    next_report += 10
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        # Maven colours its output even in batch mode on some versions: strip the escapes.
        last = "\n".join("    " + _ANSI.sub("", line) for line in tail_lines(log_path, 25) if _ANSI.sub("", line).strip())
        raise LocalHBaseError(
            f"Maven failed (exit code {rc}) resolving HBase {version} jars.\n"
            f"  command: {' '.join(cmd)}\n  full output: {log_path}\n  last lines:\n{last}"
        )
    problems = check_lib_folder(partial, version)
    if problems:
        raise LocalHBaseError(
            f"Maven finished but the jar folder {partial} is not usable: " + "; ".join(problems)
        )
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    payload = dict(_marker_payload(version), jars=len(list(target.glob("*.jar"))), resolved_at=time.time())
    (target / MARKER_NAME).write_text(json.dumps(payload, indent=2) + "\n")
    progress(f"  resolved {payload['jars']} jars in {time.monotonic() - started:.0f}s")


def thrift2_idl_path(layout: Layout, progress: Progress = _stderr) -> Path:
    """Path of the Thrift2 IDL of this HBase version, extracted from its hbase-thrift jar.

    Resolves the jars first if they are not cached; starts nothing. Load it with
    ``caffeine.storage.thrift2.load_thrift2``.
    """
    dest = layout.thrift2_idl
    jar = layout.lib_dir / f"hbase-thrift-{layout.hbase_version}.jar"
    if dest.is_file() and is_complete(layout):
        return dest
    ensure_jars(layout, progress)
    with zipfile.ZipFile(jar) as zf:
        try:
            data = zf.read(THRIFT2_IDL_IN_JAR)
        except KeyError:
            raise LocalHBaseError(f"{jar} does not contain {THRIFT2_IDL_IN_JAR}") from None
    dest.parent.mkdir(parents=True, exist_ok=True)
    # Write-then-rename: a concurrent reader never sees a half-written IDL.
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, dest)
    return dest
