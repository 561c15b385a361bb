"""The storage contract, run on the real HBase and on the in-memory twin alike.

Each test uses its own row keys in a shared table, so the HBase run creates one table.
"""

from __future__ import annotations

import random
import threading
import uuid

import pytest

from caffeine.storage import (
    Decision,
    Delete,
    DeleteUpTo,
    FamilySpec,
    OutcomeUnknown,
    Put,
    ReadSpec,
    RowTransactionAborted,
    TableNotFound,
)
from caffeine.storage.model import GUARD_FAMILY
from caffeine.storage.row_prefix import summarize

FAMILIES = {b"a": FamilySpec(max_versions=1000), b"b": FamilySpec(max_versions=1000), b"one": FamilySpec()}
_created: dict[tuple[int, str], str] = {}


def _shared_table(store, kind: str, families) -> tuple:
    """(store, table): one table of ``kind`` per store instance, created on first use."""
    name = _created.get((id(store), kind))
    if name is None or name not in store.list_tables():
        name = f"{kind}_" + uuid.uuid4().hex[:6]
        store.create_table(name, families)
        _created[(id(store), kind)] = name
    return store, name


@pytest.fixture
def t(store):
    """(store, table): one contract table per store instance."""
    return _shared_table(store, "contract", FAMILIES)


@pytest.fixture
def row():
    return b"r-" + uuid.uuid4().hex.encode()


def values(r, family, qualifier):
    return [(c.ts, c.value) for c in r.versions(family, qualifier)]


def test_atomic_multi_cell_row_mutation(t, row):
    store, table = t
    store.mutate_row(table, row, [Put(b"a", b"x", 10, b"1"), Put(b"b", b"y", 10, b"1"), Put(b"one", b"z", 10, b"1")])
    store.mutate_row(table, row, [Put(b"a", b"x", 20, b"2"), Delete(b"b", b"y", 10), Put(b"b", b"y", 20, b"2")])
    r = store.read_row(table, row, ReadSpec(versions=10))
    assert values(r, b"a", b"x") == [(20, b"2"), (10, b"1")]
    assert values(r, b"b", b"y") == [(20, b"2")]
    assert values(r, b"one", b"z") == [(10, b"1")]


def test_concurrent_reader_never_sees_half_a_mutation(t, row):
    store, table = t
    stop = threading.Event()
    torn: list = []

    def reader():
        while not stop.is_set():
            r = store.read_row(table, row, ReadSpec(families=(b"a", b"b")))
            a, b = r.latest(b"a", b"x"), r.latest(b"b", b"y")
            if (a is None) != (b is None) or (a and a.value != b.value):
                torn.append((a, b))

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    try:
        for i in range(1, 150):
            # Each step deletes the previous pair and writes a new one: a reader between the
            # delete and the put of a non-atomic write would see one side missing.
            store.mutate_row(table, row, [
                Delete(b"a", b"x", i - 1), Delete(b"b", b"y", i - 1),
                Put(b"a", b"x", i, b"%d" % i), Put(b"b", b"y", i, b"%d" % i),
            ])
    finally:
        stop.set()
        for th in threads:
            th.join()
    assert torn == []


def test_single_version_delete_removes_exactly_one_version(t, row):
    store, table = t
    store.mutate_row(table, row, [Put(b"a", b"x", ts, b"v%d" % ts) for ts in (1, 2, 3)])
    store.mutate_row(table, row, [Delete(b"a", b"x", 2)])
    assert values(store.read_row(table, row, ReadSpec(versions=10)), b"a", b"x") == [(3, b"v3"), (1, b"v1")]


def test_delete_up_to_removes_older_versions_and_hides_later_puts_below_it(t, row):
    store, table = t
    store.mutate_row(table, row, [Put(b"a", b"x", ts, b"v%d" % ts) for ts in (1, 2, 3)])
    store.mutate_row(table, row, [DeleteUpTo(b"a", b"x", 2)])
    assert values(store.read_row(table, row, ReadSpec(versions=10)), b"a", b"x") == [(3, b"v3")]
    # HBase keeps the marker: a put below it stays hidden. The protocol never does this;
    # the test pins the behaviour so the in-memory twin stays faithful.
    store.mutate_row(table, row, [Put(b"a", b"x", 1, b"late")])
    assert values(store.read_row(table, row, ReadSpec(versions=10)), b"a", b"x") == [(3, b"v3")]


@pytest.mark.parametrize("versions", [1, 3], ids=["thrift1-path", "thrift2-path"])
def test_read_as_of_t_includes_t(t, row, versions):
    store, table = t
    store.mutate_row(table, row, [Put(b"a", b"x", 5, b"five"), Put(b"a", b"x", 7, b"seven")])
    def newest(max_ts):
        cell = store.read_row(table, row, ReadSpec(families=(b"a",), max_ts=max_ts, versions=versions)).latest(b"a", b"x")
        return cell and (cell.ts, cell.value)
    assert newest(7) == (7, b"seven")
    assert newest(6) == (5, b"five")
    assert newest(5) == (5, b"five")
    assert newest(4) is None
    assert newest(None) == (7, b"seven")


