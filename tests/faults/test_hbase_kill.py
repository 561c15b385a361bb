"""HBase itself killed: SIGKILL the HBase JVM in the middle of a bank run, restart it, audit.

Real processes, real HBase, real timestamp oracle. ``ACCOUNTS`` accounts start with
``START_BALANCE`` each; three transfer processes (``tests/support/ledger_child.py``)
run random transfers, each of which also writes a per-transfer marker, and print every attempt
before it commits (``P``) and every acknowledged commit with its commit_ts (``T``). In the
middle of the run the test SIGKILLs the HBase JVM (master, region server and ZooKeeper: one
process; ``LocalHBase.kill("hbase")``), leaves it dead for ``DOWN_S`` (longer than a Thrift
call's socket timeout) and starts it again (``restart("hbase")``: meta is reassigned, the
killed server's write-ahead logs are split and replayed as its regions reopen). The Thrift
servers and the oracle keep running; their HBase clients reconnect. The children's calls time
out and are retried, or fail (a ``CaffeineError`` is survivable, they go on), and the children
must resume by themselves: each one has to commit again after the restart. An observer worker
process (``caffeine worker``, ``tests/support/ledger_observer.py``) watches the markers
throughout and must likewise carry on without help: in the end every committed marker has been
observed, once.

Then the audit against the write records themselves (``support.ledger_audit``: every
acknowledged transfer present at its commit_ts, unacknowledged ones whole or absent, balances
the replay of the committed transfers, no lock left, every marker observed once).

``test_kill_sigkills_only_the_named_piece`` pins ``LocalHBase.kill`` on stand-in processes
(no HBase needed). The HBase test only runs with ``CAFFEINE_TEST_RESTART_HBASE=1`` (like the
Thrift2 restart in test_bank.py: CI runs against a runtime it started itself; other people's
HBase must not be killed under them); otherwise skipped, saying so. Whatever happens, HBase
is running and serving the test tables again when the test ends.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid

import pytest

from support.child_helpers import child_env, run_for
from support.counted_columns import SPEC as COUNTED_SPEC, CountedRows
from support.ledger_audit import audit, run_through, wait_serving

RESTART_ENV = "CAFFEINE_TEST_RESTART_HBASE"
# How long HBase stays dead before the restart begins: longer than a Thrift call's socket
# timeout (thrift_timeout_ms, 30 s), so calls in flight at the kill time out in the clients
# (retried if idempotent, an unknown outcome if not) instead of just being answered late.
# CAFFEINE_TEST_HBASE_DOWN_S changes it (e.g. 0: a restart at once, an outage of ~10 s).
DOWN_S = float(os.environ.get("CAFFEINE_TEST_HBASE_DOWN_S", "35"))
# After HBase answers again, every child must commit within this long. Calls that hung on
# the dead JVM time out after thrift_timeout_ms (30 s) and failed transfers back off, so a
# child may need about a minute to get going again.
RESUME_TIMEOUT_S = 120.0


@pytest.fixture
def runtime(hbase_settings):
    """The local runtime whose HBase this test kills; skips unless that was asked for."""
    if os.environ.get(RESTART_ENV) != "1":
        pytest.skip(f"HBase kill SKIPPED: set {RESTART_ENV}=1 to SIGKILL and restart HBase mid-run (only "
                    f"against a runtime of your own: `LocalHBase(settings).kill('hbase')`)")
    from caffeine.runtime.local import LocalHBase

    local = LocalHBase(hbase_settings, progress=lambda msg: print(f"  runtime: {msg}", flush=True))
    if not local.status(probe_timeout_s=5).piece("hbase").running:
        pytest.fail(f"{RESTART_ENV}=1 but no HBase of this home ({local.layout.home}) runs here to kill; "
                    "the CAFFEINE_* settings point elsewhere")
    return local


@pytest.fixture
def bank(runtime, fast_cluster, bank_table):
    """(cluster, bank table, ledger table): the bank of tests/faults/conftest.py's ``bank_table``
    and an empty ledger table for the markers."""
    ledger_table = f"ledger_{uuid.uuid4().hex[:8]}"
    fast_cluster.create_table(ledger_table)
    return fast_cluster, bank_table, ledger_table


@pytest.fixture
def observer_worker(bank, hbase_settings, workers):
    """A ``caffeine worker`` process observing the ledger's markers (stopped at teardown)."""
    _, _, ledger_table = bank
    return workers("ledger_observer.py:audit", child_env(hbase_settings, test_ledger_table=ledger_table), threads=2)


