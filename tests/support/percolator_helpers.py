"""Script-like helpers for protocol tests: must_prewrite, must_commit, must_locked, ...

Each runs one protocol step through a store's row transaction (exactly as the client does)
and asserts its outcome, so tests read as given / when / then.
"""

from __future__ import annotations

from caffeine.percolator import steps
from caffeine.percolator.layout import DATA, LOCK, NOTIFY, WRITE, data_family, qualifier
from caffeine.percolator.records import CellRef, Committed, Kind, Lock, RolledBack, Write
from caffeine.storage import ReadSpec

TTL = 3000
OWNER = b"test-owner"


def prewrite(store, table, row, writes, start_ts, primary=None, ttl_ms=TTL, owner=OWNER):
    primary = primary or CellRef(table, row, next(iter(writes)))
    return store.row_transaction(
        table, row, steps.prewrite_spec(writes),
        lambda r: steps.prewrite(r, writes, primary=primary, start_ts=start_ts, ttl_ms=ttl_ms, owner=owner),
    )


def must_prewrite(store, table, row, writes, start_ts, **kw):
    result = prewrite(store, table, row, writes, start_ts, **kw)
    assert isinstance(result, steps.Prewritten), result


def must_prewrite_conflict(store, table, row, writes, start_ts, **kw):
    result = prewrite(store, table, row, writes, start_ts, **kw)
    assert isinstance(result, steps.WriteConflict), result
    return result


def must_prewrite_locked(store, table, row, writes, start_ts, **kw):
    result = prewrite(store, table, row, writes, start_ts, **kw)
    assert isinstance(result, steps.KeyLocked), result
    return result.lock


def must_prewrite_rolled_back(store, table, row, writes, start_ts, **kw):
    result = prewrite(store, table, row, writes, start_ts, **kw)
    assert isinstance(result, RolledBack), result


def commit(store, table, row, columns, start_ts, commit_ts):
    return store.row_transaction(
        table, row, steps.commit_spec(columns, start_ts),
        lambda r: steps.commit(r, columns, start_ts=start_ts, commit_ts=commit_ts),
    )


def must_commit(store, table, row, columns, start_ts, commit_ts):
    result = commit(store, table, row, columns, start_ts, commit_ts)
    assert result == Committed(commit_ts), result


def must_commit_fail(store, table, row, columns, start_ts, commit_ts):
    result = commit(store, table, row, columns, start_ts, commit_ts)
    assert isinstance(result, RolledBack), result


def rollback(store, table, row, columns, start_ts):
    return store.row_transaction(
        table, row, steps.rollback_spec(columns, start_ts),
        lambda r: steps.rollback(r, columns, start_ts=start_ts),
    )


def must_rollback(store, table, row, columns, start_ts):
    result = rollback(store, table, row, columns, start_ts)
    assert isinstance(result, RolledBack), result


def must_rollback_fail(store, table, row, columns, start_ts):
    result = rollback(store, table, row, columns, start_ts)
    assert isinstance(result, Committed), result
    return result.commit_ts


def check_status(store, primary: CellRef, start_ts, now_ms, owner_alive):
    return store.row_transaction(
        primary.table, primary.row, steps.check_txn_status_spec(primary.column, start_ts),
        lambda r: steps.check_txn_status(r, primary.column, start_ts=start_ts, now_ms=now_ms, owner_alive=owner_alive),
    )


def _raw(store, table, row):
    return store.read_row(table, row, ReadSpec(versions=1000))


def must_locked(store, table, row, column, start_ts) -> Lock:
    cell = _raw(store, table, row).latest(LOCK, qualifier(column))
    assert cell is not None and cell.ts == start_ts, f"expected lock @{start_ts}, found {cell}"
    return Lock.decode(cell.ts, cell.value)


def must_unlocked(store, table, row, column):
    cell = _raw(store, table, row).latest(LOCK, qualifier(column))
    assert cell is None, f"expected no lock, found one @{cell.ts}"


def must_written(store, table, row, column, commit_ts, start_ts, kind=Kind.PUT):
    cells = {c.ts: c for c in _raw(store, table, row).versions(WRITE, qualifier(column))}
    assert commit_ts in cells, f"no write record @{commit_ts}: {sorted(cells)}"
    assert Write.decode(cells[commit_ts].value) == Write(kind, start_ts)


def must_rolled_back(store, table, row, column, start_ts):
    must_written(store, table, row, column, start_ts, start_ts, Kind.ROLLBACK)


def must_have_data(store, table, row, column, start_ts, value):
    cells = {c.ts: c.value for c in _raw(store, table, row).versions(DATA, qualifier(column))}
    assert cells.get(start_ts) == value, cells


def must_have_no_data(store, table, row, column, start_ts):
    cells = {c.ts for c in _raw(store, table, row).versions(DATA, qualifier(column))}
    assert start_ts not in cells, cells


def must_notified(store, table, row, column, present=True):
    cell = _raw(store, table, row).latest(NOTIFY, qualifier(column))
    assert (cell is not None) == present, cell


def must_get(store, table, row, column, start_ts, expected):
    snapshot = store.read_row(table, row, steps.get_spec([column], start_ts))
    result = steps.read_cell(snapshot, column, start_ts)
    if isinstance(result, steps.NeedOlderWrite):
        spec = ReadSpec(columns=((WRITE, qualifier(column)), (data_family(qualifier(column)), qualifier(column))), max_ts=start_ts, versions=1000)
        result = steps.get.resolve_write(store.read_row(table, row, spec), qualifier(column), start_ts, all_versions_read=True)
    if isinstance(result, steps.NeedData):
        family = data_family(qualifier(column))
        spec = ReadSpec(columns=((family, qualifier(column)),), min_ts=result.data_ts, max_ts=result.data_ts)
        result = steps.Value(store.read_row(table, row, spec).latest(family, qualifier(column)).value)
    assert result == steps.Value(expected), result


def must_get_blocked(store, table, row, column, start_ts) -> Lock:
    snapshot = store.read_row(table, row, steps.get_spec([column], start_ts))
    result = steps.read_cell(snapshot, column, start_ts)
    assert isinstance(result, steps.Blocked), result
    return result.lock