def test_min_ts_and_versions(t, row):
    store, table = t
    store.mutate_row(table, row, [Put(b"a", b"x", ts, b"%d" % ts) for ts in (3, 5, 7, 9)])
    r = store.read_row(table, row, ReadSpec(columns=((b"a", b"x"),), min_ts=5, max_ts=7, versions=10))
    assert values(r, b"a", b"x") == [(7, b"7"), (5, b"5")]
    r = store.read_row(table, row, ReadSpec(columns=((b"a", b"x"),), versions=2))
    assert values(r, b"a", b"x") == [(9, b"9"), (7, b"7")]


def test_family_max_versions_caps_reads(t, row):
    store, table = t
    store.mutate_row(table, row, [Put(b"one", b"z", 1, b"old")])
    store.mutate_row(table, row, [Put(b"one", b"z", 2, b"new")])
    assert values(store.read_row(table, row, ReadSpec(versions=10)), b"one", b"z") == [(2, b"new")]


def test_read_rows_returns_every_key(t):
    store, table = t
    keys = [b"rr-" + uuid.uuid4().hex.encode() for _ in range(3)]
    store.mutate_row(table, keys[0], [Put(b"a", b"x", 1, b"0")])
    store.mutate_row(table, keys[2], [Put(b"a", b"x", 1, b"2")])
    for versions in (1, 2):
        got = store.read_rows(table, keys, ReadSpec(versions=versions))
        assert set(got) == set(keys)
        assert got[keys[0]].latest(b"a", b"x").value == b"0"
        assert not got[keys[1]]
        assert got[keys[2]].latest(b"a", b"x").value == b"2"


def test_read_latest_gives_newest_values_of_the_families_asked_and_no_guard(t):
    store, table = t
    keys = [b"rl-" + uuid.uuid4().hex.encode() for _ in range(3)]
    store.mutate_row(table, keys[0], [Put(b"a", b"x", 1, b"old"), Put(b"a", b"y", 1, b"")])
    store.mutate_row(table, keys[0], [Put(b"a", b"x", 2, b"new"), Put(b"b", b"z", 1, b"other family")])
    store.mutate_row(table, keys[2], [Put(b"a", "é".encode(), 5, b"v")])
    got = store.read_latest(table, keys + [keys[0]], [b"a"])
    # Empty values are values; rows without cells are left out; the row guard never shows.
    assert got == {keys[0]: {b"a:x": b"new", b"a:y": b""}, keys[2]: {"a:é".encode(): b"v"}}
    assert store.read_latest(table, [keys[0]], [b"a", b"b"])[keys[0]][b"b:z"] == b"other family"
    assert store.read_latest(table, [], [b"a"]) == {}
    # Single columns, alone or with families.
    assert store.read_latest(table, keys, (), [(b"a", b"x"), (b"a", "é".encode()), (b"a", b"nope")]) == {
        keys[0]: {b"a:x": b"new"}, keys[2]: {"a:é".encode(): b"v"}}
    assert store.read_latest(table, [keys[0]], [b"b"], [(b"a", b"y")]) == {keys[0]: {b"b:z": b"other family", b"a:y": b""}}


def test_read_cells_gives_each_row_its_own_columns_newest_values(t):
    store, table = t
    keys = [b"rc-" + uuid.uuid4().hex.encode() for _ in range(3)]
    store.mutate_row(table, keys[0], [Put(b"a", b"x", 1, b"old"), Put(b"a", b"y", 1, b"")])
    store.mutate_row(table, keys[0], [Put(b"a", b"x", 2, b"new"), Put(b"b", b"z", 1, b"zz")])
    store.mutate_row(table, keys[1], [Put(b"a", b"x", 1, b"one"), Put(b"a", "é".encode(), 5, b"v")])
    got = store.read_cells(table, {keys[0]: [(b"a", b"x"), (b"a", b"y"), (b"a", b"nope")],
                                   keys[1]: [(b"a", "é".encode())], keys[2]: [(b"a", b"x")]})
    # Only each row's own columns (keys[1]'s a:x is not asked); empty values are values;
    # rows without such cells, and the row guard, never show.
    assert got == {keys[0]: {b"a:x": b"new", b"a:y": b""}, keys[1]: {"a:é".encode(): b"v"}}
    assert store.read_cells(table, {keys[0]: [(b"b", b"z")], keys[1]: []}) == {keys[0]: {b"b:z": b"zz"}}
    assert store.read_cells(table, {}) == {}


