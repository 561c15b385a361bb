"""``pid_alive`` must not declare a process dead while any of its threads still runs.

Found by tests/faults/test_bank.py: ``LocalHBase.restart_thrift2()`` failed now and then with
``PortInUse: port 9296 (thrift2: Thrift2 info) is in use by an unknown process`` and left the
Thrift2 server stopped. During a JVM's shutdown its main (thread-group leader) thread can exit
before the others; /proc/<pid>/stat then shows the leader's state "Z" while the remaining
threads still hold the listening sockets (and /proc/<pid>/fd is no longer readable, hence
"unknown process"). ``pid_alive`` reads that "Z" as "gone", so ``terminate`` returns early and
``_restart``'s port check runs while the old JVM still holds its ports.

Observed on the JVM (sampled right after SIGTERM): leader state Z, 2 tasks left in
/proc/<pid>/task, Thrift2 port free, info port 9296 not yet free. Reproduced here without a
JVM: a process whose main thread calls pthread_exit while another thread keeps running.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from caffeine.runtime.ports import port_is_free
from caffeine.runtime.process import pid_alive

LEADER_EXITS_FIRST = """
import ctypes, socket, threading, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
print(s.getsockname()[1], flush=True)
threading.Thread(target=time.sleep, args=(3600,)).start()
ctypes.CDLL(None).pthread_exit(None)  # the main thread ends; the process lives on
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc semantics")
def test_a_process_whose_main_thread_exited_first_is_still_alive():
    proc = subprocess.Popen([sys.executable, "-c", LEADER_EXITS_FIRST], stdout=subprocess.PIPE)
    try:
        port = int(proc.stdout.readline())
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait for the leader to be a zombie
            state = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()[0]
            if state == "Z":
                break
            time.sleep(0.05)
        assert state == "Z" and len(os.listdir(f"/proc/{proc.pid}/task")) > 1
        assert not port_is_free(port), "the surviving thread holds the port"
        assert pid_alive(proc.pid), "pid_alive says gone while a thread of it runs and holds a port"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
