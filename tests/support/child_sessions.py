"""A child pytest session that a test runs over other test files, with settings of its own.

Layer: test support. ``run_child_session(files, env_updates, label)`` runs the files in one
process (``-n 0``: not a worker of the parent's parallel run, whose ``PYTEST_XDIST_*``
variables and locks it must not share), its per-file timings labelled ``<label> child of
<the parent's label>``; it returns pytest's summary line and fails the calling test, with
the child's output, if the child did not pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Iterable, Mapping

from support import ROOT
from support.file_timings import LABEL_VARIABLE, run_label


def run_child_session(files: Iterable[str], env_updates: Mapping[str, str], label: str, timeout: float = 2400) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}
    env.update(env_updates)
    env[LABEL_VARIABLE] = f"{label} child of {run_label(os.environ)}"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", *(str(ROOT / f) for f in files)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else "(no output)"
    assert run.returncode == 0, f"{summary}\n\n{run.stdout[-12000:]}\n{run.stderr[-4000:]}"
    return summary