def test_read_prefix_refuses_more_than_max_prefix_cells_before_sending(t):
    """Both stores refuse a prefix longer than ``MAX_PREFIX`` (the coprocessor would), and a
    negative limit or ``since``, with ValueError."""
    from caffeine.storage import MAX_PREFIX

    store, table = t
    assert store.read_prefix(table, [b"rp-none"], b"a", MAX_PREFIX)[b"rp-none"].count == 0
    for limit, since in ((MAX_PREFIX + 1, None), (MAX_PREFIX + 1, 5), (-1, None), (4, -1)):
        with pytest.raises(ValueError):
            store.read_prefix(table, [b"rp-none"], b"a", limit, since)


def test_read_prefix_gives_the_first_non_empty_cells_the_recent_ones_and_the_count(t):
    store, table = t
    key, empty = b"rp-" + uuid.uuid4().hex.encode(), b"rp-" + uuid.uuid4().hex.encode()
    # c00..c19 at ts 5; every third one emptied later (a serving table's tombstone); c17 and
    # c18 rewritten at ts 50; family b must not count.
    store.mutate_row(table, key, [Put(b"a", b"c%02d" % i, 5, b"v%d" % i) for i in range(20)]
                     + [Put(b"b", b"c00", 5, b"other family")])
    store.mutate_row(table, key, [Put(b"a", b"c%02d" % i, 9, b"") for i in range(0, 20, 3)])
    store.mutate_row(table, key, [Put(b"a", b"c17", 50, b"new17"), Put(b"a", b"c18", 50, b"")])
    live = [(b"c%02d" % i, b"new17" if i == 17 else b"v%d" % i) for i in range(20) if i % 3 and i != 18]
    got = store.read_prefix(table, [key, empty, key], b"a", 4)
    assert set(got) == {key, empty}
    assert (got[key].cells, got[key].count, got[key].recent) == (tuple(live[:4]), len(live), ())
    assert (got[empty].cells, got[empty].count) == ((), 0)
    assert store.read_prefix(table, [key], b"a", 0)[key].count == len(live)
    assert store.read_prefix(table, [key], b"a", 100)[key].cells == tuple(live)
    # Later cells written at or after `since` come as well (emptied ones do not).
    recent = store.read_prefix(table, [key], b"a", 4, since=50)[key]
    assert (recent.cells, recent.recent, recent.count) == (tuple(live[:4]), ((b"c17", b"new17"),), len(live))
    assert store.read_prefix(table, [key], b"a", 4, since=6)[key].recent == (((b"c17", b"new17"),))
    assert store.read_prefix(table, [key], b"a", 4, since=5)[key].recent == tuple(live[4:])
    assert store.read_prefix(table, [], b"a", 4) == {}


@pytest.mark.parametrize("versions", [1, 2], ids=["thrift1-path", "thrift2-path"])
def test_scan_range_limit_pages_and_key_only(t, versions):
    store, table = t
    base = b"scan-" + uuid.uuid4().hex.encode() + b"-"
    for i in range(25):
        store.mutate_row(table, base + b"%02d" % i, [Put(b"a", b"x", 1, b"v%d" % i)])
    spec = ReadSpec(versions=versions)
    rows = list(store.scan(table, base + b"03", base + b"20", spec, batch_size=4))
    assert [r.key for r in rows] == [base + b"%02d" % i for i in range(3, 20)]
    assert rows[0].latest(b"a", b"x").value == b"v3"
    assert len(list(store.scan(table, base, base + b"\xff", spec, limit=7, batch_size=3))) == 7
    keys_only = list(store.scan(table, base, base + b"\xff", spec, key_only=True))
    assert len(keys_only) == 25 and all(c.value == b"" for r in keys_only for c in r)


@pytest.mark.parametrize("versions", [1, 2], ids=["thrift1-path", "thrift2-path"])
def test_scan_first_cell_only_sends_the_newest_version_of_each_rows_first_column(t, versions):
    store, table = t
    base = b"first-" + uuid.uuid4().hex.encode() + b"-"
    store.mutate_row(table, base + b"1", [Put(b"a", b"m", 1, b"old"), Put(b"a", b"z", 1, b"z")])
    store.mutate_row(table, base + b"1", [Put(b"a", b"m", 2, b"new")])
    store.mutate_row(table, base + b"2", [Put(b"b", b"a", 1, b"other family"), Put(b"a", b"q", 1, b"")])
    store.mutate_row(table, base + b"3", [Put(b"b", b"c", 1, b"only b")])
    rows = list(store.scan(table, base, base + b"\xff", ReadSpec(versions=versions), first_cell_only=True))
    assert [(r.key, [(c.family, c.qualifier, c.ts, c.value) for c in r]) for r in rows] == [
        (base + b"1", [(b"a", b"m", 2, b"new")]),
        (base + b"2", [(b"a", b"q", 1, b"")]),  # an empty value is a value
        (base + b"3", [(b"b", b"c", 1, b"only b")]),
    ]
    keys = list(store.scan(table, base, base + b"\xff", ReadSpec(versions=versions), first_cell_only=True,
                           key_only=True))
    assert [[(c.qualifier, c.value) for c in r] for r in keys] == [[(b"m", b"")], [(b"q", b"")], [(b"c", b"")]]


