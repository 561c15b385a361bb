"""The oracle without a single point of failure: a standby takes over, clients follow it.

The client's failover runs against stand-ins on loopback (an active oracle's answers, a
standby's refusal, a closed port); the take-over runs real ``caffeine oracle --standby``
processes on the real HBase, under a table prefix of their own, and SIGKILLs the active one
(or pauses it past its lease) while clients fetch timestamps without pause: every thread's
timestamps strictly increase across the switch, and the longest wait is bounded.
"""

from __future__ import annotations

import contextlib
import itertools
import signal
import socket
import struct
import threading
import time
import uuid

import pytest

from caffeine.config import Settings
from caffeine.oracle import OracleClient, OracleError, OracleUnavailable
from caffeine.oracle.errors import OracleNotActive
from caffeine.oracle.wire import NOT_ACTIVE_ANSWER
from support.oracles import BLOCK_MS, OracleProcess
from support.ports import free_port, free_ports

# Lease margin of the server (caffeine.oracle.hwm.DEFAULT_LEASE_MARGIN_MS): a standby takes
# over at most BLOCK_MS + MARGIN after the active one's last renewal.
MARGIN_MS = 500


# -- the client's failover, against stand-ins ---------------------------------------------

@contextlib.contextmanager
def stand_in(answer):
    """A server on a free loopback port: ``answer(n)`` gives the bytes for a request of ``n``
    (None: hang up). Yields its address."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve(conn):
        with conn:
            while not stop.is_set():
                data = b""
                while len(data) < 4:
                    chunk = conn.recv(4 - len(data))
                    if not chunk:
                        return
                    data += chunk
                out = answer(struct.unpack(">I", data)[0])
                if out is None:
                    return
                conn.sendall(out)
                if out == NOT_ACTIVE_ANSWER:
                    return

    def accept():
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[:2]
    finally:
        stop.set()
        thread.join(5)
        listener.close()


def counting_from(start):
    counter = itertools.count(start, 1000)
    return lambda n: struct.pack(">Q", next(counter))


def standby(n):
    return NOT_ACTIVE_ANSWER


def test_the_client_skips_a_closed_port_and_a_standby_and_stays_with_the_active_oracle():
    closed = ("127.0.0.1", free_port())
    with stand_in(standby) as refusing, stand_in(counting_from(5_000)) as active:
        with OracleClient(addresses=[closed, refusing, active], deadline_s=5) as client:
            got = [client.get_timestamp() for _ in range(20)]
            assert got == sorted(set(got)) and got[0] == 5_000
            assert (client.host, client.port) == active
            assert client.connects == 2  # the standby (which refused), then the active one: kept
            assert client.status() >= 5_000


def test_a_standby_refusal_is_told_apart_from_a_timestamp_and_status_skips_it():
    with stand_in(standby) as refusing:
        client = OracleClient(addresses=[refusing], deadline_s=0.5)
        with pytest.raises(OracleNotActive, match="is a standby"):
            client.status()
        with pytest.raises(OracleUnavailable, match=f"timestamp oracle at {refusing[0]}:{refusing[1]} is not answering"):
            client.get_timestamp()
        client.close()


def test_status_says_which_address_answered_and_the_health_probe_names_it():
    """status() asks the addresses in turn without moving the client's connection; what
    answered is the active oracle's address, and that is what a probe must report."""
    from caffeine.runtime.health import probe_oracles

    with stand_in(standby) as refusing, stand_in(counting_from(5_000)) as active:
        ok, detail = probe_oracles([refusing, active], Settings(), timeout_s=2)
        assert ok and f"answered at {active[0]}:{active[1]}" in detail, detail
        with OracleClient(addresses=[refusing, active], deadline_s=5) as client:
            assert client.status_at()[1] == active


def test_the_client_fails_over_when_its_oracle_dies_and_gives_up_naming_every_address():
    answers = counting_from(5_000)
    alive = {"a": True}

    def dying(n):
        return answers(n) if alive["a"] else None

    with stand_in(dying) as a, stand_in(counting_from(1_000_000)) as b:
        with OracleClient(addresses=[a, b], deadline_s=5) as client:
            first = client.get_timestamp()
            alive["a"] = False
            after = client.get_timestamp()  # a hangs up: the same call finds b
            assert first < after == 1_000_000 and (client.host, client.port) == b
    nobody = [("127.0.0.1", port) for port in free_ports(2)]
    with OracleClient(addresses=nobody, deadline_s=0.5) as client:
        with pytest.raises(OracleUnavailable) as caught:
            client.get_timestamp()
    message = str(caught.value)
    assert f"127.0.0.1:{nobody[0][1]} or 127.0.0.1:{nobody[1][1]} is not answering" in message


