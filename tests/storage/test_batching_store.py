"""The batching store: concurrent callers' calls combined into multi-row calls, each caller
getting what a call of its own would have given (caffeine.storage.batching).

On the in-memory store and on HBase (the same store contract), plus the leader protocol on a
scripted inner store: combining, answers per caller, errors and unknown outcomes shared by a
call's callers, refusals answering their own row only, and never two checked writes of one
row in one call.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from caffeine.percolator import layout
from caffeine.percolator.records import CellRef, Kind, Lock
from caffeine.percolator.steps import server
from caffeine.storage import OutcomeUnknown, Put, ReadSpec, Refusal, StorageError
from caffeine.storage.batching import BatchingStore, CallBatcher, Lockstep
from caffeine.storage.memory import MemoryStore
from caffeine.storage.model import Delete, FamilySpec

FAMILIES = {b"f": FamilySpec(max_versions=10)}


def run_threads(n, fn):
    """Run ``fn(i)`` on ``n`` threads started together; their results in order."""
    out = [None] * n
    errors = []
    start = threading.Barrier(n)

    def one(i):
        start.wait()
        try:
            out[i] = fn(i)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    if errors:
        raise errors[0]
    return out


@pytest.fixture(params=["memory", "hbase"])
def batching(request):
    """(BatchingStore, table) over the in-memory store (running the coprocessor's row steps'
    model) or HBase (running the coprocessor)."""
    if request.param == "memory":
        inner = MemoryStore(row_step=server.row_step)
    else:
        inner = request.getfixturevalue("hbase_store")
    store = BatchingStore(inner, linger_ms=2.0)
    table = "bt" + uuid.uuid4().hex[:10]
    layout.create_table(store, table)
    yield store, table
    inner.drop_table(table)


def test_concurrent_reads_and_writes_are_combined_and_each_caller_gets_its_own(batching):
    store, table = batching
    calls_before = store.stats.as_dict().get("batched_calls", 0)
    run_threads(16, lambda i: store.put_rows(table, {b"r%02d" % i: [Put(b"d", b"c", 10, b"v%d" % i)]}))
    rows = run_threads(16, lambda i: store.read_row(table, b"r%02d" % i, ReadSpec(families=(b"d",))))
    assert [r.latest(b"d", b"c").value for r in rows] == [b"v%d" % i for i in range(16)]
    guarded = run_threads(8, lambda i: store.read_rows_guarded(table, {b"r%02d" % i: ReadSpec(families=(b"d",))}))
    assert all(g[b"r%02d" % i].guard for i, g in enumerate(guarded))
    calls = store.stats.as_dict()["batched_calls"] - calls_before
    assert calls < 16 + 16 + 8, "nothing was combined"


def lock(start_ts):
    return Lock(start_ts, Kind.PUT, CellRef("t", b"p", "c"), 3000, b"owner", 0).encode()


def test_concurrent_prewrites_of_one_row_never_share_a_call_and_exactly_one_wins(batching):
    store, table = batching
    partly_before = store.stats.as_dict().get("checked_calls_partly_refused", 0)

    def prewrite(i):
        start_ts = 1000 + i
        write = server.prewrite_write({"c": b"v%d" % i}, {"c": lock(start_ts)}, start_ts)
        return store.apply_checked(table, {b"hot": write, b"own%d" % i: write})

    answers = run_threads(8, prewrite)
    winners = [i for i, a in enumerate(answers) if a[b"hot"] is None]
    assert len(winners) == 1
    assert all(a[b"hot"].answer == "LOCKED" for i, a in enumerate(answers) if i not in winners)
    assert all(a[b"own%d" % i] is None for i, a in enumerate(answers)), "a refusal answers its own row only"
    # Each loser's call held its refused hot row beside applied rows, and says so in the stats.
    assert store.stats.as_dict().get("checked_calls_partly_refused", 0) - partly_before >= 1
    cell = store.read_row(table, b"hot", ReadSpec(families=(layout.LOCK,))).latest(layout.LOCK, b"c")
    assert cell.ts == 1000 + winners[0]


class Scripted:
    """An inner store's call, scripted: records each call's items, blocks the first call
    until released, then answers or raises as told."""

    def __init__(self, answer):
        self.calls: list[list] = []
        self.answer = answer
        self.release = threading.Event()

    def __call__(self, items):
        self.calls.append(list(items))
        if len(self.calls) == 1:
            assert self.release.wait(10)
        return self.answer(items)

    def behind_the_first(self, first, others, *, pause_s: float = 0.0, settle_s: float = 0.05) -> None:
        """Start ``first`` (a callable) and wait until its call is in flight; start ``others``
        (``pause_s`` apart) so they queue behind it; after ``settle_s`` release the first call
        and join everyone."""
        threads = [threading.Thread(target=first)]
        threads[0].start()
        while not self.calls:
            time.sleep(0.001)
        for other in others:
            threads.append(threading.Thread(target=other))
            threads[-1].start()
            time.sleep(pause_s)
        time.sleep(settle_s)
        self.release.set()
        for t in threads:
            t.join(10)


def test_requests_queued_behind_a_call_in_flight_go_in_one_call():
    send = Scripted(lambda items: [i * 10 for i in items])
    batcher = CallBatcher(send)
    results = {}
    send.behind_the_first(lambda: results.__setitem__(0, batcher.submit([0])),
                          [lambda i=i: results.__setitem__(i, batcher.submit([i, i + 100])) for i in range(1, 6)],
                          settle_s=0.1)  # all five queued behind the call in flight
    assert results == {0: [0], **{i: [i * 10, (i + 100) * 10] for i in range(1, 6)}}
    assert len(send.calls) == 2 and sorted(send.calls[1]) == sorted(x for i in range(1, 6) for x in (i, i + 100))


def test_an_error_or_unknown_outcome_of_a_call_is_every_one_of_its_callers():
    for error in (StorageError("server said no"), OutcomeUnknown("reply lost")):
        def fail(items, error=error):
            raise error
        send = Scripted(fail)
        batcher = CallBatcher(send)
        raised = []

        def call(i):
            try:
                batcher.submit([i])
            except type(error) as exc:
                raised.append(exc)

        send.behind_the_first(lambda: call(0), [lambda i=i: call(i) for i in range(1, 4)])
        assert len(raised) == 4 and all(e is error for e in raised)


@pytest.mark.parametrize("in_flight", [1, 3])
@pytest.mark.parametrize("exclusive", [False, True])
def test_many_threads_each_get_their_own_answers_and_nobody_waits_forever(exclusive, in_flight):
    """32 threads, 150 requests each, calls that take a moment and now and then fail: every
    request is answered (its own answers, or its call's error), in bounded time. Each caller
    waits on its own wake-up, so a lost one would leave a thread here until the join fails."""
    import random

    calls = []
    lock = threading.Lock()

    def send(items):
        with lock:
            calls.append(len(items))
            fail = len(calls) % 17 == 0
        time.sleep(random.random() / 2000)
        if fail:
            raise StorageError("this call failed")
        return [("answer", item) for item in items]

    batcher = CallBatcher(send, exclusive=exclusive, in_flight=in_flight)
    problems, answered, failed = [], [0], [0]

    def caller(i):
        rng = random.Random(i)
        for n in range(150):
            items = [(i, n, k) for k in range(rng.randint(1, 4))]
            rows = frozenset({rng.randrange(8)}) if exclusive else frozenset()
            try:
                got = batcher.submit(items, rows)
            except StorageError:
                with lock:
                    failed[0] += 1
                continue
            if got != [("answer", item) for item in items]:
                problems.append((items, got))
            with lock:
                answered[0] += 1

    threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a caller was never woken"
    assert not problems
    assert answered[0] + failed[0] == 32 * 150 and failed[0] > 0
    assert len(calls) < 32 * 150  # requests did share calls


def test_with_two_calls_in_flight_a_second_goes_while_the_first_is_out_and_a_third_waits():
    """``in_flight=2``: a request arriving while one call is out leads a call of its own; the
    requests arriving while two are out wait, and go in one call when one returns."""
    released = threading.Event()
    calls, lock = [], threading.Lock()

    def send(items):
        with lock:
            calls.append(list(items))
            first_two = len(calls) <= 2
        if first_two:
            assert released.wait(10)
        return [item * 10 for item in items]

    batcher = CallBatcher(send, in_flight=2)
    results, threads = {}, []

    def submit(i):
        threads.append(threading.Thread(target=lambda: results.__setitem__(i, batcher.submit([i]))))
        threads[-1].start()

    submit(0)
    submit(1)
    deadline = time.monotonic() + 10
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert calls == [[0], [1]]  # both out at once
    for i in (2, 3, 4):
        submit(i)
    time.sleep(0.05)
    assert len(calls) == 2  # the later ones wait for a call to return
    released.set()
    for t in threads:
        t.join(10)
    assert results == {i: [i * 10] for i in range(5)}
    assert sorted(calls[2]) == [2, 3, 4] and len(calls) == 3


def test_a_batcher_needs_room_for_one_call():
    with pytest.raises(ValueError, match="in_flight"):
        CallBatcher(lambda items: items, in_flight=0)


def test_exclusive_requests_naming_one_row_go_in_different_calls():
    send = Scripted(lambda items: [None] * len(items))
    batcher = CallBatcher(send, exclusive=True)
    send.behind_the_first(lambda: batcher.submit(["a"], frozenset({b"x"})),
                          [lambda r=r: batcher.submit([r], frozenset({r})) for r in (b"y", b"x", b"z", b"x")],
                          pause_s=0.02, settle_s=0.0)
    for call in send.calls:
        assert call.count(b"x") + call.count("a") <= 1, send.calls
    assert sum(len(c) for c in send.calls) == 5


def test_a_lost_reply_for_a_whole_checked_call_is_settled_row_by_row():
    """The combined call's reply is lost after it applied: each caller's ``apply_checked``
    reads its own rows' guards back and finds its writes applied, none guessed."""
    inner = MemoryStore(row_step=server.row_step)
    store = BatchingStore(inner, linger_ms=20.0)
    layout.create_table(store, "t")
    real = inner._send_checked
    lost = {"n": 0}

    def send(table, writes, tokens):
        answers = real(table, writes, tokens)
        if len(writes) > 1 and lost["n"] == 0:
            lost["n"] += 1
            raise OutcomeUnknown("reply lost")
        return answers

    inner._send_checked = send
    gate = threading.Event()

    def prewrite(i):
        gate.wait(5)
        write = server.prewrite_write({"c": b"v"}, {"c": lock(2000 + i)}, 2000 + i)
        return store.apply_checked("t", {b"r%d" % i: write})

    threads = []
    results = {}
    for i in range(6):
        t = threading.Thread(target=lambda i=i: results.__setitem__(i, prewrite(i)))
        threads.append(t)
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert lost["n"] == 1, "no combined call was lost"
    assert store.stats.as_dict().get("combined_calls_unknown") == 1
    assert results == {i: {b"r%d" % i: None} for i in range(6)}
    for i in range(6):
        assert inner.read_row("t", b"r%d" % i, ReadSpec(families=(layout.LOCK,))).latest(layout.LOCK, b"c").ts == 2000 + i


def test_puts_and_deletes_of_one_row_from_several_callers(batching):
    store, table = batching
    run_threads(4, lambda i: store.mutate_row(table, b"same", [Put(b"d", b"c%d" % i, 5, b"x")]))
    run_threads(4, lambda i: store.delete_rows(table, {b"same": [Delete(b"d", b"c%d" % i, 5)]} if i % 2 else {}))
    row = store.read_row(table, b"same", ReadSpec(families=(b"d",)))
    assert sorted(q for q in row.family(b"d")) == [b"c0", b"c2"]


# -- lockstep: a leader waits for the other members of its gang ------------------------------
class Recording:
    """An inner ``send`` that records the items of each call it gets."""

    def __init__(self):
        self.calls = []
        self._lock = threading.Lock()

    def __call__(self, items):
        with self._lock:
            self.calls.append(list(items))
        return list(items)


def gang_of(n, work, lockstep, submit):
    """``n`` member threads; member i does ``work(i)`` (its CPU between calls), then
    ``submit(i)``; returns the results."""

    def member(i):
        with lockstep.member():
            work(i)
            return submit(i)

    return run_threads(n, member)


def test_lockstep_sends_one_call_once_every_member_waits():
    """Members that reach their call at different times (as observer runs do after different
    amounts of work) still share one call: the leader waits until no member is running."""
    lockstep = Lockstep(max_wait_s=2.0)
    send = Recording()
    batcher = CallBatcher(send, lockstep=lockstep)
    results = gang_of(4, lambda i: time.sleep(0.03 * i), lockstep, lambda i: batcher.submit([i]))
    assert results == [[0], [1], [2], [3]]
    assert len(send.calls) == 1 and sorted(send.calls[0]) == [0, 1, 2, 3], send.calls


def test_without_lockstep_the_same_gang_makes_a_call_each():
    """The control: the same members without lockstep are not combined (nothing in flight)."""
    send = Recording()
    batcher = CallBatcher(send)
    gang_of(4, lambda i: time.sleep(0.03 * i), Lockstep(max_wait_s=0), lambda i: batcher.submit([i]))
    assert len(send.calls) == 4


def test_lockstep_wait_is_bounded_by_max_wait():
    """A member that keeps running (a long parse, a call that is not combined) holds the
    others' call back at most ``max_wait_s``."""
    lockstep = Lockstep(max_wait_s=0.05)
    send = Recording()
    batcher = CallBatcher(send, lockstep=lockstep)
    release = threading.Event()
    waited = {}

    def busy():
        with lockstep.member():
            release.wait(5)

    slow = threading.Thread(target=busy)
    slow.start()
    try:
        with lockstep.member():
            began = time.monotonic()
            batcher.submit(["x"])
            waited["s"] = time.monotonic() - began
    finally:
        release.set()
        slow.join(5)
    assert 0.04 <= waited["s"] < 1.0, waited
    assert send.calls == [["x"]]


def test_a_lone_member_and_non_members_do_not_wait():
    lockstep = Lockstep(max_wait_s=5.0)
    send = Recording()
    batcher = CallBatcher(send, lockstep=lockstep)
    began = time.monotonic()
    with lockstep.member():
        batcher.submit(["member"])
    batcher.submit(["outsider"])
    assert time.monotonic() - began < 0.5
    assert send.calls == [["member"], ["outsider"]]


def test_a_member_in_a_call_that_is_not_combined_counts_as_waiting():
    """Members blocked in a store call of their own (a scan, a summary read) are not running:
    the leader does not wait for them."""
    lockstep = Lockstep(max_wait_s=5.0)
    send = Recording()
    batcher = CallBatcher(send, lockstep=lockstep)
    in_call = threading.Event()
    release = threading.Event()

    def blocked_elsewhere():
        with lockstep.member():
            with lockstep.waiting():
                in_call.set()
                release.wait(5)

    other = threading.Thread(target=blocked_elsewhere)
    other.start()
    try:
        assert in_call.wait(5)
        began = time.monotonic()
        with lockstep.member():
            batcher.submit(["x"])
        assert time.monotonic() - began < 0.5
    finally:
        release.set()
        other.join(5)


def test_lockstep_through_the_batching_store_combines_members_calls(batching):
    """On the in-memory store and HBase: members of the store's gang that read at different
    moments share calls."""
    store, table = batching
    gang = BatchingStore(store.inner, lockstep_ms=2000.0)
    calls_before = gang.stats.as_dict().get("batched_calls", 0)
    rows = gang_of(6, lambda i: time.sleep(0.02 * i), gang.lockstep,
                   lambda i: gang.read_row(table, b"r%d" % i, ReadSpec(families=(b"d",))))
    assert [r.key for r in rows] == [b"r%d" % i for i in range(6)]
    assert gang.stats.as_dict()["batched_calls"] - calls_before == 1
