"""The observer of the HBase-kill test's ledger, run in a real worker process
(``caffeine worker --app tests/support/ledger_observer.py:audit``).

Layer: test support (public ``caffeine.percolator`` API only). The ledger table comes from
``CAFFEINE_TEST_LEDGER_TABLE``. For every transfer marker that commits
(``tests/support/ledger_child.py`` writes them, with notifications on), the observer copies the
marker into ``seen`` and counts its committed runs in ``seen_runs``: afterwards every marker
must have been seen, exactly once, even though HBase was killed under the worker.
"""

from __future__ import annotations

import os

from caffeine.percolator import Application, Observer

MARKER = "transfer"


def audit() -> Application:
    table = os.environ["CAFFEINE_TEST_LEDGER_TABLE"]

    def run(txn, row, column):
        txn.set(table, row, "seen", txn.get(table, row, MARKER) or b"")
        txn.set(table, row, "seen_runs", str(int(txn.get(table, row, "seen_runs") or b"0") + 1))

    return Application("ledger-audit", [Observer("audit", table, MARKER, run, reads=(MARKER, "seen_runs"))])
