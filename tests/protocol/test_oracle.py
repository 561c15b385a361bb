"""The timestamp oracle: encoding, high-water mark and lease, server and batched client.

Pure tests (timestamps, allocator, the HWM's decisions on the in-memory store) run anywhere;
the rest start real ``caffeine oracle`` processes against the real HBase, each test under its
own table prefix inside the session's (so the session's clean-up drops the tables), and kill
them with real signals.
"""

from __future__ import annotations

import bisect
import json
import logging
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid

import pytest

from caffeine.oracle import OracleClient, OracleConflict, OracleUnavailable
from caffeine.oracle import timestamps as tsm
from caffeine.oracle.hwm import HwmState, HwmStore, TakeOver
from caffeine.oracle.server import Allocator
from caffeine.storage.memory import MemoryStore
from support.oracles import BLOCK_MS, OracleProcess
from support.ports import free_port


# -- the encoding --------------------------------------------------------------------------

def test_compose_and_split_round_trip():
    for ms, logical in [(0, 0), (1, 1), (1_700_000_000_123, 0), (1_700_000_000_123, tsm.LOGICAL_MASK),
                        (tsm.MAX_PHYSICAL_MS, tsm.LOGICAL_MASK)]:
        ts = tsm.compose(ms, logical)
        assert tsm.split(ts) == (ms, logical)
        assert tsm.physical_ms(ts) == ms and tsm.logical(ts) == logical
    assert tsm.compose(5, 7) == (5 << 18) | 7
    assert tsm.from_wall_clock(1234) == tsm.compose(1234, 0)


def test_order_of_timestamps_is_order_of_time_then_counter():
    assert tsm.compose(10, tsm.LOGICAL_MASK) < tsm.compose(11, 0)
    assert tsm.compose(10, 1) < tsm.compose(10, 2)
    # A counter overflow carries into the physical part, keeping timestamps increasing.
    assert tsm.compose(10, tsm.LOGICAL_MASK) + 1 == tsm.compose(11, 0)


def test_compose_rejects_out_of_range_parts():
    with pytest.raises(ValueError):
        tsm.compose(1, tsm.LOGICAL_MASK + 1)
    with pytest.raises(ValueError):
        tsm.compose(-1, 0)
    with pytest.raises(ValueError):
        tsm.compose(tsm.MAX_PHYSICAL_MS + 1, 0)
    assert tsm.compose(tsm.MAX_PHYSICAL_MS, tsm.LOGICAL_MASK) == tsm.MAX_ISSUABLE_TS < 1 << 62


def test_ages_and_spans_from_the_physical_part():
    ts = tsm.compose(1_000_000, 42)
    assert tsm.elapsed_ms(ts, now_ms=1_000_250) == 250
    assert tsm.elapsed_ms(ts, now_ms=999_000) == 0  # a timestamp ahead of our clock is age 0
    assert tsm.add_ms(ts, 30) == tsm.compose(1_000_030, 42)
    assert tsm.ms_to_ts_span(3) == tsm.compose(3, 0)
    assert abs(tsm.physical_ms(tsm.wall_clock_ts()) - time.time() * 1000) < 1000
    assert tsm.describe(tsm.compose(0, 5)) == f"{tsm.compose(0, 5)} (1970-01-01T00:00:00.000Z +5)"


# -- the allocator (the server's state) ----------------------------------------------------

def test_allocator_tracks_the_wall_clock_but_never_goes_back():
    a = Allocator(start_ts=tsm.compose(100, 0), hwm=tsm.compose(200, 0), lease_until=10.0)
    assert a.try_allocate(1, now_ts=tsm.compose(50, 0), now_mono=0) == tsm.compose(100, 0)
    assert a.try_allocate(3, now_ts=tsm.compose(120, 0), now_mono=0) == tsm.compose(120, 0)
    # The clock steps back: the next range continues after the last one.
    assert a.try_allocate(1, now_ts=tsm.compose(110, 0), now_mono=0) == tsm.compose(120, 3)
    assert a.issued == 5


def test_allocator_stops_at_the_hwm_and_at_the_end_of_the_lease():
    a = Allocator(start_ts=tsm.compose(100, 0), hwm=tsm.compose(100, 10), lease_until=10.0)
    assert a.try_allocate(11, tsm.compose(100, 0), 0) is None  # would reach the HWM
    assert a.try_allocate(10, tsm.compose(100, 0), 0) == tsm.compose(100, 0)
    b = Allocator(start_ts=tsm.compose(100, 0), hwm=tsm.compose(200, 0), lease_until=10.0)
    assert b.try_allocate(1, tsm.compose(100, 0), now_mono=10.0) is None  # lease ran out
    assert b.next_ts == tsm.compose(100, 0)


