"""Tests of caffeine.runtime, the local HBase and timestamp oracle that `caffeine up` starts.

Everything except the test marked ``hbase`` runs without Java, Maven or HBase: configuration
generation, the Docker files' consistency with the local path, jar-folder checks, port-conflict
detection, process bookkeeping (stand-in processes carrying our markers), the oracle's command
line and environment, an external oracle (a stand-in speaking the oracle's status protocol,
active or standby), which oracles ``up`` starts and waits for, and log excerpts. The ``hbase`` test expects the runtime described by the CAFFEINE_*
environment to be running (the CI script runs `caffeine up` first); with nothing running it is
skipped, or fails when CI=true, like the suite's other HBase tests.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from contextlib import contextmanager
from pathlib import Path

import pytest

from caffeine.config import Settings, load_settings
from caffeine.oracle.wire import NOT_ACTIVE_ANSWER
from caffeine.runtime import jars, siteconf
from caffeine.runtime.catalogue import ORACLE_MODULE, oracle_env, pieces_for, thrift2_in_regionserver
from caffeine.runtime.diagnostics import relevant_log_lines
from caffeine.runtime.errors import PortInUse
from caffeine.runtime.home import Layout
from caffeine.runtime.local import LocalHBase
from caffeine.runtime.ports import describe_pid, listener_pids, port_accepts, port_is_free
from caffeine.runtime.process import (
    JVM_FLAGS,
    find_pieces,
    java_command,
    pid_alive,
    python_command,
    spawn,
    strip_markers,
    terminate,
)
from support import ROOT
from support.ports import free_ports
from support.stand_ins import stand_ins

DOCKER = ROOT / "docker" / "hbase"


def site_dict(xml_text: str) -> dict[str, str]:
    root = ET.fromstring(xml_text.split("\n", 1)[1] if xml_text.startswith("<?xml") else xml_text)
    return {p.findtext("name"): p.findtext("value") for p in root.iter("property")}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for a home under tmp_path, on ports nothing listens on."""
    names = ("zookeeper_port", "master_port", "regionserver_port", "thrift1_port",
             "thrift2_port", "thrift1_info_port", "thrift2_info_port", "oracle_port", "oracle_standby_port")
    return Settings(home=tmp_path / "home", **dict(zip(names, free_ports(len(names)))))


# -- hbase-site.xml -----------------------------------------------------------------------


def test_hbase_site_has_the_keys_and_project_local_absolute_paths(settings: Settings) -> None:
    layout = Layout.from_settings(settings)
    conf = siteconf.write_conf(layout, settings)
    props = site_dict((conf / "hbase-site.xml").read_text())
    home = layout.home

    assert props["hbase.cluster.distributed"] == "false"
    assert props["hbase.rootdir"] == f"file://{home}/data/hbase"
    for key in ("hbase.tmp.dir", "hbase.zookeeper.property.dataDir"):
        path = Path(props[key])
        assert path.is_absolute() and path.is_relative_to(home), (key, path)
    assert Path(props["hbase.zookeeper.property.dataDir"]).is_relative_to(home / "data")
    assert Path(props["hbase.tmp.dir"]).is_relative_to(home / "tmp")
    # The ports come from the settings, so a second instance can run beside the first.
    assert props["hbase.zookeeper.property.clientPort"] == str(settings.zookeeper_port)
    assert props["hbase.master.port"] == str(settings.master_port)
    assert props["hbase.regionserver.port"] == str(settings.regionserver_port)
    assert props["hbase.thrift.info.bindAddress"] == "127.0.0.1"
    assert props["hbase.master.info.port"] == "-1"
    assert props["hbase.regionserver.info.port"] == "-1"
    for key, value in {
        "hbase.unsafe.stream.capability.enforce": "false",
        "hbase.wal.provider": "filesystem",
        "hbase.master.hostname": "localhost",
        "hbase.unsafe.regionserver.hostname": "localhost",
        "hbase.defaults.for.version.skip": "true",
        "hbase.zookeeper.quorum": "localhost",
    }.items():
        assert props[key] == value, key
    # Nothing points at /tmp or anywhere outside the home.
    for key, value in props.items():
        if "/" in value:
            assert str(home) in value, (key, value)

    log4j = (conf / "log4j2.properties").read_text()
    assert "rootLogger" in log4j


def test_relative_home_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    layout = Layout.from_settings(Settings(home=Path("rel-home")))
    assert layout.home == tmp_path / "rel-home"
    assert siteconf.for_settings(Settings(home=Path("rel-home")))["hbase.rootdir"].startswith(f"file://{tmp_path}/")


