"""An observer application whose effects can be counted exactly, for worker processes under
injected faults (``caffeine worker --app tests/support/fault_apps.py:tally``).

Layer: test support (public ``caffeine.percolator`` API only). Tables come from
``CAFFEINE_TEST_TALLY_TABLE`` (observed rows) and ``<that>_tally`` (counter rows).

Two strong observers, ``a -> b`` on each observed row. Each run, in one transaction, counts
itself in its own row (``a_runs``/``b_runs``) and adds one to a counter row of the tally
table (``tally-<k>``, column ``a``/``b``): every transaction spans two rows (two tables), so a
commit split at its primary shows up as a tally that disagrees with the rows. After
quiescence, for N changes: every row has ``a_runs == b_runs == 1``, and each tally column sums
to N.
"""

from __future__ import annotations

import os
import zlib

from caffeine.percolator import Application, Observer

BUCKETS = 8


def bucket(row: bytes) -> bytes:
    return b"tally-%d" % (zlib.crc32(row) % BUCKETS)


def _incr(txn, table, row, column):
    txn.set(table, row, column, str(int(txn.get(table, row, column) or b"0") + 1))


def tally() -> Application:
    """The application on the tables named by the environment (for worker processes)."""
    return tally_app(os.environ["CAFFEINE_TEST_TALLY_TABLE"])


def tally_app(table: str) -> Application:
    counters = table + "_tally"

    def step(src, dst):
        def run(txn, row, column):
            _incr(txn, table, row, f"{src}_runs")
            _incr(txn, counters, bucket(row), src)
            if dst:
                txn.set(table, row, dst, txn.get(table, row, src))
        return run

    return Application("tally", [
        Observer("A", table, "a", step("a", "b")),
        Observer("B", table, "b", step("b", None)),
    ], tables=[counters])