# -- the persisted high-water mark and its lease (in-memory store: same contract) ----------

class FakeTime:
    """A monotonic clock that only moves when someone sleeps; hooks run at chosen moments."""

    def __init__(self):
        self.now = 1000.0
        self.hooks: list[tuple[float, callable]] = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        for at, hook in list(self.hooks):
            if self.now >= at:
                self.hooks.remove((at, hook))
                hook()


def _hwm_store(store, owner, clock=None):
    clock = clock or FakeTime()
    h = HwmStore(store, owner, monotonic=clock.monotonic, sleep=clock.sleep)
    h.ensure_table()
    return h


def test_first_start_takes_over_at_once_from_the_wall_clock():
    store, clock = MemoryStore(), FakeTime()
    a = _hwm_store(store, "A", clock)
    took = a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))
    assert took == TakeOver(HwmState(None), tsm.compose(5_000, 0), HwmState(tsm.compose(6_000, 0), "A", 1))
    assert clock.now == 1000.0  # no wait
    assert a.read() == took.state


def test_restart_after_release_starts_above_everything_issued_even_if_the_clock_went_back():
    store = MemoryStore()
    a = _hwm_store(store, "A")
    a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))
    a.renew(tsm.compose(9_000, 0))
    assert a.release(tsm.compose(8_000, 17))  # next_ts at a clean stop
    assert a.read() == HwmState(tsm.compose(8_000, 17), "", 3)
    b = _hwm_store(store, "B")
    took = b.acquire(BLOCK_MS, lambda: tsm.compose(1_000, 0))  # B's clock is far behind
    assert took.start_ts == tsm.compose(8_000, 17)
    assert took.state.hwm == tsm.compose(9_000, 17)


def test_newcomer_waits_out_a_silent_owner_then_the_stale_owner_cannot_renew():
    store, clock = MemoryStore(), FakeTime()
    a = _hwm_store(store, "A")
    a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))  # then A "crashes" (stops renewing)
    b = _hwm_store(store, "B", clock)
    waits = []
    took = b.acquire(BLOCK_MS, lambda: tsm.compose(5_100, 0), margin_ms=500,
                     on_wait=lambda state, s: waits.append((state.owner, s)))
    assert waits == [("A", 1.5)]
    assert clock.now >= 1000.0 + 1.5  # watched a whole block plus the margin
    assert took.start_ts == tsm.compose(6_000, 0)  # A's HWM: above anything A handed out
    with pytest.raises(OracleConflict, match="took over"):
        a.renew(tsm.compose(7_000, 0))  # A wakes up: its compare-and-set fails
    assert not a.release(tsm.compose(5_500, 0))
    assert b.read().owner == "B"


def test_newcomer_refuses_to_start_while_the_owner_renews():
    store, clock = MemoryStore(), FakeTime()
    a = _hwm_store(store, "A")
    a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))
    clock.hooks.append((1000.5, lambda: a.renew(tsm.compose(6_500, 0))))  # A's heartbeat
    b = _hwm_store(store, "B", clock)
    with pytest.raises(OracleConflict, match="another timestamp oracle is serving"):
        b.acquire(BLOCK_MS, lambda: tsm.compose(5_100, 0))
    assert a.read().owner == "A"
    a.renew(tsm.compose(7_000, 0))  # A is unaffected


def test_newcomer_takes_over_at_once_when_the_owner_releases_during_the_wait():
    store, clock = MemoryStore(), FakeTime()
    a = _hwm_store(store, "A")
    a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))
    clock.hooks.append((1000.3, lambda: a.release(tsm.compose(5_000, 9))))
    b = _hwm_store(store, "B", clock)
    took = b.acquire(BLOCK_MS, lambda: tsm.compose(5_100, 0))
    assert clock.now < 1001.0
    assert took.start_ts == tsm.compose(5_100, 0)


def test_a_standby_watches_a_live_owner_for_as_long_as_it_renews():
    store, clock = MemoryStore(), FakeTime()
    a = _hwm_store(store, "A")
    a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))
    for k in range(1, 9):  # A renews every 0.5 s for 4 s, then falls silent (a crash)
        clock.hooks.append((1000.0 + k / 2, lambda k=k: a.renew(tsm.compose(5_000 + 1000 * k, 0))))
    b = _hwm_store(store, "B", clock)
    waits = []
    took = b.acquire(BLOCK_MS, lambda: tsm.compose(5_100, 0), margin_ms=500, standby=True,
                     on_wait=lambda state, s: waits.append(state.owner))
    assert waits == ["A"]  # said once per owner, not once per renewal
    # The last renewal was at 1004.0; the watch ran a block plus the margin past it.
    assert 1005.5 <= clock.now < 1005.7
    assert took.start_ts == tsm.compose(13_000, 0)  # A's last HWM: above all A handed out
    with pytest.raises(OracleConflict, match="took over"):
        a.renew(tsm.compose(14_000, 0))