def test_write_conf_is_idempotent(settings: Settings) -> None:
    layout = Layout.from_settings(settings)
    siteconf.write_conf(layout, settings)
    before = layout.hbase_site.stat().st_mtime_ns
    siteconf.write_conf(layout, settings)
    assert layout.hbase_site.stat().st_mtime_ns == before


def test_xml_comment_cannot_break_the_file() -> None:
    # Hadoop's parser rejects a whole hbase-site.xml whose comment contains "--".
    with pytest.raises(ValueError):
        siteconf.render_hbase_site({"a": "b"}, header="run with --docker")


# -- Docker consistency ---------------------------------------------------------------------


def test_docker_hbase_site_is_generated_from_the_same_code() -> None:
    committed = (DOCKER / "hbase-site.xml").read_text()
    assert committed == siteconf.render_hbase_site(siteconf.for_docker(), header=siteconf.DOCKER_HEADER), (
        "regenerate: python -m caffeine.runtime.siteconf docker > docker/hbase/hbase-site.xml"
    )
    docker = site_dict(committed)
    # The image runs HBase's Thrift2 server in a JVM of its own (docker/hbase/entrypoint.sh).
    local = siteconf.for_settings(Settings(thrift2_server="separate"))
    assert list(docker) == list(local)  # same keys, same order
    assert docker["hbase.zookeeper.property.clientPort"] == "2181"
    assert docker["hbase.master.port"] == "16000"
    assert docker["hbase.regionserver.port"] == "16020"


def test_docker_jvm_flags_match_the_local_ones() -> None:
    tokens = []
    for line in (DOCKER / "jvm.flags").read_text().splitlines():
        if not line.strip().startswith("#"):
            tokens += line.split()
    assert tokens == list(JVM_FLAGS)


def test_docker_uses_the_same_pom_ports_and_servers() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "COPY caffeine/runtime/pom.xml pom.xml" in dockerfile
    assert "COPY caffeine/runtime/log4j2.properties" in dockerfile
    assert "dependency:copy-dependencies -DincludeScope=runtime" in dockerfile
    entry = (DOCKER / "entrypoint.sh").read_text()
    for server, port, info in (("thrift.ThriftServer", 9090, 9095), ("thrift2.ThriftServer", 9091, 9096)):
        assert server in entry
        assert f"-p {port} --infoport {info} -threadpool" in entry
    assert "HMaster stop --shutDownCluster" in entry
    compose = (DOCKER / "docker-compose.yml").read_text()
    for port in (2181, 9090, 9095, 9091, 9096, 16000, 16010, 16020, 16030):
        assert f'"127.0.0.1:{port}:{port}"' in compose
    assert 'HBASE_VERSION: "2.6.1"' in compose
    assert Settings().hbase_version == "2.6.1"


def test_docker_runs_the_oracle_against_the_hbase_service() -> None:
    dockerfile = (DOCKER / "Dockerfile").read_text()
    assert "FROM eclipse-temurin:17-jre AS hbase" in dockerfile
    assert "FROM python:3.11-slim AS caffeine" in dockerfile
    # Python's Thrift2 IDL comes from the very jar the hbase image runs.
    assert "COPY --from=jars /build/lib/hbase-thrift-${HBASE_VERSION}.jar" in dockerfile
    assert "org/apache/hadoop/hbase/thrift2/hbase.thrift" in dockerfile
    assert "CAFFEINE_THRIFT2_IDL=/opt/caffeine/hbase.thrift" in dockerfile
    compose = (DOCKER / "docker-compose.yml").read_text()
    hbase, oracle = compose.split("\n  oracle:\n")
    assert "target: hbase" in hbase and "target: caffeine" in oracle
    # The settings' defaults (not the environment's values: CI may move the local ports).
    defaults = Settings.model_construct(**{name: f.default for name, f in Settings.model_fields.items()})
    assert f'"python", "-m", "caffeine.oracle", "--host", "0.0.0.0", "--port", "{defaults.oracle_port}"' in oracle
    assert f'"127.0.0.1:{defaults.oracle_port}:{defaults.oracle_port}"' in oracle
    for line in ("CAFFEINE_THRIFT1_HOST: hbase", 'CAFFEINE_THRIFT1_PORT: "9090"', "CAFFEINE_THRIFT2_HOST: hbase",
                 'CAFFEINE_THRIFT2_PORT: "9091"', f'CAFFEINE_ORACLE_BLOCK_MS: "{defaults.oracle_block_ms}"',
                 f'CAFFEINE_TABLE_PREFIX: "{defaults.table_prefix}"'):
        assert line in oracle, line
    # Started after HBase, and (as its dependent) stopped before it, like `caffeine up/down`.
    assert "depends_on:\n      hbase:\n        condition: service_healthy" in oracle
    assert (ROOT / "docker" / "hbase" / "Dockerfile.dockerignore").read_text().count("\nvar\n") == 1


