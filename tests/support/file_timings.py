"""Time per test file: where a suite's minutes go, also when it is stopped midway.

A pytest plugin (loaded by ``tests/conftest.py``).

- **As each file ends**, the process that ran it (in a parallel run, ``pytest -n``, the worker)
  appends a line to the file named by ``CAFFEINE_TEST_TIMINGS``, if set: the clock, the seconds
  since that process began testing, the file's wall time (its first test's start to its last
  one's end), its test count and the process: ``CAFFEINE_TEST_RUN_LABEL`` if set (a child
  pytest a test starts names itself so), else the xdist worker, else ``main``. CI sets it
  and prints its tail when the test phase fails, so a run stopped by its time budget still
  says which files took the time.
- **At the end**, pytest's summary lists the files whose tests took longest: the sum of their
  tests' setup, call and teardown times.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

_SLOWEST_LISTED = 15
LABEL_VARIABLE = "CAFFEINE_TEST_RUN_LABEL"


def _file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class FileClock:
    """The wall time of each file in the tests this process runs (one after the other)."""

    def __init__(self, path: str | None, worker: str) -> None:
        self.path, self.worker = path, worker
        self.t0 = time.monotonic()
        self.current: str | None = None
        self.current_t0 = self.last_end = 0.0
        self.current_tests = 0

    def start(self, nodeid: str) -> None:
        name = _file_of(nodeid)
        if name != self.current:
            self.finish()
            self.current, self.current_t0, self.current_tests = name, time.monotonic(), 0
        self.current_tests += 1

    def end(self) -> None:
        self.last_end = time.monotonic()

    def finish(self) -> None:
        if self.current is None:
            return
        if self.path:
            took = max(0.0, self.last_end - self.current_t0)
            since = time.monotonic() - self.t0
            with open(self.path, "a", encoding="utf-8") as out:  # one short append: whole lines
                out.write(f"{time.strftime('%H:%M:%S')} +{since:7.1f}s  {took:7.1f}s  "
                          f"{self.current_tests:4d} tests  {self.current}  [{self.worker}]\n")
        self.current = None


_clock: FileClock | None = None  # in a process that runs tests
_spent: dict[str, float] = defaultdict(float)  # file -> seconds, in the process that reports


def pytest_configure(config):
    global _clock
    controller = config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput")
    if not controller:
        _clock = FileClock(os.environ.get("CAFFEINE_TEST_TIMINGS") or None, run_label(os.environ))


def run_label(env) -> str:
    """What the per-file lines call the process that ran the file (see the module docstring)."""
    return env.get(LABEL_VARIABLE) or env.get("PYTEST_XDIST_WORKER") or "main"


def pytest_runtest_logstart(nodeid, location):
    if _clock:
        _clock.start(nodeid)


def pytest_runtest_logfinish(nodeid, location):
    if _clock:
        _clock.end()


def pytest_sessionfinish(session, exitstatus):
    if _clock:
        _clock.finish()


def pytest_runtest_logreport(report):
    _spent[_file_of(report.nodeid)] += report.duration


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _spent:
        return
    total = sum(_spent.values())
    terminalreporter.section(f"slowest test files (of {len(_spent)}; {total:.0f}s of tests in all)")
    for name, took in sorted(_spent.items(), key=lambda kv: -kv[1])[:_SLOWEST_LISTED]:
        terminalreporter.write_line(f"{took:8.1f}s  {name}")