def test_row_transaction_applies_decision_and_returns_result(t, row):
    store, table = t
    def decide(r):
        current = r.latest(b"a", b"n")
        n = int(current.value) if current else 0
        return Decision([Put(b"a", b"n", 1, b"%d" % (n + 1))], n + 1)
    assert store.row_transaction(table, row, ReadSpec(families=(b"a",)), decide) == 1
    assert store.row_transaction(table, row, ReadSpec(families=(b"a",)), decide) == 2
    assert store.row_transaction(table, row, ReadSpec(), lambda r: Decision((), "nothing")) == "nothing"


@pytest.mark.parametrize("change_back", [False, True], ids=["changed", "changed-and-changed-back"])
def test_row_transaction_rejects_apply_when_a_read_cell_changed(t, row, change_back):
    store, table = t
    store.mutate_row(table, row, [Put(b"a", b"x", 1, b"original")])
    seen = []

    def decide(r):
        seen.append(r.latest(b"a", b"x").value)
        if len(seen) == 1:
            # Another writer changes the cell between our read and our apply.
            store.mutate_row(table, row, [Put(b"a", b"x", 1, b"intruder")])
            if change_back:
                store.mutate_row(table, row, [Put(b"a", b"x", 1, b"original")])
        return Decision([Put(b"b", b"y", 1, seen[-1])], len(seen))

    attempts = store.row_transaction(table, row, ReadSpec(), decide)
    assert attempts == 2, "the first apply must have been rejected"
    expected = b"original" if change_back else b"intruder"
    assert store.read_row(table, row).latest(b"b", b"y").value == expected


def test_compare_and_apply_fails_on_stale_guard_even_when_values_match(t, row):
    store, table = t
    store.mutate_row(table, row, [Put(b"a", b"x", 1, b"v")])
    stale = store._read_guarded(table, row, ReadSpec()).guard
    store.mutate_row(table, row, [Put(b"a", b"x", 1, b"v")])  # same value, same version
    assert not store._compare_and_apply(table, row, stale, [Put(b"b", b"y", 1, b"no")], b"tok-1")
    fresh = store._read_guarded(table, row, ReadSpec()).guard
    assert store._compare_and_apply(table, row, fresh, [Put(b"b", b"y", 1, b"yes")], b"tok-2")
    # A row that was never written has no guard; "absent" is a state the check can match.
    new_row = row + b"-new"
    assert store._read_guarded(table, new_row, ReadSpec()).guard is None
    assert store._compare_and_apply(table, new_row, None, [Put(b"a", b"x", 1, b"first")], b"tok-3")
    assert not store._compare_and_apply(table, new_row, None, [Put(b"a", b"x", 1, b"second")], b"tok-4")


def test_row_transaction_gives_up_after_bounded_attempts(t, row):
    store, table = t
    def always_interfered(r):
        store.mutate_row(table, row, [Put(b"a", b"x", 1, b"bump")])
        return Decision([Put(b"b", b"y", 1, b"never")], None)
    with pytest.raises(RowTransactionAborted) as info:
        store.row_transaction(table, row, ReadSpec(), always_interfered, max_attempts=3)
    assert info.value.attempts == 3
    assert store.read_row(table, row).latest(b"b", b"y") is None


def test_eight_threads_read_increment_apply_lose_no_update(t, row):
    store, table = t
    per_thread = 25
    successes = []
    lock = threading.Lock()

    def increment(r):
        cell = r.latest(b"a", b"n")
        n = int(cell.value) if cell else 0
        return Decision([Put(b"a", b"n", 1, b"%d" % (n + 1))], n + 1)

    def worker():
        for _ in range(per_thread):
            result = store.row_transaction(table, row, ReadSpec(families=(b"a",)), increment, max_attempts=1000)
            with lock:
                successes.append(result)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    final = int(store.read_row(table, row).latest(b"a", b"n").value)
    assert final == len(successes) == 8 * per_thread
    assert sorted(successes) == list(range(1, final + 1)), "every increment saw a distinct value"