def test_docker_runs_workers_and_the_search_service_too() -> None:
    import yaml

    from caffeine.commands.cli import build_parser

    services = yaml.safe_load((DOCKER / "docker-compose.yml").read_text())["services"]
    assert set(services) == {"hbase", "oracle", "worker", "search"}
    oracle = services["oracle"]
    parser = build_parser()
    for name, command in (("worker", "worker"), ("search", "serve")):
        service = services[name]
        assert service["image"] == oracle["image"]
        assert service["command"][:2] == ["caffeine", command]
        parser.parse_args(service["command"][1:])  # the options exist (exit 2 if not)
        # Everything the oracle is told about HBase, and where the oracle is.
        assert {k: v for k, v in service["environment"].items() if k != "CAFFEINE_ORACLE_HOST"} == oracle["environment"]
        assert service["environment"]["CAFFEINE_ORACLE_HOST"] == "oracle"
        assert service["depends_on"] == {"oracle": {"condition": "service_healthy"}}
    assert parser.parse_args(services["worker"]["command"][1:]).metrics_port == 9300
    assert "127.0.0.1:8000:8000" in services["search"]["ports"]
    dockerfile = (DOCKER / "Dockerfile").read_text()
    for package in ("caffeine", "crawler", "api", "spark"):
        assert f"COPY {package} ./{package}" in dockerfile


# -- jars -------------------------------------------------------------------------------------


def test_pom_excludes_what_breaks_the_runtime() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    pom = ET.fromstring(jars.pom_text())
    deps = {d.findtext("m:artifactId", namespaces=ns): d for d in pom.iterfind(".//m:dependencies/m:dependency", ns)}
    for artifact in ("hbase-server", "hbase-thrift", "hbase-zookeeper"):
        assert deps[artifact].findtext("m:version", namespaces=ns) == "${hbase.version}"
        excluded = {
            (e.findtext("m:groupId", namespaces=ns), e.findtext("m:artifactId", namespaces=ns))
            for e in deps[artifact].iterfind(".//m:exclusion", ns)
        }
        for pair in (("javax.servlet", "servlet-api"), ("org.mortbay.jetty", "*"), ("ch.qos.reload4j", "reload4j"),
                     ("org.slf4j", "slf4j-reload4j"), ("org.slf4j", "slf4j-log4j12"), ("log4j", "log4j"),
                     ("ch.qos.logback", "logback-classic")):
            assert pair in excluded, (artifact, pair)
    for artifact in ("log4j-api", "log4j-core", "log4j-slf4j-impl", "log4j-1.2-api", "jul-to-slf4j"):
        assert artifact in deps


def test_lib_folder_check(tmp_path: Path) -> None:
    for name in jars.required_jars("2.6.1"):
        (tmp_path / name).touch()
    (tmp_path / "hbase-shaded-netty-4.1.9.jar").touch()
    (tmp_path / "log4j-1.2-api-2.17.2.jar").touch()
    assert jars.check_lib_folder(tmp_path, "2.6.1") == []
    (tmp_path / "servlet-api-2.5.jar").touch()
    (tmp_path / "hbase-client-2.5.0.jar").touch()
    (tmp_path / "hbase-thrift-2.6.1.jar").unlink()
    problems = " ".join(jars.check_lib_folder(tmp_path, "2.6.1"))
    assert "missing hbase-thrift-2.6.1.jar" in problems
    assert "unwanted servlet-api-2.5.jar" in problems
    assert "foreign HBase jar hbase-client-2.5.0.jar" in problems


def test_marker_decides_completeness(settings: Settings) -> None:
    layout = Layout.from_settings(settings)
    layout.lib_dir.mkdir(parents=True)
    assert not jars.is_complete(layout)
    marker = layout.lib_dir / jars.MARKER_NAME
    marker.write_text(json.dumps(jars._marker_payload(layout.hbase_version)))
    assert jars.is_complete(layout)
    # A marker written for another pom (or version) means "resolve again".
    marker.write_text(json.dumps({"hbase_version": layout.hbase_version, "pom_sha256": "old"}))
    assert not jars.is_complete(layout)


