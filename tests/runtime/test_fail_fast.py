"""Against servers that do not answer, every command says within seconds which address did
not answer and what to try (``caffeine up`` / ``caffeine status``) instead of retrying in
silence; long-running commands (workers) say so and keep retrying."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from support.cli_helpers import ROOT, assert_no_stack_trace, cli_env, run_cli


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def nothing_runs(tmp_path):
    ports = {"thrift1_port": closed_port(), "thrift2_port": closed_port(), "oracle_port": closed_port()}
    return ports, cli_env(cli_log=tmp_path / "cli.log", **ports)


ONE_SHOT = [
    ["tables", "list"],
    ["inspect", "repository", "http://x/"],
    ["crawl", "http://127.0.0.1:1/"],
    ["wait"],
    ["engine"],
    ["gc"],
    ["dups"],
]


@pytest.mark.parametrize("argv", ONE_SHOT, ids=lambda a: a[0])
def test_a_command_against_closed_ports_says_which_address_and_what_to_try_within_5_s(nothing_runs, argv):
    ports, env = nothing_runs
    t0 = time.monotonic()
    result = run_cli(*argv, env=env, timeout=60)
    elapsed = time.monotonic() - t0
    assert elapsed < 5.0, f"took {elapsed:.1f}s: {result.stderr}"
    assert result.returncode == 1, result.stderr
    err = result.stderr
    assert f"127.0.0.1:{ports['thrift1_port']}" in err, err
    assert "caffeine up" in err and "caffeine status" in err, err
    assert_no_stack_trace(result.stdout + err)


@pytest.mark.hbase
def test_only_the_oracle_missing_is_named(hbase_store, tmp_path):
    port = closed_port()
    t0 = time.monotonic()
    result = run_cli("wait", env=cli_env(cli_log=tmp_path / "cli.log", oracle_port=port), timeout=60)
    assert time.monotonic() - t0 < 5.0, result.stderr
    assert result.returncode == 1
    assert f"oracle 127.0.0.1:{port}" in result.stderr and "9090" not in result.stderr.splitlines()[0], result.stderr
    assert "caffeine up" in result.stderr


def test_a_worker_says_what_does_not_answer_within_5_s_and_keeps_retrying(nothing_runs):
    ports, env = nothing_runs
    proc = subprocess.Popen([sys.executable, "-m", "caffeine.commands", "worker"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        os.set_blocking(proc.stderr.fileno(), False)
        seen = ""
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline and "caffeine status" not in seen:
            time.sleep(0.1)
            seen += (proc.stderr.read() or b"").decode()
        assert f"127.0.0.1:{ports['thrift1_port']}" in seen and "caffeine up" in seen, seen
        assert "caffeine status" in seen, seen
        time.sleep(1.0)
        assert proc.poll() is None, "the worker gave up instead of retrying"
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Forwarder:
    """A plain TCP relay from 127.0.0.1:``port`` to ``target`` (the oracle), started late."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        import threading

        self.server = socket.create_server(("127.0.0.1", port))
        self.target = target
        self.threads = [threading.Thread(target=self._accept, daemon=True)]
        self.threads[0].start()

    def _accept(self) -> None:
        import threading

        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()


def active_oracle(settings) -> tuple[str, int]:
    """The address of the runtime's oracle that serves now. Not always ``oracle_port``: when
    the active one lost its lease (HBase down longer than the lease, as in the HBase-kill
    test), the standby took over, and the oracle on ``oracle_port`` refuses as the standby."""
    from caffeine.oracle import OracleClient

    with OracleClient(settings) as client:
        return client.status_at()[1]


@pytest.mark.hbase
def test_a_worker_starts_once_the_missing_oracle_answers(hbase_store, hbase_settings, tmp_path):
    port = closed_port()
    env = cli_env(cli_log=tmp_path / "cli.log", oracle_port=port, table_prefix=hbase_settings.table_prefix)
    proc = subprocess.Popen([sys.executable, "-m", "caffeine.commands", "worker", "--threads", "1"], cwd=ROOT, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    forwarder = None
    try:
        os.set_blocking(proc.stderr.fileno(), False)
        seen = ""

        def read_until(text: str, within_s: float) -> str:
            nonlocal seen
            deadline = time.monotonic() + within_s
            while text not in seen and time.monotonic() < deadline:
                time.sleep(0.1)
                seen += (proc.stderr.read() or b"").decode()
            assert text in seen, seen
            return seen

        read_until(f"timestamp oracle 127.0.0.1:{port}", 5.0)  # (or its standby's address)
        read_until("did not answer", 1.0)
        forwarder = Forwarder(port, active_oracle(hbase_settings))
        read_until("everything answers now", 15.0)
        read_until("running", 30.0)  # the worker's own start line
        assert proc.poll() is None
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if forwarder:
            forwarder.close()


PROBE_THREADS_SEE_IMPORTS = r"""
import sys, threading
from caffeine.config import load_settings
from caffeine import preflight

missing = []
start = threading.Thread.start

def checked_start(self):
    # The probes import Thrift's modules; two threads importing them at once can die of
    # Python's import deadlock detection (_DeadlockError on thriftpy2.transport.cybase).
    if self.name.startswith("caffeine-preflight"):
        missing.extend(m for m in preflight.PROBE_MODULES if m not in sys.modules)
    return start(self)

threading.Thread.start = checked_start
preflight.probe(load_settings(oracle_port=1, thrift1_port=2, thrift2_port=3), preflight.EVERYTHING, 0.5)
print("missing:", sorted(set(missing)))
"""


def test_probe_threads_start_with_every_module_they_import_already_imported():
    """The parallel probes must not import anything themselves (a fresh interpreter each)."""
    out = subprocess.run([sys.executable, "-c", PROBE_THREADS_SEE_IMPORTS], cwd=ROOT, capture_output=True,
                         text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("missing: []"), out.stdout + out.stderr