def test_unknown_outcome_is_resolved_by_rereading(t, row, monkeypatch):
    """The write is applied but its answer is lost: the loop must not apply it twice."""
    store, table = t
    real = store._compare_and_apply
    calls = []

    def applied_then_lost(*args):
        calls.append(args)
        real(*args)
        raise OutcomeUnknown("answer lost after the server applied the write")

    monkeypatch.setattr(store, "_compare_and_apply", applied_then_lost)

    def append_once(r):
        cell = r.latest(b"a", b"log")
        log = cell.value if cell else b""
        return Decision([Put(b"a", b"log", 1, log + b"+")], log + b"+")

    assert store.row_transaction(table, row, ReadSpec(), append_once) == b"+"
    assert len(calls) == 1
    monkeypatch.undo()
    assert store.read_row(table, row).latest(b"a", b"log").value == b"+"


def test_unknown_outcome_not_applied_decides_again(t, row, monkeypatch):
    store, table = t
    real = store._compare_and_apply
    calls = []

    def lost_before_applying(*args):
        calls.append(args)
        if len(calls) == 1:
            raise OutcomeUnknown("request never reached the server")
        return real(*args)

    monkeypatch.setattr(store, "_compare_and_apply", lost_before_applying)
    result = store.row_transaction(table, row, ReadSpec(), lambda r: Decision([Put(b"a", b"x", 1, b"v")], "ok"))
    assert result == "ok" and len(calls) == 2
    monkeypatch.undo()
    assert store.read_row(table, row).latest(b"a", b"x").value == b"v"


def test_missing_table_is_reported_by_name(store):
    with pytest.raises(TableNotFound):
        store.read_row("no_such_table_" + uuid.uuid4().hex[:6], b"r")
    with pytest.raises(TableNotFound):
        store.mutate_row("no_such_table_" + uuid.uuid4().hex[:6], b"r", [Put(b"a", b"x", 1, b"v")])


def test_row_transaction_with_a_right_guess_skips_the_read_and_a_wrong_one_recovers(t, row):
    store, table = t
    spec = ReadSpec(families=(b"a",))

    def bump(r):
        cell = r.latest(b"a", b"n")
        n = int(cell.value) if cell else 0
        return Decision([Put(b"a", b"n", 1, b"%d" % (n + 1))], n + 1)

    result, guard = store.row_transaction(table, row, spec, bump, with_guard=True)
    assert result == 1
    from caffeine.storage import Cell, Row
    right = Row(row, [Cell(b"a", b"n", 1, b"1")], guard)
    result, guard = store.row_transaction(table, row, spec, bump, guess=right, with_guard=True)
    assert result == 2
    stale = Row(row, [Cell(b"a", b"n", 1, b"1")], b"not-the-guard")
    assert store.row_transaction(table, row, spec, bump, guess=stale) == 3
    assert store.read_row(table, row).latest(b"a", b"n").value == b"3"


def test_create_existing_table_is_reported_and_drop_removes_it(store):
    from caffeine.storage import TableExists

    name = "exists_" + uuid.uuid4().hex[:6]
    store.create_table(name, {b"a": FamilySpec()})
    with pytest.raises(TableExists):
        store.create_table(name, {b"a": FamilySpec()})
    assert name in store.list_tables()
    store.drop_table(name)
    assert name not in store.list_tables()
    with pytest.raises(TableNotFound):
        store.drop_table(name)


def test_a_table_created_split_starts_as_those_regions_and_reads_across_them(store):
    name = "split_" + uuid.uuid4().hex[:6]
    with pytest.raises(ValueError, match="split keys"):
        store.create_table(name, {b"a": FamilySpec()}, [b"m", b"g"])
    with pytest.raises(ValueError, match="split keys"):
        store.create_table(name, {b"a": FamilySpec()}, [b""])
    assert name not in store.list_tables()
    store.create_table(name, {b"a": FamilySpec()}, [b"g", b"p"])
    try:
        regions = store.regions(name)
        assert [(r.start, r.end) for r in regions] == [(b"", b"g"), (b"g", b"p"), (b"p", b"")]
        assert all(r.server for r in regions)
        rows = [b"a", b"g", b"h", b"p", b"z"]
        for i, row in enumerate(rows):
            store.mutate_row(name, row, [Put(b"a", b"x", 1, b"%d" % i)])
        assert [r.key for r in store.scan(name)] == rows
        assert [r.key for r in store.scan(name, b"f", b"q")] == [b"g", b"h", b"p"]
        assert store.read_row(name, b"z").latest(b"a", b"x").value == b"4"
    finally:
        store.drop_table(name)
    with pytest.raises(TableNotFound):
        store.regions(name)


def test_families_name_a_tables_families_without_the_guard(t, store):
    _, table = t
    assert store.families(table) == (b"a", b"b", b"one")
    with pytest.raises(TableNotFound):
        store.families("missing_" + uuid.uuid4().hex[:6])


def test_empty_row_keys_are_refused_with_a_clear_error(t):
    store, table = t
    with pytest.raises(ValueError, match="row key"):
        store.read_row(table, b"")
    with pytest.raises(ValueError, match="row key"):
        store.mutate_row(table, b"", [Put(b"a", b"x", 1, b"v")])