# -- ports ------------------------------------------------------------------------------------


def test_port_probes() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert not port_is_free(port)
        assert port_accepts(port)
        assert os.getpid() in listener_pids(port)
    assert port_is_free(port)
    assert not port_accepts(port)


@pytest.mark.parametrize("answer, expected", [
    ("CAFFEINE-STEP row={row} PROBE 2\n", (True, "a probe put to t was refused with PROBE 2 (wire protocol 2)")),
    (None, (False, "a probe put to t applied (nothing refused it)")),
    ("NoSuchColumnFamilyException: g\nat ...", (None, "the probe put to t failed: NoSuchColumnFamilyException: g")),
], ids=["refused", "applied", "failed"])
def test_the_coprocessor_status_sends_the_row_step_probe(monkeypatch: pytest.MonkeyPatch, answer, expected) -> None:
    """``caffeine status`` asks with the one row-step probe (the row and request the commit
    backends send), as one Thrift2 put, and reads the answer as they do."""
    from caffeine.runtime import health
    from caffeine.storage.idl import PACKAGED_IDL
    from caffeine.storage.probe import PROBE, PROBE_ROW
    from caffeine.storage.thrift2 import load_thrift2

    hb = load_thrift2(str(PACKAGED_IDL))
    puts = []

    class Client:
        def tableExists(self, name):
            return True

        def put(self, table, tput):
            puts.append((table, tput))
            if answer is not None:
                raise hb.TIOError(message=answer.format(row=PROBE_ROW.hex()).encode())

    @contextmanager
    def client(*args):
        yield Client()

    monkeypatch.setattr(health, "_thrift2_client", client)
    assert health.coprocessor_loaded("127.0.0.1", 1, PACKAGED_IDL, "t") == expected
    ((table, tput),) = puts
    assert (table, tput.row, tput.attributes) == (b"t", PROBE_ROW, dict(PROBE.attributes))


def test_port_taken_by_a_foreign_process_is_reported_before_starting(settings: Settings) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(settings.thrift1_port), "--bind", "127.0.0.1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while not port_accepts(settings.thrift1_port) and time.monotonic() < deadline:
            time.sleep(0.1)
        local = LocalHBase(settings, progress=lambda msg: None)
        local.check_ports(["hbase", "oracle"])  # unaffected pieces pass
        with pytest.raises(PortInUse) as err:
            local.check_ports()
        message = str(err.value)
        assert f"port {settings.thrift1_port} (thrift1: Thrift1)" in message
        assert f"pid {server.pid}" in message and "http.server" in message
        assert "CAFFEINE_THRIFT1_PORT" in message
        assert "nothing was started" in message
        assert [(label, port) for label, port, _ in err.value.conflicts] == [("thrift1 Thrift1", settings.thrift1_port)]
        # status() sees the foreign listener but does not take it for our Thrift1 server.
        st = local.status(probe_timeout_s=1)
        assert not st.piece("thrift1").running
        assert "taken by another process" in st.piece("thrift1").detail
    finally:
        server.terminate()
        server.wait()