@pytest.fixture
def counted_rows(runtime, hbase_store):
    """Rows of a counted family written before the kill: in the memstore and the write-ahead
    log only, so the restart replays them as their region reopens (support/counted_columns.py)."""
    table = f"counted_{uuid.uuid4().hex[:8]}"
    hbase_store.create_table(table, COUNTED_SPEC)
    rows = CountedRows(hbase_store, table)
    rows.write_first()
    yield rows
    hbase_store.drop_table(table)


def test_kill_sigkills_only_the_named_piece(tmp_path):
    from caffeine.config import Settings
    from caffeine.runtime.local import LocalHBase
    from caffeine.runtime.process import find_pieces, pid_alive, spawn

    home = tmp_path / "home"
    local = LocalHBase(Settings(home=home), progress=lambda msg: None)
    # Stand-ins for the JVMs: any process carrying our markers counts as that piece. The
    # "hbase" one ignores SIGTERM, so only a SIGKILL ends it.
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    procs = {
        name: spawn([sys.executable, "-c", code, f"-Dcaffeine.home={home}", f"-Dcaffeine.piece={name}"],
                    local.layout.log_file(name), local.layout.pid_file(name), cwd=tmp_path)
        for name in ("hbase", "thrift1")
    }
    try:
        deadline = time.monotonic() + 10
        while set(find_pieces(home)) != {"hbase", "thrift1"} and time.monotonic() < deadline:
            time.sleep(0.05)
        assert local.kill("hbase") == [procs["hbase"].pid]
        assert not pid_alive(procs["hbase"].pid)
        assert not local.layout.pid_file("hbase").exists()
        assert find_pieces(home) == {"thrift1": [procs["thrift1"].pid]}  # the others keep running
        assert local.kill("hbase") == []  # nothing left to kill
        with pytest.raises(ValueError):
            local.kill("hmaster")
    finally:
        for proc in procs.values():
            if pid_alive(proc.pid):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@pytest.mark.hbase
@pytest.mark.exclusive  # SIGKILLs the shared runtime's HBase
def test_acknowledged_transfers_survive_a_sigkill_of_hbase(runtime, bank, observer_worker, hbase_store, children,
                                                           say, hbase_settings, counted_rows):
    cluster, table, ledger_table = bank
    times = {}

    def outage(check) -> float:
        times["killed"] = time.time()
        pids = runtime.kill("hbase")
        assert pids, "HBase was not running"
        say(f"SIGKILLed HBase (pid {', '.join(map(str, pids))})")
        run_for(DOWN_S, check)  # the children meet a dead HBase
        restart_began = time.time()
        runtime.restart("hbase")
        healthy_at = time.time()
        say(f"HBase answers through both Thrift servers again: {healthy_at - restart_began:.1f}s after the "
            f"restart began, {healthy_at - times['killed']:.1f}s after the kill")
        say(f"the bank table answers a read {wait_serving(hbase_store, table):.1f}s later")
        return healthy_at

    print()
    try:
        run = run_through(outage, cluster=cluster, table=table, ledger_table=ledger_table,
                          env=child_env(hbase_settings), children=children, worker=observer_worker, say=say,
                          resume_timeout_s=RESUME_TIMEOUT_S)
    finally:
        # Leave a working HBase to the rest of the suite (and to whoever else uses it),
        # whatever failed above; first, so a failure during the outage does not prolong it.
        if not runtime.status(probe_timeout_s=5).piece("hbase").running:
            say("HBase is not running after the test; starting it")
            runtime.up()
        wait_serving(hbase_store, table)
    # The outage reached the clients: calls in flight at the kill timed out and were retried
    # (or their outcome was unknown), rather than the test missing the running bank.
    stats = run.ledger.stats
    assert stats.get("retried_calls", 0) + stats.get("unknown_outcomes", 0) > 0, stats
    audit(run, cluster=cluster, store=hbase_store, table=table, ledger_table=ledger_table, worker=observer_worker,
          say=say)
    # The counted columns written before the kill came back from the write-ahead log, which no
    # write hook sees: writes over them still count what they change.
    counted_rows.write_after_reopen()
    assert counted_rows.counted() == counted_rows.expected() == counted_rows.walked()
    print(f"HBase outage: killed -> answering again {run.healthy_at - times['killed']:.1f}s")