def test_a_standby_takes_over_at_once_when_the_owner_releases():
    store, clock = MemoryStore(), FakeTime()
    a = _hwm_store(store, "A")
    a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))
    clock.hooks.append((1000.5, lambda: a.renew(tsm.compose(6_500, 0))))
    clock.hooks.append((1002.0, lambda: a.release(tsm.compose(5_000, 9))))
    b = _hwm_store(store, "B", clock)
    took = b.acquire(BLOCK_MS, lambda: tsm.compose(5_100, 0), standby=True)
    assert 1002.0 <= clock.now < 1002.2
    assert took.start_ts == tsm.compose(5_100, 0)


def test_two_standbys_racing_for_one_row_one_wins_the_other_watches_it():
    store, clock = MemoryStore(), FakeTime()
    b, c = _hwm_store(store, "B", clock), _hwm_store(store, "C", clock)
    b.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))  # B won the race to the released row
    # C read the row before B's write and so tries to take it over as released.
    c.state = None
    released = HwmState(None)
    assert c.read() != released
    calls = []
    real_read = c.read

    def read_first_as_released():
        calls.append(1)
        return released if len(calls) == 1 else real_read()

    c.read = read_first_as_released
    clock.hooks.append((1000.5, lambda: b.renew(tsm.compose(6_500, 0))))
    clock.hooks.append((1001.0, lambda: b.release(tsm.compose(5_000, 1))))
    took = c.acquire(BLOCK_MS, lambda: tsm.compose(5_100, 0), standby=True)
    # C's compare-and-set on the released row lost to B's write; C watched B until B released.
    assert 1001.0 <= clock.now < 1001.2
    assert took.previous.hwm == tsm.compose(5_000, 1) and c.read().owner == "C"


def test_renewal_is_idempotent_and_never_shrinks():
    store = MemoryStore()
    a = _hwm_store(store, "A")
    a.acquire(BLOCK_MS, lambda: tsm.compose(5_000, 0))
    state = a.renew(tsm.compose(6_000, 0))  # same HWM: a pure heartbeat, still a visible change
    assert state == HwmState(tsm.compose(6_000, 0), "A", 2)
    with pytest.raises(ValueError):
        a.renew(tsm.compose(5_999, 0))


# -- real oracle processes over the real HBase ----------------------------------------------

@pytest.fixture
def oracle_env(hbase_store, hbase_settings):
    """(prefix, port, start()) for one test; every process started is killed at the end."""
    prefix = f"{hbase_settings.table_prefix}o{uuid.uuid4().hex[:6]}_"
    port = free_port()
    started: list[OracleProcess] = []

    def start(port_=None, **kw) -> OracleProcess:
        p = OracleProcess(prefix, port_ or port, **kw)
        started.append(p)
        return p

    yield prefix, port, start
    for p in started:
        p.kill()


WORKER = r"""
import json, sys, threading, time
from caffeine.oracle.client import OracleClient

port, threads, calls = map(int, sys.argv[1:4])
client = OracleClient(port=port)
barrier = threading.Barrier(threads)
records = [[] for _ in range(threads)]

def run(i):
    barrier.wait()
    out = records[i]
    for k in range(calls):
        n = 3 if k % 10 == 0 else 1  # some ranges too
        start = time.time_ns()
        first = client.get_timestamps(n) if n > 1 else client.get_timestamp()
        end = time.time_ns()
        out.append((start, end, first, n))

workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
for w in workers: w.start()
for w in workers: w.join()
json.dump({"records": [r for rs in records for r in rs], "stats": client.stats()}, sys.stdout)
"""


def test_many_threads_in_many_processes_get_unique_timestamps_in_real_time_order(oracle_env):
    prefix, port, start = oracle_env
    start().wait_listening()
    procs, threads, calls = 3, 8, 200
    workers = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(port), str(threads), str(calls)],
                         stdout=subprocess.PIPE, text=True)
        for _ in range(procs)
    ]
    results = [json.loads(w.communicate(timeout=120)[0]) for w in workers]
    assert all(w.returncode == 0 for w in workers)
    records = [tuple(r) for res in results for r in res["records"]]
    assert len(records) == procs * threads * calls

    # Unique: the ranges are disjoint.
    ranges = sorted((first, first + n - 1) for _, _, first, n in records)
    assert all(prev_last < first for (_, prev_last), (first, _) in zip(ranges, ranges[1:]))

    # Real-time order: a call that ended before another started got smaller timestamps.
    by_end = sorted(records, key=lambda r: r[1])
    ends = [r[1] for r in by_end]
    highest_so_far, high = [], -1
    for _, _, first, n in by_end:
        high = max(high, first + n - 1)
        highest_so_far.append(high)
    checked = 0
    for start_ns, _, first, _ in records:
        before = bisect.bisect_left(ends, start_ns)  # calls with end < this call's start
        if before:
            assert highest_so_far[before - 1] < first
            checked += 1
    assert checked > len(records) // 2  # the check had teeth

    # Batching happened: fewer round trips than calls in every process.
    assert all(res["stats"]["timestamps_per_round_trip"] > 1 for res in results)