def test_each_piece_has_distinct_ports_from_settings(settings: Settings) -> None:
    # By default the standalone HBase's region server answers Thrift2: one of its ports.
    pieces = pieces_for(settings)
    assert [p.name for p in pieces] == ["hbase", "thrift1", "oracle", "standby"]
    assert [(port.number, port.setting) for port in pieces[0].ports][-1] == (settings.thrift2_port, "thrift2_port")
    assert len({port.number for p in pieces for port in p.ports}) == 8
    # Start order; `down` goes in reverse, so the oracles stop first (while HBase can still
    # take the write that hands the lease back) and start last (they need HBase), the standby
    # after the oracle (which so normally serves) and before it on the way down.
    pieces = pieces_for(settings.model_copy(update={"thrift2_server": "separate"}))
    assert [p.name for p in pieces] == ["hbase", "thrift1", "thrift2", "oracle", "standby"]
    assert [p.kind for p in pieces] == ["jvm", "jvm", "jvm", "python", "python"]
    numbers = [port.number for p in pieces for port in p.ports]
    assert len(set(numbers)) == 9 and settings.thrift2_port not in [port.number for port in pieces[0].ports]
    thrift2 = pieces[2]
    assert thrift2.main_class == "org.apache.hadoop.hbase.thrift2.ThriftServer"
    assert thrift2.args == ("-b", "127.0.0.1", "-p", str(settings.thrift2_port), "--infoport",
                            str(settings.thrift2_info_port), "-threadpool", "start")
    oracle, standby = pieces[3:]
    assert oracle.main_class == standby.main_class == ORACLE_MODULE == "caffeine.runtime.oracle_main"
    # Both wait for a lease the other holds: whichever holds it serves.
    assert oracle.args == ("--host", "127.0.0.1", "--port", str(settings.oracle_port), "--standby")
    assert standby.args == ("--host", "127.0.0.1", "--port", str(settings.oracle_standby_port), "--standby")
    assert [(port.number, port.setting) for port in oracle.ports] == [(settings.oracle_port, "oracle_port")]
    assert [(port.number, port.setting) for port in standby.ports] == [(settings.oracle_standby_port,
                                                                        "oracle_standby_port")]
    # No standby: the one oracle refuses to start beside a live one, as it always did.
    alone = pieces_for(settings.model_copy(update={"oracle_standby_port": 0}))
    assert [p.name for p in alone] == ["hbase", "thrift1", "oracle"]
    assert alone[2].args == ("--host", "127.0.0.1", "--port", str(settings.oracle_port))
    # By default the standby sits one port below the oracle (clients look there too).
    derived = settings.model_copy(update={"oracle_standby_port": None})
    assert pieces_for(derived)[-1].service_port.number == settings.oracle_port - 1


# -- processes --------------------------------------------------------------------------------


def test_java_command(settings: Settings) -> None:
    layout = Layout.from_settings(settings)
    cmd = java_command(layout, "thrift1", "384m", "org.example.Main", ["a"], java="/usr/bin/java")
    assert cmd[:2] == ["/usr/bin/java", "-Xmx384m"]
    assert cmd[-2:] == ["org.example.Main", "a"]
    assert cmd[cmd.index("-cp") + 1] == f"{layout.home}/conf:{layout.home}/lib/hbase-2.6.1/*"
    assert f"-Djava.io.tmpdir={layout.home}/tmp" in cmd
    assert f"-Dlog4j2.configurationFile={layout.home}/conf/log4j2.properties" in cmd
    assert f"-Dcaffeine.home={layout.home}" in cmd and "-Dcaffeine.piece=thrift1" in cmd
    assert "--add-opens" in cmd and "java.base/java.nio=ALL-UNNAMED" in cmd


def test_spawn_find_and_terminate(tmp_path: Path) -> None:
    home = tmp_path / "home"
    # A stand-in for a JVM: any process carrying our marker properties counts as ours.
    cmd = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)",
           f"-Dcaffeine.home={home}", "-Dcaffeine.piece=thrift1"]
    log, pid_file = tmp_path / "logs" / "thrift1.log", tmp_path / "run" / "thrift1.pid"
    log.parent.mkdir()
    log.write_text("previous run\n")
    proc = spawn(cmd, log, pid_file, cwd=tmp_path)
    try:
        assert int(pid_file.read_text()) == proc.pid
        assert (tmp_path / "logs" / "thrift1.log.1").read_text() == "previous run\n"  # rotated
        deadline = time.monotonic() + 10
        while find_pieces(home) != {"thrift1": [proc.pid]} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert find_pieces(home) == {"thrift1": [proc.pid]}
        assert find_pieces(tmp_path / "other-home") == {}
        assert os.getsid(proc.pid) == proc.pid  # detached: its own session
        assert "-Dcaffeine.home=" in describe_pid(proc.pid)
    finally:
        terminate(proc.pid, "thrift1", 10, lambda msg: None)
    assert not pid_alive(proc.pid)
    assert find_pieces(home) == {}


def test_terminate_escalates_to_sigkill(tmp_path: Path) -> None:
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(120)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    said: list[str] = []
    terminate(proc.pid, "stubborn", 0.5, said.append)
    assert not pid_alive(proc.pid)
    assert said and "SIGKILL" in said[0]


def test_status_when_nothing_runs(settings: Settings) -> None:
    st = LocalHBase(settings, progress=lambda msg: None).status(probe_timeout_s=1)
    assert not st.healthy and not st.any_running
    assert [p.state for p in st.pieces] == ["stopped"] * 4
    assert st.piece("standby").log == Layout.from_settings(settings).home / "logs" / "standby.log"
    assert st.piece("oracle").log == Layout.from_settings(settings).home / "logs" / "oracle.log"
    text = st.render()
    assert "not running" in text and str(Layout.from_settings(settings).hbase_root_dir) in text


