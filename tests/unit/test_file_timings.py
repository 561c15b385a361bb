"""The per-file timing lines name the process that ran each file (tests/support/file_timings.py)."""

from __future__ import annotations

from support.file_timings import FileClock, run_label


def test_a_child_run_is_labelled_by_its_parent_not_as_main():
    assert run_label({}) == "main"
    assert run_label({"PYTEST_XDIST_WORKER": "gw1"}) == "gw1"
    child = {"PYTEST_XDIST_WORKER": "gw1", "CAFFEINE_TEST_RUN_LABEL": "thrift-cas child of gw1"}
    assert run_label(child) == "thrift-cas child of gw1"


def test_each_finished_file_is_one_line_with_its_label(tmp_path):
    log = tmp_path / "files.log"
    clock = FileClock(str(log), "thrift-cas child of gw0")
    for nodeid in ("tests/a/test_x.py::t1", "tests/a/test_x.py::t2", "tests/b/test_y.py::t1"):
        clock.start(nodeid)
        clock.end()
    clock.finish()
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    assert "   2 tests  tests/a/test_x.py  [thrift-cas child of gw0]" in lines[0]
    assert "   1 tests  tests/b/test_y.py  [thrift-cas child of gw0]" in lines[1]