def test_timestamps_that_go_back_after_a_failover_are_refused_not_handed_out():
    alive = {"a": True}
    high = counting_from(9_000_000)

    def dying(n):
        return high(n) if alive["a"] else None

    # Two oracles that do not share a high-water mark (a misconfigured address list).
    with stand_in(dying) as a, stand_in(counting_from(5_000)) as b:
        with OracleClient(addresses=[a, b], deadline_s=5) as client:
            client.get_timestamp()
            alive["a"] = False
            with pytest.raises(OracleError, match="two oracles without a shared high-water mark"):
                client.get_timestamp()


def test_the_default_addresses_are_the_oracle_then_its_standby():
    def settings(**kw):  # the defaults, whatever CAFFEINE_* this run has
        return Settings(**{"oracle_host": "127.0.0.1", "oracle_port": 9099, "oracle_standby_port": None,
                           "oracle_addresses": None, **kw})

    assert settings().oracle_endpoints == (("127.0.0.1", 9099), ("127.0.0.1", 9098))
    assert settings(oracle_port=9199).oracle_endpoints == (("127.0.0.1", 9199), ("127.0.0.1", 9198))
    assert settings(oracle_standby_port=0).oracle_endpoints == (("127.0.0.1", 9099),)
    assert settings(oracle_addresses="a:1, [::1]:2").oracle_endpoints == (("a", 1), ("::1", 2))
    with pytest.raises(ValueError, match="is not host:port"):
        settings(oracle_addresses="a:1,b")
    assert OracleClient(settings()).addresses == [("127.0.0.1", 9099), ("127.0.0.1", 9098)]
    assert OracleClient(settings(), port=9499).addresses == [("127.0.0.1", 9499)]  # explicit: one


# -- real oracles on the real HBase ------------------------------------------------------------

@pytest.fixture
def oracles(hbase_store, hbase_settings):
    """start(port, standby=...) for oracles of one deployment (a table prefix of this test's
    own); every process started is killed at the end."""
    prefix = f"{hbase_settings.table_prefix}f{uuid.uuid4().hex[:6]}_"
    started: list[OracleProcess] = []

    def start(port, **kw) -> OracleProcess:
        p = OracleProcess(prefix, port, **kw)
        started.append(p)
        return p

    yield start
    for p in started:
        p.kill()


class Fetcher:
    """Threads fetching timestamps through one client without pause, recording each call as
    (started, returned, ts) on the monotonic clock."""

    def __init__(self, client: OracleClient, threads: int = 3):
        self.client = client
        self.calls: list[list[tuple[float, float, int]]] = [[] for _ in range(threads)]
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]
        for t in self._threads:
            t.start()

    def _run(self, i):
        out = self.calls[i]
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                ts = self.client.get_timestamp()
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                self.errors.append(exc)
                return
            out.append((began, time.monotonic(), ts))
            time.sleep(0.002)

    def count(self) -> int:
        return sum(map(len, self.calls))

    def wait_for_more(self, n: int, timeout: float = 30.0) -> None:
        target = self.count() + n
        deadline = time.monotonic() + timeout
        while self.count() < target and not self.errors:
            assert time.monotonic() < deadline, f"no {n} more timestamps in {timeout} s"
            time.sleep(0.01)
        assert not self.errors, self.errors

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(30)
        assert not self.errors, self.errors

    def check(self, since: float) -> float:
        """Strictly increasing per thread, unique overall, and every call that started after
        ``since`` got more than every call that returned before it. Returns the longest time
        a thread waited for a timestamp (from its previous one's return) after ``since``."""
        everything = [ts for calls in self.calls for _, _, ts in calls]
        assert len(set(everything)) == len(everything)
        longest = 0.0
        for calls in self.calls:
            stamps = [ts for _, _, ts in calls]
            assert all(a < b for a, b in zip(stamps, stamps[1:])), "a thread's timestamps went back"
            for (_, prev_end, _), (_, end, _) in zip(calls, calls[1:]):
                if end > since:
                    longest = max(longest, end - prev_end)
        before = [ts for calls in self.calls for _, end, ts in calls if end < since]
        after = [ts for calls in self.calls for began, _, ts in calls if began > since]
        assert before and after and max(before) < min(after)
        return longest


