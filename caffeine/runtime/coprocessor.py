"""Caffeine's HBase coprocessor jar: built from the repository's ``coprocessor/`` Maven module.

Layer: runtime. The coprocessor (``org.caffeine.hbase.PercolatorRowSteps``, a RegionObserver)
checks the Percolator protocol's row steps inside the region server; see coprocessor/README.md.
Contract:

- ``sources_dir()`` is the Maven module (``<checkout>/coprocessor``), or None when this
  ``caffeine`` package was installed without the repository (a wheel): the jar is built from a
  checkout only.
- ``wanted(settings)`` says whether the local HBase should load it: ``Settings.coprocessor``
  ``off`` never, ``on`` always (an error if the sources are missing), ``auto`` (the default)
  when the sources are there.
- ``ensure_jar(layout)`` returns ``<home>/lib/caffeine-coprocessor/caffeine-coprocessor.jar``,
  building it first if needed with ``mvn -B -q package`` (a few seconds; the first build also
  downloads Maven's plugins and HBase's API jars into ~/.m2). Cached like HBase's jars
  (``jars.py``): the folder counts as built only when its marker file names the same sources
  hash (pom.xml and every file under src/, plus the HBase version), so an edited source or an
  interrupted build is built again, never half-used; Maven builds in a scratch copy of the
  module under ``<home>/lib/.coprocessor-build`` (nothing is written into the checkout), the
  jar lands in a ``.partial`` folder renamed into place, and a file lock keeps two concurrent
  ``caffeine up`` from building at once. A running HBase keeps the jar it opened; a rebuilt
  jar is loaded by its next start.
- ``site_properties(thrift2_port)`` are the hbase-site.xml keys that register it for every
  table, and with a port the region server's own Thrift2 endpoint (``RegionServerThrift2``).
- ``check_thrift2_server(settings)`` refuses a region server Thrift2 endpoint where it cannot
  serve (``catalogue.thrift2_in_regionserver``): the cluster mode, no coprocessor.

Failures raise ``LocalHBaseError`` with Maven's last output lines.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from caffeine.config import PROJECT_ROOT, Settings
from caffeine.runtime import jars
from caffeine.runtime.catalogue import thrift2_in_regionserver
from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.home import Layout

OBSERVER_CLASS = "org.caffeine.hbase.PercolatorRowSteps"
# The region server's own Thrift2 endpoint (``Settings.thrift2_server``) and the
# hbase-site.xml keys it reads (RegionServerThrift2.java).
THRIFT2_CLASS = "org.caffeine.hbase.RegionServerThrift2"
THRIFT2_PORT_KEY = "caffeine.regionserver.thrift2.port"
THRIFT2_HOST_KEY = "caffeine.regionserver.thrift2.host"
JAR_NAME = "caffeine-coprocessor.jar"
# What `mvn package` produces (coprocessor/pom.xml: artifactId and version "1").
BUILT_JAR = "caffeine-coprocessor-1.jar"
MARKER_NAME = ".caffeine-complete"
MODES = ("auto", "on", "off")

Progress = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def sources_dir() -> Path | None:
    """The coprocessor's Maven module in the checkout this package runs from, if there is one."""
    d = PROJECT_ROOT / "coprocessor"
    return d if (d / "pom.xml").is_file() and (d / "src").is_dir() else None


def wanted(settings: Settings) -> bool:
    """Whether the local HBase should load the coprocessor (see the module docstring)."""
    mode = settings.coprocessor
    if mode not in MODES:
        raise LocalHBaseError(f"CAFFEINE_COPROCESSOR={mode!r}: expected one of {', '.join(MODES)}")
    if mode == "off":
        return False
    if sources_dir() is None:
        if mode == "on":
            raise LocalHBaseError(
                f"CAFFEINE_COPROCESSOR=on, but the coprocessor's sources are not at {PROJECT_ROOT / 'coprocessor'}: "
                "it is built from a checkout of the repository (or set CAFFEINE_COPROCESSOR=off)"
            )
        return False
    return True


def site_properties(thrift2_port: int = 0, thrift2_host: str = "127.0.0.1") -> dict[str, str]:
    """hbase-site.xml keys that load the coprocessor into every region of every table, and
    with ``thrift2_port`` the region server's own Thrift2 endpoint on ``thrift2_host``."""
    props = {"hbase.coprocessor.region.classes": OBSERVER_CLASS}
    if thrift2_port:
        props.update({"hbase.coprocessor.regionserver.classes": THRIFT2_CLASS,
                      THRIFT2_PORT_KEY: str(thrift2_port), THRIFT2_HOST_KEY: thrift2_host})
    return props


