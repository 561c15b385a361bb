"""An observer whose work after the commit goes to a serving system that fails now and then:
for the tests of ``redo`` (the worker redoes the work, never commits a second run)."""

from __future__ import annotations


class PublishingObserver:
    """``run`` commits ``published`` = the row's ``column`` and publishes it after the
    commit; ``redo`` publishes the committed ``published`` again. The serving system
    (``side``: row -> value) refuses the first ``failures[row]`` writes of a row."""

    def __init__(self, table: str, column: str, failures: dict[bytes, int]) -> None:
        self.table, self.column = table, column
        self.failures = dict(failures)
        self.side: dict[bytes, bytes] = {}
        self.runs: list[bytes] = []
        self.redos: list[bytes] = []

    def publish(self, row: bytes, value: bytes) -> None:
        if self.failures.get(row, 0) > 0:
            self.failures[row] -= 1
            raise OSError("serving system unreachable")
        self.side[row] = value

    def run(self, txn, row, column) -> None:
        self.runs.append(row)
        value = txn.get(self.table, row, self.column)
        txn.set(self.table, row, "published", value)
        txn.on_commit(lambda: self.publish(row, value))

    def redo(self, txn, row, column) -> None:
        self.redos.append(row)
        value = txn.get(self.table, row, "published")
        txn.on_commit(lambda: self.publish(row, value))


def publish_three_rows(cluster, app, table: str, column: str, pub: PublishingObserver):
    """Write ``column`` = ``x-<row>`` on rows r0-r2 and run a worker until quiet; then check
    that each value was published once its failures were redone (r1's once, r2's twice), by
    one run per change, and that no notification or failure record is left. Returns the
    worker, for its counters."""
    from caffeine.percolator.engine_status import pending_notifications, wait_until_quiescent
    from caffeine.percolator.worker import Worker
    from caffeine.percolator.workers_table import list_failures

    rows = [b"r0", b"r1", b"r2"]
    with cluster.begin() as txn:
        for row in rows:
            txn.set(table, row, column, b"x-" + row)
    with Worker(cluster, app, threads=2) as worker:
        wait_until_quiescent(cluster, app.observed_tables, timeout_s=120, poll_s=0.05)
    assert pub.side == {row: b"x-" + row for row in rows}
    assert sorted(pub.runs) == rows, "one committed run per change"
    assert sorted(pub.redos) == [b"r1", b"r2", b"r2"]
    assert pending_notifications(cluster.store, [table]).count == 0
    assert not [f for f in list_failures(cluster.store) if f["table"] == table]
    return worker