def _issue(client, n=50) -> int:
    got = [client.get_timestamp() for _ in range(n)]
    assert got == sorted(set(got))
    return max(got)


@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM"])
def test_restart_never_issues_at_or_below_a_timestamp_issued_before(oracle_env, how):
    prefix, port, start = oracle_env
    first = start().wait_listening()
    with OracleClient(port=port) as client:
        highest = _issue(client)
        highest = max(highest, client.get_timestamps(1000) + 999)
        code = first.signal(getattr(signal, how))
        if how == "SIGTERM":
            assert code == 0
            assert "high-water mark released" in first.output
        began = time.monotonic()
        second = start().wait_listening()
        waited = time.monotonic() - began
        if how == "SIGKILL":
            # The crashed oracle never released its lease: the new one watched it expire.
            assert "watching it for 1.5 s" in second.output
        else:
            assert "watching" not in second.output
        after = client.get_timestamp()  # the same client reconnects by itself
        assert after > highest, (after, highest, waited)
        assert client.status() > after


def test_clients_wait_through_a_short_outage(oracle_env, caplog):
    prefix, port, start = oracle_env
    first = start().wait_listening()
    with OracleClient(port=port, deadline_s=60) as client:
        before = client.get_timestamp()
        first.signal(signal.SIGTERM)
        results = []
        waiters = [threading.Thread(target=lambda: results.append(client.get_timestamp())) for _ in range(4)]
        with caplog.at_level(logging.WARNING, logger="caffeine.oracle.client"):
            for w in waiters:
                w.start()
            time.sleep(1.0)
            assert not results  # still waiting, not failed
            start().wait_listening()
            for w in waiters:
                w.join(30)
        assert len(results) == 4 and min(results) > before and len(set(results)) == 4
        assert f"timestamp oracle at 127.0.0.1:{port} is not answering; is `caffeine oracle` " \
               "(started by `caffeine up`) running?" in caplog.text
        assert "answers again" in caplog.text


def test_clients_give_up_with_a_clear_error_when_the_oracle_stays_down():
    port = free_port()  # nobody listens here
    with OracleClient(port=port, deadline_s=1.5) as client:
        began = time.monotonic()
        errors = []

        def call():
            try:
                client.get_timestamp()
            except OracleUnavailable as exc:
                errors.append(exc)

        callers = [threading.Thread(target=call) for _ in range(3)]
        for c in callers:
            c.start()
        for c in callers:
            c.join(30)
        elapsed = time.monotonic() - began
    assert len(errors) == 3
    assert 1.5 <= elapsed < 6
    message = str(errors[0])
    assert f"timestamp oracle at 127.0.0.1:{port} is not answering" in message
    assert "caffeine oracle" in message and "Gave up after" in message


def test_a_second_oracle_for_the_same_deployment_refuses_to_start(oracle_env):
    prefix, port, start = oracle_env
    first = start().wait_listening()
    second = start(free_port())
    assert second.proc.wait(60) == 1
    second._reader.join(5)
    assert "another timestamp oracle is serving this deployment" in second.output
    with OracleClient(port=port) as client:  # the first one is unaffected
        assert client.get_timestamp() > 0
    assert first.proc.poll() is None


def test_wire_protocol_status_and_protocol_errors(oracle_env):
    prefix, port, start = oracle_env
    start().wait_listening()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        def ask(n):
            sock.sendall(struct.pack(">I", n))
            data = b""
            while len(data) < 8:
                data += sock.recv(8 - len(data))
            return struct.unpack(">Q", data)[0]

        first = ask(5)
        status = ask(0)
        assert status == first + 5  # the next timestamp; nothing allocated by asking
        assert ask(0) == status
        # Pipelined requests are answered in order.
        sock.sendall(struct.pack(">III", 1, 0, 2))
        data = b""
        while len(data) < 24:
            data += sock.recv(24 - len(data))
        a, s, b = struct.unpack(">QQQ", data)
        assert status <= a < s == a + 1 <= b
        sock.sendall(struct.pack(">I", 1_000_001))
        assert sock.recv(8) == b""  # protocol error: the server hangs up