def test_down_when_nothing_runs_is_harmless(settings: Settings) -> None:
    said: list[str] = []
    LocalHBase(settings, progress=said.append).down()
    LocalHBase(settings, progress=said.append).down()
    assert said == [f"nothing running under {Layout.from_settings(settings).home}"] * 2


def test_relevant_log_lines_picks_the_error(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    lines = [f"2026 INFO line {i}" for i in range(100)]
    lines += ["2026 ERROR [main] thrift.ThriftServer: Cannot run ThriftServer",
              "java.net.BindException: Port in use: 127.0.0.1:9095", "\tat x.y(Z.java:1)"]
    lines += [f"2026 INFO after {i}" for i in range(3)]
    log.write_text("\n".join(lines) + "\n")
    got = relevant_log_lines(log)
    assert len(got) <= 20
    assert any("Cannot run ThriftServer" in line for line in got)
    assert got[-1] == "2026 INFO after 2"
    assert relevant_log_lines(tmp_path / "missing.log") == []


# -- the oracle and its standby, the fourth and fifth pieces -----------------------------------


def test_oracle_command_carries_the_runtime_markers(settings: Settings) -> None:
    layout = Layout.from_settings(settings)
    oracle = next(p for p in pieces_for(settings) if p.name == "oracle")
    cmd = python_command(layout, "oracle", oracle.main_class, oracle.args, python="/usr/bin/python3")
    assert cmd == ["/usr/bin/python3", "-m", "caffeine.runtime.oracle_main",
                   f"-Dcaffeine.home={layout.home}", "-Dcaffeine.piece=oracle",
                   "--host", "127.0.0.1", "--port", str(settings.oracle_port), "--standby"]
    # The entry point hands exactly the oracle's own arguments on.
    assert strip_markers(cmd[3:]) == ["--host", "127.0.0.1", "--port", str(settings.oracle_port), "--standby"]
    assert python_command(layout, "oracle", "m")[0] == sys.executable


def test_oracle_main_runs_the_oracle_cli_without_the_markers(monkeypatch: pytest.MonkeyPatch) -> None:
    import caffeine.oracle.__main__ as oracle_cli
    from caffeine.runtime import oracle_main

    seen: list[list[str]] = []
    monkeypatch.setattr(oracle_cli, "main", lambda argv: seen.append(argv) or 7)
    assert oracle_main.main(["-Dcaffeine.home=/x", "-Dcaffeine.piece=oracle", "--port", "1"]) == 7
    assert seen == [["--port", "1"]]


def test_oracle_env_pins_every_setting(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    # Settings passed explicitly (as tests and later commands do) reach the oracle process:
    # its environment rebuilds exactly them, with the IDL already extracted, except that the
    # oracle's tables live under the runtime's prefix, not the starting command's: the one
    # oracle serves every prefix, and dropping one prefix's tables must not stop it.
    idl = Path("/somewhere/idl/hbase.thrift")
    base = {"PATH": "/bin", "PYTHONPATH": "/other", "CAFFEINE_TABLE_PREFIX": "stale_", "CAFFEINE_THRIFT2_IDL": "x"}
    settings = settings.model_copy(update={"table_prefix": "mine_", "runtime_table_prefix": "rt_",
                                           "oracle_block_ms": 1234})
    env = oracle_env(settings, idl, base=base)
    assert env["PATH"] == "/bin" and env["PYTHONUNBUFFERED"] == "1"
    assert env["CAFFEINE_TABLE_PREFIX"] == "rt_" and env["CAFFEINE_ORACLE_BLOCK_MS"] == "1234"
    assert env["CAFFEINE_RUNTIME_TABLE_PREFIX"] == "rt_"
    assert env["CAFFEINE_THRIFT2_IDL"] == str(idl)
    # The same code as the parent: this checkout first on the path.
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/other"]
    for key in [k for k in os.environ if k.upper().startswith("CAFFEINE_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith("CAFFEINE_"):
            monkeypatch.setenv(key, value)
    assert load_settings() == settings.model_copy(update={"thrift2_idl": str(idl), "table_prefix": "rt_"})
    assert base["CAFFEINE_TABLE_PREFIX"] == "stale_"  # the caller's dict is left alone


@contextmanager
def fake_oracle(port: int, answer: bool | str = True):
    """A stand-in on ``port``: answers the oracle's status request (4 bytes in, 8 out), with
    ``answer="standby"`` refuses it as a standby does, or, with ``answer=False``, accepts and
    closes at once like a process that speaks something else."""
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                if answer:
                    conn.settimeout(2)
                    try:
                        if len(conn.recv(4)) == 4:
                            conn.sendall(NOT_ACTIVE_ANSWER if answer == "standby" else struct.pack(">Q", 42 << 18))
                    except OSError:
                        pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_an_oracle_started_by_hand_is_used_not_duplicated_nor_stopped(settings: Settings) -> None:
    local = LocalHBase(settings, progress=lambda msg: None)
    with fake_oracle(settings.oracle_port):
        local.check_ports(["oracle"])  # not a conflict: `up` uses it
        st = local.status(probe_timeout_s=1)
        oracle = st.piece("oracle")
        assert (oracle.state, oracle.healthy, oracle.running) == ("external", True, False)
        assert os.getpid() in oracle.foreign_pids
        assert "active: status() answered: next timestamp 11010048" in oracle.detail
        assert "not started by `caffeine up`" in oracle.detail
        assert st.piece("standby").state == "stopped"
        text = st.render()
        assert f"pid {os.getpid()}" in text and "its own: not started under this home" in text
        said: list[str] = []
        LocalHBase(settings, progress=said.append).down()
        assert said == [f"nothing running under {Layout.from_settings(settings).home}"]
        assert local.status(probe_timeout_s=1).piece("oracle").healthy  # left running
        with pytest.raises(Exception, match="not started by `caffeine up`"):
            local.restart_oracle()


def test_a_foreign_process_on_the_oracle_port_is_a_conflict_before_anything_starts(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = LocalHBase(settings, progress=lambda msg: None)
    started: list[str] = []
    monkeypatch.setattr(local, "_prepare", lambda: None)  # no jars or Java needed to get this far
    monkeypatch.setattr(local, "_start", lambda piece: started.append(piece.name))
    with fake_oracle(settings.oracle_port, answer=False):
        with pytest.raises(PortInUse) as err:
            local.up()
        message = str(err.value)
        assert f"port {settings.oracle_port} (oracle: oracle) is in use by pid {os.getpid()}" in message
        assert "CAFFEINE_ORACLE_PORT" in message and "nothing was started" in message
        assert started == []
        st = local.status(probe_timeout_s=1)
        assert st.piece("oracle").state == "stopped"
        assert "does not answer as an oracle" in st.piece("oracle").detail


def test_status_says_which_oracle_serves_and_standbys_without_an_active_one_are_not_healthy(
    settings: Settings,
) -> None:
    local = LocalHBase(settings, progress=lambda msg: None)
    with fake_oracle(settings.oracle_port, answer="standby"), fake_oracle(settings.oracle_standby_port):
        st = local.status(probe_timeout_s=1)
        oracle, standby = st.piece("oracle"), st.piece("standby")
        assert (oracle.state, oracle.healthy, standby.state, standby.healthy) == ("external", True, "external", True)
        assert oracle.detail.startswith("standby: refuses requests until it takes over the lease")
        assert standby.detail.startswith("active: status() answered")
    with fake_oracle(settings.oracle_port, answer="standby"), fake_oracle(settings.oracle_standby_port, answer="standby"):
        st = local.status(probe_timeout_s=1)
        for name in ("oracle", "standby"):
            assert not st.piece(name).healthy and "no oracle is active yet" in st.piece(name).detail


class UpRecorder:
    """``LocalHBase.up`` with the machine stood in: ``found`` runs, ``external`` answers on
    oracle ports; records what it starts and which pieces each wait covers."""

    def __init__(self, settings: Settings, monkeypatch: pytest.MonkeyPatch, found: dict, external: dict):
        import caffeine.runtime.local as local_module

        self.local = LocalHBase(settings, progress=lambda msg: None)
        self.started: list[str] = []
        self.waits: list[tuple[set, list[str]]] = []
        running = dict(found)

        def start(piece):
            self.started.append(piece.name)
            running[piece.name] = [1]

        def wait(started, pieces):
            self.waits.append((set(started), [p.name for p in pieces]))
            return local_module.Status(self.local.layout, [])

        monkeypatch.setattr(self.local, "_prepare", lambda: None)
        monkeypatch.setattr(self.local, "_preflight", lambda pieces: None)
        monkeypatch.setattr(self.local, "_find", lambda: dict(running))
        monkeypatch.setattr(self.local, "_start", start)
        monkeypatch.setattr(self.local, "_wait_healthy", wait)
        monkeypatch.setattr(local_module, "external_oracle", lambda settings, piece: external.get(piece.name))
        monkeypatch.setattr(local_module, "coprocessor_status", lambda *a: None)
        monkeypatch.setattr(local_module, "survey", lambda *a: local_module.Status(self.local.layout, []))


def test_up_starts_the_oracle_then_its_standby_each_waited_for_with_the_oracles_running(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    jvms = ["hbase", "thrift1"]
    fresh = UpRecorder(settings, monkeypatch, found={}, external={})
    fresh.local.up()
    assert fresh.started == [*jvms, "oracle", "standby"]
    assert fresh.waits == [(set(jvms), jvms), ({"oracle"}, [*jvms, "oracle"]),
                           ({"standby"}, [*jvms, "oracle", "standby"]), (set(), [*jvms, "oracle", "standby"])]
    # The oracle died and its standby serves: only the oracle starts (it comes back as the
    # standby), and is waited for beside the one that serves.
    after_crash = UpRecorder(settings, monkeypatch, found={n: [1] for n in [*jvms, "standby"]}, external={})
    after_crash.local.up()
    assert after_crash.started == ["oracle"]
    assert after_crash.waits[1] == ({"oracle"}, [*jvms, "oracle", "standby"])


def test_up_starts_no_oracle_of_its_own_beside_an_external_one(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = UpRecorder(settings, monkeypatch, found={n: [1] for n in ("hbase", "thrift1")},
                          external={"oracle": "pid 1: caffeine oracle"})
    recorder.local.up()
    # A standby of ours beside it might keep another high-water mark: clients would mix the two.
    assert recorder.started == []


def test_down_stops_the_standby_and_the_oracle_first_then_thrift2_thrift1_hbase(settings: Settings,
                                                                               tmp_path: Path) -> None:
    # Stand-ins for all five pieces, found by their markers like the real ones (HBase's ports
    # do not answer, so it gets SIGTERM rather than `HMaster stop`).
    home = Layout.from_settings(settings).home
    order = tmp_path / "order"
    procs = stand_ins(home, order, ["hbase", "oracle", "thrift1", "thrift2", "standby"])
    try:
        assert set(find_pieces(home)) == {"hbase", "thrift1", "thrift2", "oracle", "standby"}
        said: list[str] = []
        LocalHBase(settings, progress=said.append).down()
        assert order.read_text().split() == ["standby", "oracle", "thrift2", "thrift1", "hbase"]
        assert said[:4] == [f"stopping standby (pid {procs[4].pid})", "standby stopped",
                            f"stopping oracle (pid {procs[1].pid})", "oracle stopped"]
        assert find_pieces(home) == {}
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


# -- against a running HBase --------------------------------------------------------------------


@pytest.mark.hbase
def test_running_local_hbase_is_healthy() -> None:
    local = LocalHBase(load_settings(), progress=lambda msg: None)
    st = local.status()
    # The suite's convention (tests/conftest.py): no HBase at all fails under CI, where the
    # script ran `caffeine up` first, and skips on a developer's machine. Running but
    # unhealthy always fails.
    if not st.any_running and os.environ.get("CI") != "true":
        pytest.skip("the local HBase is not running; start it with `caffeine up`")
    assert st.healthy, "start it first with `caffeine up`:\n" + st.render()
    oracles = ["oracle", "standby"] if local.settings.standby_port else ["oracle"]
    thrift2 = [] if thrift2_in_regionserver(local.settings) else ["thrift2"]  # else a port of `hbase`
    assert [p.name for p in st.pieces] == ["hbase", "thrift1", *thrift2, *oracles]
    assert all(len(p.pids) == 1 for p in st.pieces if p.name not in oracles)
    for name in oracles:
        oracle = st.piece(name)
        # `caffeine up` started it (one process of ours), or one started by hand answers on the port.
        assert len(oracle.pids) == 1 or (oracle.external and not oracle.pids), st.render()
        if os.environ.get("CI") == "true":
            assert not oracle.external, "under CI, `caffeine up` runs the oracles:\n" + st.render()
    # Exactly one of them serves; the other stands by.
    assert sorted(st.piece(n).detail.split(":")[0] for n in oracles) == (["active", "standby"] if len(oracles) == 2
                                                                         else ["active"]), st.render()
    assert local.thrift2_idl_path().is_file()