def test_put_rows_writes_many_rows_idempotently(t):
    store, table = t
    base = b"pr-" + uuid.uuid4().hex.encode()
    rows = {base + b"%d" % i: [Put(b"a", b"x", 7, b"v%d" % i), Put(b"b", b"y", 7, b"w")] for i in range(5)}
    store.put_rows(table, rows)
    store.put_rows(table, rows)  # a replay writes the same versions
    for i in range(5):
        r = store.read_row(table, base + b"%d" % i, ReadSpec(versions=10))
        assert values(r, b"a", b"x") == [(7, b"v%d" % i)] and values(r, b"b", b"y") == [(7, b"w")]


def test_put_cells_writes_the_cells_and_hbase_keeps_the_guard(t):
    """``put_cells`` (serving tables): the cells land as ``put_rows``' would, a replay
    included, each row's in one cell list (with the same row given by two batched callers,
    both lists). The HBase store then writes no guard cell, so a row's guard token stays what
    it was, through the batching store too; the in-memory store may replace it (the contract
    allows both)."""
    from caffeine.storage.batching import BatchingStore
    from caffeine.storage.memory import MemoryStore

    store, table = t
    base = b"pu-" + uuid.uuid4().hex.encode()
    guarded = base + b"g"
    store.mutate_row(table, guarded, [Put(b"a", b"x", 1, b"first")])
    before = store._read_guarded(table, guarded, ReadSpec()).guard
    rows = {base + b"%d" % i: [(b"a", b"x", 7, b"v%d" % i), (b"b", b"y", 7, b"w")] for i in range(5)}
    rows[guarded] = [(b"a", b"x", 2, b"second")]
    batching = BatchingStore(store)
    for writer in (store, batching):  # the second is a replay: the same versions again
        writer.put_cells(table, rows)
    for i in range(5):
        r = store.read_row(table, base + b"%d" % i, ReadSpec(versions=10))
        assert values(r, b"a", b"x") == [(7, b"v%d" % i)] and values(r, b"b", b"y") == [(7, b"w")]
    after = store._read_guarded(table, guarded, ReadSpec(versions=10))
    assert values(after, b"a", b"x") == [(2, b"second"), (1, b"first")]
    if not isinstance(store, MemoryStore):
        assert after.guard == before
        assert store._read_guarded(table, base + b"0", ReadSpec()).guard is None
    # Two callers' cells of one row merged into one call of the batching store.
    merged = base + b"m"
    batching._call_cells(table, [(merged, [(b"a", b"x", 9, b"one")]), (merged, [(b"b", b"y", 9, b"two")])])
    r = store.read_row(table, merged, ReadSpec())
    assert values(r, b"a", b"x") == [(9, b"one")] and values(r, b"b", b"y") == [(9, b"two")]
    # A reserved family is refused before anything is sent.
    with pytest.raises(ValueError):
        store.put_cells(table, {base + b"r": [(b"a", b"x", 9, b"v"), (GUARD_FAMILY, b"x", 9, b"v")]})
    assert not store.read_row(table, base + b"r", ReadSpec())
    # put_rows (with the guard) replaces the token, on every store.
    store.put_rows(table, {guarded: [Put(b"a", b"x", 3, b"third")]})
    assert store._read_guarded(table, guarded, ReadSpec()).guard not in (None, before)


def test_delete_rows_removes_exact_versions_in_many_rows(t):
    store, table = t
    base = b"dr-" + uuid.uuid4().hex.encode()
    rows = {base + b"%d" % i: [Put(b"a", b"x", 1, b"old"), Put(b"a", b"x", 2, b"new")] for i in range(4)}
    store.put_rows(table, rows)
    store.delete_rows(table, {row: [Delete(b"a", b"x", 2)] for row in rows})
    store.delete_rows(table, {row: [Delete(b"a", b"x", 2)] for row in rows})  # idempotent
    for row in rows:
        assert values(store.read_row(table, row, ReadSpec(versions=10)), b"a", b"x") == [(1, b"old")]


def test_delete_rows_removes_versions_up_to_a_timestamp_in_many_rows(t):
    store, table = t
    base = b"du-" + uuid.uuid4().hex.encode()
    rows = {base + b"%d" % i: [Put(b"a", b"x", ts, b"v%d" % ts) for ts in (1, 2, 3)] + [Put(b"a", b"y", 1, b"y")]
            for i in range(4)}
    store.put_rows(table, rows)
    # Mixed in one call: everything up to 2 of one column, one exact version of another.
    store.delete_rows(table, {row: [DeleteUpTo(b"a", b"x", 2), Delete(b"a", b"y", 1)] for row in rows})
    store.delete_rows(table, {row: [DeleteUpTo(b"a", b"x", 2)] for row in rows})  # idempotent
    for row in rows:
        r = store.read_row(table, row, ReadSpec(versions=10))
        assert values(r, b"a", b"x") == [(3, b"v3")] and values(r, b"a", b"y") == []