def check_thrift2_server(settings: Settings) -> None:
    """``LocalHBaseError`` when the region server is to answer Thrift2
    (``catalogue.thrift2_in_regionserver``) where it cannot: without the coprocessor jar (the
    endpoint is a class of it), or in the cluster mode (several region servers, one port)."""
    if not thrift2_in_regionserver(settings):
        return
    if settings.regionservers > 0:
        raise LocalHBaseError(
            "CAFFEINE_THRIFT2_SERVER=regionserver is for the standalone HBase: in the cluster mode Thrift2 runs "
            "in a JVM of its own (set CAFFEINE_THRIFT2_SERVER=separate or auto)"
        )
    if not wanted(settings):
        asked = ("CAFFEINE_THRIFT2_SERVER=regionserver" if settings.thrift2_server == "regionserver"
                 else "By default (CAFFEINE_THRIFT2_SERVER=auto) the standalone HBase's region server")
        raise LocalHBaseError(
            f"{asked} answers Thrift2 itself, which needs Caffeine's coprocessor jar, built from the "
            f"repository's coprocessor/ (not found at {PROJECT_ROOT / 'coprocessor'}): run from a checkout, "
            "or set CAFFEINE_THRIFT2_SERVER=separate for HBase's Thrift2 server in a JVM of its own"
        )


def jar_dir(layout: Layout) -> Path:
    return layout.lib_root / "caffeine-coprocessor"


def jar_path(layout: Layout) -> Path:
    return jar_dir(layout) / JAR_NAME


def sources_hash(src: Path, hbase_version: str) -> str:
    """sha256 over pom.xml and every file under src/ (relative path and content), and the version."""
    h = hashlib.sha256()
    h.update(f"hbase {hbase_version}\n".encode())
    files = [src / "pom.xml", *sorted(p for p in (src / "src").rglob("*") if p.is_file())]
    for p in files:
        rel = p.relative_to(src).as_posix().encode()
        data = p.read_bytes()
        h.update(len(rel).to_bytes(4, "big") + rel + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def is_built(layout: Layout, src: Path | None = None) -> bool:
    """True if the cached jar was built from the current sources for this HBase version."""
    src = src or sources_dir()
    if src is None:
        return False
    try:
        recorded = json.loads((jar_dir(layout) / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return False
    return (
        recorded.get("sources_sha256") == sources_hash(src, layout.hbase_version)
        and jar_path(layout).is_file()
    )


def ensure_jar(layout: Layout, progress: Progress = _stderr) -> Path:
    """The coprocessor jar built from the current sources, building it if needed."""
    src = sources_dir()
    if src is None:
        raise LocalHBaseError(f"the coprocessor's sources are not at {PROJECT_ROOT / 'coprocessor'}")
    if is_built(layout, src):
        return jar_path(layout)
    layout.lib_root.mkdir(parents=True, exist_ok=True)
    with jars._lock(layout.lib_root / ".coprocessor.lock"):
        if is_built(layout, src):  # built by another process while we waited
            return jar_path(layout)
        _build(layout, src, progress)
    return jar_path(layout)


def _build(layout: Layout, src: Path, progress: Progress) -> None:
    digest = sources_hash(src, layout.hbase_version)
    target = jar_dir(layout)
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    # Build in a scratch copy, so Maven's target/ never lands in the checkout (or in a
    # read-only install); the copy is refreshed each time.
    work = layout.lib_root / ".coprocessor-build"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src, work, ignore=shutil.ignore_patterns("target"))
    layout.logs_dir.mkdir(parents=True, exist_ok=True)
    log_path = layout.logs_dir / "maven-coprocessor.log"
    cmd = [
        jars.find_mvn(),
        "-B",
        "-q",
        "-Dstyle.color=never",
        "-f",
        str(work / "pom.xml"),
        "package",
        "-DskipTests",
        f"-Dhbase.version={layout.hbase_version}",
    ]
    progress(f"Building the Caffeine coprocessor jar from {src} (once per source change)")
    progress(f"  $ {' '.join(cmd)}")
    started = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=work)
        try:
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    built = work / "target" / BUILT_JAR
    if rc != 0 or not built.is_file():
        last = "\n".join("    " + jars._ANSI.sub("", line) for line in jars.tail_lines(log_path, 25) if line.strip())
        raise LocalHBaseError(
            f"Maven failed (exit code {rc}) building the coprocessor jar.\n"
            f"  command: {' '.join(cmd)}\n  full output: {log_path}\n  last lines:\n{last}"
        )
    partial.mkdir(parents=True)
    shutil.copy2(built, partial / JAR_NAME)
    payload = {"sources_sha256": digest, "hbase_version": layout.hbase_version, "built_at": time.time()}
    (partial / MARKER_NAME).write_text(json.dumps(payload, indent=2) + "\n")
    # A running HBase keeps the old jar open (its inode outlives the unlink), so replacing
    # the folder under it is safe; it loads the new jar when it next starts.
    shutil.rmtree(target, ignore_errors=True)
    os.replace(partial, target)
    shutil.rmtree(work, ignore_errors=True)
    progress(f"  built {jar_path(layout)} in {time.monotonic() - started:.0f}s")
