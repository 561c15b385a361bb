"""Observer applications that tests run in real worker processes
(``caffeine worker --app tests/support/observer_apps.py:chain``). The table comes from the
environment so each test run uses its own."""

from __future__ import annotations

import os

from caffeine.percolator import Application, Observer


def _incr(txn, table, row, column):
    txn.set(table, row, column, str(int(txn.get(table, row, column) or b"0") + 1))


def chain() -> Application:
    """The chain on the table named by CAFFEINE_TEST_CHAIN_TABLE (for worker processes)."""
    return chain_app(os.environ["CAFFEINE_TEST_CHAIN_TABLE"])


def chain_app(table: str) -> Application:
    """a -> b -> c on one row; each observer counts its committed runs in <src>_runs."""

    def step(src, dst):
        def run(txn, row, column):
            _incr(txn, table, row, f"{src}_runs")
            if dst:
                txn.set(table, row, dst, txn.get(table, row, src))
        return run

    return Application("chain", [
        Observer("A", table, "a", step("a", "b")),
        Observer("B", table, "b", step("b", "c")),
        Observer("C", table, "c", step("c", None)),
    ])