def test_read_rows_guarded_gives_snapshots_a_row_transaction_can_trust(t):
    store, table = t
    base = b"rg-" + uuid.uuid4().hex.encode()
    a, b, missing = base + b"a", base + b"b", base + b"z"
    store.mutate_row(table, a, [Put(b"a", b"x", 1, b"1")])
    store.mutate_row(table, b, [Put(b"b", b"y", 1, b"2")])
    got = store.read_rows_guarded(table, {a: ReadSpec(families=(b"a",)), b: ReadSpec(families=(b"b",)), missing: ReadSpec()})
    assert got[a].latest(b"a", b"x").value == b"1" and got[b].latest(b"b", b"y").value == b"2"
    assert got[a].guard is not None and got[missing].guard is None and not got[missing]
    bump = lambda r: Decision([Put(b"a", b"n", 1, b"x")], "applied")
    assert store.row_transaction(table, a, ReadSpec(families=(b"a",)), bump, guess=got[a]) == "applied"


# -- counted families ------------------------------------------------------------------------

COUNTED = {b"c": FamilySpec(counted=True), b"d": FamilySpec(counted=True), b"plain": FamilySpec()}


@pytest.fixture
def ct(store):
    """(store, table) with counted families c and d and an uncounted one, one per store."""
    return _shared_table(store, "counted", COUNTED)


def _walked(store, table, key, family, limit, since):
    """The summary of the whole row, read and summarized here: what a counted family's
    ``read_prefix`` must equal."""
    row = store.read_row(table, key, ReadSpec(families=(family,)))
    cells = sorted(((c.qualifier, c.value, c.ts) for c in row.newest_cells()))
    return summarize(cells, limit, since, server_side=False)


def assert_summaries_are_walks(store, table, keys, family=b"c", sinces=(None, 0, 10, 25, 60)):
    for limit in (0, 1, 3, 1000):
        for since in sinces:
            got = store.read_prefix(table, keys, family, limit, since)
            for key in keys:
                want = _walked(store, table, key, family, limit, since)
                assert (got[key].cells, got[key].recent, got[key].count) == (want.cells, want.recent, want.count), \
                    (key, limit, since)


def _key():
    return b"cr-" + uuid.uuid4().hex.encode()


def test_counted_family_summaries_follow_new_cells_tombstones_and_relived_cells(ct):
    store, table = ct
    key = _key()
    store.put_rows(table, {key: [Put(b"c", b"q%02d" % i, 5, b"v%d" % i) for i in range(12)]})
    assert store.read_prefix(table, [key], b"c", 0)[key].count == 12
    store.put_rows(table, {key: [Put(b"c", b"q%02d" % i, 20, b"") for i in range(0, 12, 3)]})   # tombstones
    assert store.read_prefix(table, [key], b"c", 0)[key].count == 8
    store.put_rows(table, {key: [Put(b"c", b"q03", 30, b"back"), Put(b"c", b"q40", 30, b"new")]})  # re-lived, new
    got = store.read_prefix(table, [key], b"c", 3, since=30)[key]
    assert got.count == 10 and got.cells[0] == (b"q01", b"v1") and got.recent == ((b"q40", b"new"),)
    assert_summaries_are_walks(store, table, [key])


def test_counted_family_ignores_replays_and_late_writes_below_the_newest(ct):
    store, table = ct
    key = _key()
    store.put_rows(table, {key: [Put(b"c", b"a", 10, b"x"), Put(b"c", b"b", 10, b"")]})
    for _ in range(2):   # replays: the same cells at the same timestamps
        store.put_rows(table, {key: [Put(b"c", b"a", 10, b"x"), Put(b"c", b"b", 10, b"")]})
    assert store.read_prefix(table, [key], b"c", 0)[key].count == 1
    # Late writes below the newest version stay hidden and change nothing.
    store.mutate_row(table, key, [Put(b"c", b"a", 5, b""), Put(b"c", b"b", 5, b"y")])
    assert store.read_prefix(table, [key], b"c", 0)[key].count == 1
    # At the same timestamp the later write wins.
    store.mutate_row(table, key, [Put(b"c", b"a", 10, b"")])
    assert store.read_prefix(table, [key], b"c", 0)[key].count == 0
    store.mutate_row(table, key, [Put(b"c", b"b", 10, b"z")])
    assert store.read_prefix(table, [key], b"c", 0)[key].count == 1
    assert_summaries_are_walks(store, table, [key])


