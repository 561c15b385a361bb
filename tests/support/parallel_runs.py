"""The suite in parallel (``pytest -n 2``, pytest-xdist): what runs together, and what runs alone.

A pytest plugin (loaded by ``tests/conftest.py``); without ``-n`` it changes nothing.

- **Groups.** Each test file runs whole on one worker process (its module fixtures are set up
  once), and so do the files listed in ``SHARED_GROUPS`` together (they share something
  costly, such as a Spark session, or a package fixture such as ``tests/cluster``'s cluster).
  The groups are handed out in the order pytest collects them, as workers become free.
- **Alone.** A test marked ``exclusive`` (or in a file whose ``pytestmark`` has it) runs with no
  other test running in any worker: the tests that kill or restart the shared runtime's
  servers (every other test would see them go), and the ones that kill servers of a cluster
  and time its recovery. A test that only asserts a generous deadline runs beside others.
  Every test takes a shared lock for its whole run (setup to teardown), an exclusive one
  takes it exclusively; a second lock, taken first, keeps new tests from starting while an
  exclusive one waits, so it cannot be starved. A waiting worker holds no lock.

The lock files (two empty files) live in a directory named after the run
(``PYTEST_XDIST_TESTRUNUID``, the same for every worker of one run) under the system's
temporary directory. A child pytest a test starts must leave the ``PYTEST_XDIST_*`` variables
out of its environment (``tests/protocol/test_commit_backends.py``): it would otherwise take
the locks of the run its parent test already holds them in.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from pathlib import Path

import pytest

# Files that run on one worker together, by group name: they share something costly to set up.
SHARED_GROUPS = {
    "tests/cluster/": "cluster",  # a package fixture: the cluster of three region servers
    "tests/indexing/test_verify.py": "spark",  # each starts a local Spark session
    "tests/indexing/test_spark_transforms.py": "spark",
}


def group_of(path: str) -> str:
    for prefix, group in SHARED_GROUPS.items():
        if path.startswith(prefix):
            return group
    return path


def pytest_xdist_make_scheduler(config, log):
    """Hand out whole groups (``group_of``), in the order they were collected (unless another
    ``--dist`` mode than ``-n``'s default was asked for)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid.split("::", 1)[0])

    return GroupScheduling(config, log)


class _Locks:
    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.gate = os.open(directory / "gate", os.O_RDWR | os.O_CREAT, 0o600)
        self.run = os.open(directory / "run", os.O_RDWR | os.O_CREAT, 0o600)

    def acquire(self, exclusive: bool) -> None:
        if exclusive:
            fcntl.flock(self.gate, fcntl.LOCK_EX)  # no test starts from now on
            fcntl.flock(self.run, fcntl.LOCK_EX)  # once the running ones are done
        else:
            fcntl.flock(self.gate, fcntl.LOCK_SH)  # waits while an exclusive test waits or runs
            fcntl.flock(self.run, fcntl.LOCK_SH)
            fcntl.flock(self.gate, fcntl.LOCK_UN)

    def release(self) -> None:
        fcntl.flock(self.run, fcntl.LOCK_UN)
        fcntl.flock(self.gate, fcntl.LOCK_UN)


_locks: _Locks | None = None


def _run_locks() -> _Locks | None:
    global _locks
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if run is None or os.environ.get("PYTEST_XDIST_WORKER") is None:
        return None  # not a worker of a parallel run
    if _locks is None:
        _locks = _Locks(Path(tempfile.gettempdir()) / f"caffeine-tests-{run}")
    return _locks


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    locks = _run_locks()
    if locks is None:
        yield
        return
    locks.acquire(exclusive=item.get_closest_marker("exclusive") is not None)
    try:
        yield
    finally:
        locks.release()
