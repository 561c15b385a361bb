"""``support.frozen.Frozen``: inside the ``with`` block, every thread of the process is stopped.

A busy multi-threaded process is the case that matters (a region server under load): the kernel
stops its threads one by one after SIGSTOP is sent, so a block that starts work the moment
``kill`` returns could still be answered by the process it meant to freeze.
"""

from __future__ import annotations

import subprocess
import sys
import time

from support.frozen import Frozen, all_threads_stopped

SPINNING = """
import threading, time
def spin():
    while True:
        pass
for _ in range(12):
    threading.Thread(target=spin, daemon=True).start()
print("spinning", flush=True)
time.sleep(600)
"""


def test_every_thread_is_stopped_inside_the_block_and_running_after_it():
    child = subprocess.Popen([sys.executable, "-c", SPINNING], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "spinning"
        for _ in range(30):
            with Frozen(child.pid):
                assert all_threads_stopped(child.pid)
            deadline = time.monotonic() + 5
            while all_threads_stopped(child.pid) and time.monotonic() < deadline:
                time.sleep(0.001)
            assert not all_threads_stopped(child.pid)
    finally:
        child.kill()
        child.wait()