def test_counted_families_count_several_rows_and_columns_of_one_write(ct):
    store, table = ct
    keys = [_key() for _ in range(4)]
    store.put_rows(table, {k: [Put(b"c", b"q%d" % i, 7, b"v") for i in range(n + 1)]
                           + [Put(b"d", b"q", 7, b"d"), Put(b"plain", b"q", 7, b"p")] for n, k in enumerate(keys)})
    store.put_rows(table, {k: [Put(b"c", b"q0", 8, b""), Put(b"d", b"r", 8, b"d2")] for k in keys[::2]})
    got = store.read_prefix(table, keys, b"c", 2)
    assert [got[k].count for k in keys] == [0, 2, 2, 4]
    assert [c.count for c in store.read_prefix(table, keys, b"d", 0).values()] == [2, 1, 2, 1]
    assert store.read_prefix(table, keys, b"plain", 0)[keys[0]].count == 1
    for family in (b"c", b"d"):
        assert_summaries_are_walks(store, table, keys, family)


def test_counted_family_random_writes_match_a_model(ct):
    store, table = ct
    rng = random.Random(1515)
    keys = [_key() for _ in range(5)]
    model: dict[bytes, dict[bytes, tuple[int, bytes]]] = {k: {} for k in keys}   # newest (ts, value)
    for step in range(120):
        batch = {}
        for key in rng.sample(keys, rng.randint(1, 3)):
            puts = []
            for _ in range(rng.randint(1, 6)):
                q = b"q%02d" % rng.randrange(16)
                ts = rng.randint(1, 60)
                value = b"" if rng.random() < 0.35 else b"v%d" % step
                if any(p.qualifier == q for p in puts):
                    continue   # one version per column and write: HBase's order inside one is its own
                puts.append(Put(b"c", q, ts, value))
                current = model[key].get(q)
                if current is None or ts >= current[0]:
                    model[key][q] = (ts, value)
            batch[key] = puts
        store.put_rows(table, batch)
        if step % 30 == 29:
            got = store.read_prefix(table, keys, b"c", 4, since=40)
            for key in keys:
                want = summarize(((q, v, ts) for q, (ts, v) in sorted(model[key].items())), 4, 40, server_side=False)
                assert (got[key].cells, got[key].recent, got[key].count) == (want.cells, want.recent, want.count)
    assert_summaries_are_walks(store, table, keys)


def test_counted_family_summaries_of_a_row_longer_than_the_servers_read_batches(ct):
    store, table = ct
    key = _key()
    store.put_rows(table, {key: [Put(b"c", b"q%05d" % i, 5, b"v") for i in range(1500)]})
    store.put_rows(table, {key: [Put(b"c", b"q%05d" % i, 30, b"" if i % 4 else b"w") for i in range(0, 1500, 2)]})
    for limit, since in ((600, None), (600, 30), (1200, 30), (0, 30)):
        got = store.read_prefix(table, [key], b"c", limit, since)[key]
        want = _walked(store, table, key, b"c", limit, since)
        assert (got.cells, got.recent, got.count) == (want.cells, want.recent, want.count)
    assert got.count == 750 + 375


def test_counted_family_refuses_deletes_and_applies_nothing_of_the_write(ct):
    from caffeine.storage import StorageError

    store, table = ct
    key, other = _key(), _key()
    store.put_rows(table, {key: [Put(b"c", b"a", 10, b"x")], other: [Put(b"plain", b"a", 10, b"x")]})
    with pytest.raises(StorageError, match="CAFFEINE-COUNT.*empty value"):
        store.mutate_row(table, key, [Put(b"c", b"b", 11, b"y"), Delete(b"c", b"a", 10)])
    with pytest.raises(StorageError, match="CAFFEINE-COUNT"):
        store.delete_rows(table, {key: [DeleteUpTo(b"c", b"a", 10)]})
    assert store.read_prefix(table, [key], b"c", 10)[key].cells == ((b"a", b"x"),)
    # Uncounted families still take deletes, in the same table.
    store.delete_rows(table, {other: [Delete(b"plain", b"a", 10)]})
    assert not store.read_row(table, other)


def test_the_count_family_is_invisible_and_reserved(ct):
    store, table = ct
    key = _key()
    store.put_rows(table, {key: [Put(b"c", b"a", 10, b"x")]})
    assert store.families(table) == (b"c", b"d", b"plain")
    assert {c.family for c in store.read_row(table, key)} == {b"c"}
    assert {c.family for row in store.scan(table, key, key + b"\x00") for c in row} == {b"c"}
    with pytest.raises(ValueError, match="reserved"):
        store.put_rows(table, {key: [Put(b"_n", b"c", 10, b"5")]})
    with pytest.raises(ValueError, match="reserved"):
        store.create_table("reserved_" + uuid.uuid4().hex[:6], {b"_n": FamilySpec()})
