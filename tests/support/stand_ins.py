"""Stand-in processes for the runtime's pieces: found by their markers like the real ones.

``stand_ins(home, order, names)`` starts one Python process per name, each carrying
``-Dcaffeine.home=<home> -Dcaffeine.piece=<name>`` on its command line (what
``caffeine.runtime.process.find_pieces`` looks for), and returns once each has said it is
ready. On SIGTERM a stand-in appends its name to the file ``order`` and exits, so a test reads
back the order ``down`` stopped them in. Their ports answer nothing, so ``down`` signals them
rather than asking HBase to stop. The caller kills them in the end (``proc.kill()``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

STAND_IN = """
import signal, sys, time
def stop(*_):
    with open(sys.argv[1], "a") as fh:
        print(sys.argv[2], file=fh)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def stand_ins(home: Path, order: Path, names: list[str]) -> list[subprocess.Popen]:
    """One ready stand-in per name, in that order."""
    procs = [subprocess.Popen([sys.executable, "-c", STAND_IN, str(order), name,
                               f"-Dcaffeine.home={home}", f"-Dcaffeine.piece={name}"], stdout=subprocess.PIPE, text=True)
             for name in names]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready"
    return procs
