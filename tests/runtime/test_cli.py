"""The command line as a user meets it: failures say what failed, what to try and where the
log is, and never show a stack trace unless asked (``--debug`` / ``CAFFEINE_DEBUG=1``)."""

from __future__ import annotations

import uuid

import pytest

from support.cli_helpers import assert_no_stack_trace, cli_env, run_cli


def assert_explained(result, log):
    assert result.returncode == 1, (result.returncode, result.stderr)
    err = result.stderr
    assert_no_stack_trace(result.stdout + err)
    assert "  try: " in err and f"  log: {log}" in err, err
    assert log.exists()


@pytest.mark.hbase
def test_a_server_side_java_error_reaches_the_user_as_one_line_and_its_trace_goes_to_the_log(hbase_store, hbase_settings, tmp_path):
    # A serving table read as a Percolator table: HBase answers with a Java stack trace.
    table = "serving_" + uuid.uuid4().hex[:6]
    from caffeine.percolator import ServingTable

    ServingTable(hbase_store, table, ["s"]).create()
    log = tmp_path / "cli.log"
    result = run_cli("inspect", table, "row1", "--prefix", hbase_settings.table_prefix,
                     env=cli_env(cli_log=log), timeout=120)
    assert_explained(result, log)
    first = result.stderr.splitlines()[0]
    assert first.startswith("caffeine inspect: ") and "NoSuchColumnFamilyException" in first
    assert "Percolator table" in result.stderr  # the hint
    assert "\tat org.apache.hadoop.hbase" in log.read_text()  # the details are kept


def test_an_unexpected_python_error_shows_no_traceback_unless_debug_is_asked_for(tmp_path):
    log = tmp_path / "cli.log"
    result = run_cli("engine", "--app", "no_such_module_17:app", env=cli_env(cli_log=log), timeout=120)
    assert_explained(result, log)
    assert "ModuleNotFoundError" in result.stderr.splitlines()[0]
    assert "Traceback (most recent call last)" in log.read_text()
    for debug in (["--debug", "engine"], ["engine"]):
        env = cli_env(cli_log=log, **({} if debug[0] == "--debug" else {"debug": 1}))
        shown = run_cli(*debug, "--app", "no_such_module_17:app", env=env, timeout=120)
        assert shown.returncode != 0 and "Traceback (most recent call last)" in shown.stderr