def test_a_standby_takes_over_a_sigkilled_oracle_and_clients_follow_without_a_restart(oracles):
    """The test the failover is judged by: timestamps fetched without pause through a SIGKILL
    of the active oracle, its return, and a clean hand-over."""
    a_port, b_port = free_ports(2)
    a = oracles(a_port, standby=True).wait_listening()
    assert "took over; serving on" in a.output  # nobody held the lease: it serves at once
    b = oracles(b_port, standby=True).wait_for("standby on")
    addresses = [("127.0.0.1", a_port), ("127.0.0.1", b_port)]
    with socket.create_connection(addresses[1], timeout=5) as sock:  # the standby refuses
        sock.sendall(struct.pack(">I", 1))
        assert sock.recv(16) == NOT_ACTIVE_ANSWER and sock.recv(16) == b""

    with OracleClient(addresses=addresses, deadline_s=20) as client:
        fetcher = Fetcher(client)
        fetcher.wait_for_more(100)
        killed_at = time.monotonic()
        a.signal(signal.SIGKILL)
        b.wait_for("took over; serving on", timeout=15)
        fetcher.wait_for_more(100)

        # The killed one comes back: without --standby it refuses to start (the lease is held
        # by a live oracle), with it as a standby, never serving beside the active one.
        plain = oracles(a_port)
        assert plain.proc.wait(60) == 1
        plain.wait_for("another timestamp oracle is serving this deployment")
        a = oracles(a_port, standby=True).wait_for("standby on")
        fetcher.wait_for_more(50)
        assert "first timestamp" not in a.output
        assert (client.host, client.port) == addresses[1]

        # A clean stop hands the lease over at once.
        handed_at = time.monotonic()
        assert b.signal(signal.SIGTERM) == 0 and "high-water mark released" in b.output
        a.wait_for("took over; serving on", timeout=15)
        fetcher.wait_for_more(50)
        fetcher.stop()

    failover = fetcher.check(killed_at)
    handover = fetcher.check(handed_at)
    print(f"\nlongest wait for a timestamp: {failover:.2f} s across the SIGKILL failover (block "
          f"{BLOCK_MS} ms + margin {MARGIN_MS} ms), {handover:.2f} s across the clean hand-over; "
          f"{fetcher.count()} timestamps, {client.failovers} address switches")
    # The standby waits a block plus the margin after the last renewal it saw (renewals come
    # every block/4), then the client finds it within its backoff (0.25 s).
    assert failover < (BLOCK_MS + MARGIN_MS) / 1000 + 1.5, failover
    assert handover < 1.5, handover


def test_a_paused_oracle_that_lost_its_lease_steps_down_and_serves_again_only_after_a_take_over(oracles):
    a_port, b_port = free_ports(2)
    a = oracles(a_port, standby=True).wait_listening()
    b = oracles(b_port, standby=True).wait_for("standby on")
    addresses = [("127.0.0.1", a_port), ("127.0.0.1", b_port)]
    # A paused oracle answers nothing: the client gives up on it after io_timeout_s.
    with OracleClient(addresses=addresses, deadline_s=20, io_timeout_s=1.0) as client:
        fetcher = Fetcher(client, threads=2)
        fetcher.wait_for_more(50)
        a.proc.send_signal(signal.SIGSTOP)  # a pause longer than the lease (a GC, a VM stall)
        b.wait_for("took over; serving on", timeout=15)
        fetcher.wait_for_more(50)
        a.proc.send_signal(signal.SIGCONT)
        # Its lease ran out during the pause, so it answers nothing more; its next renewal
        # finds B's write, and it stands by again instead of exiting.
        a.wait_for("stepped down to standby", timeout=15)
        with socket.create_connection(addresses[0], timeout=5) as sock:
            sock.sendall(struct.pack(">I", 1))
            assert sock.recv(16) == NOT_ACTIVE_ANSWER
        fetcher.wait_for_more(50)
        killed_at = time.monotonic()
        b.signal(signal.SIGKILL)
        a.wait_for("took over; serving on 127.0.0.1:%d" % a_port, timeout=15)
        fetcher.wait_for_more(50)
        fetcher.stop()
    assert a.proc.poll() is None
    assert fetcher.check(killed_at) < (BLOCK_MS + MARGIN_MS) / 1000 + 1.5


class _HBaseDownFor:
    """A store that answers ``StorageUnavailable`` (what the pool raises once HBase stays
    silent past its retries) to its first ``n`` reads of rows, then is the store it wraps."""

    def __init__(self, store, n: int) -> None:
        self._store, self.left = store, n

    def read_row(self, *args, **kwargs):
        if self.left > 0:
            self.left -= 1
            from caffeine.storage import StorageUnavailable
            raise StorageUnavailable("Thrift1 server 127.0.0.1:9090 did not answer after 2 attempts over 60s")
        return self._store.read_row(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._store, name)


def test_a_standby_rides_out_hbase_being_down_instead_of_exiting():
    """HBase restarting while a standby watches the lease (its reads fail for a while): the
    standby keeps standing by, then takes the free lease over and serves. It used to exit."""
    import asyncio

    from caffeine.oracle.server import OracleServer
    from caffeine.storage.memory import MemoryStore

    store = _HBaseDownFor(MemoryStore(), 3)
    server = OracleServer(Settings(oracle_block_ms=1000), store, host="127.0.0.1", port=0, standby=True)
    server.standby_retry_s = 0.05
    done = threading.Event()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(server.run())
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failure.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while server.allocator is None and not done.is_set():
            assert time.monotonic() < deadline, "the standby never took over"
            time.sleep(0.02)
        assert not failure, f"the standby exited: {failure[0]!r}"
        assert store.left == 0 and server.allocator is not None
        client = OracleClient(addresses=[server.address], deadline_s=5)
        try:
            assert client.get_timestamp() > 0
        finally:
            client.close()
    finally:
        server.stop()
        done.wait(10)
