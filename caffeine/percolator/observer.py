"""Observers: code that runs, in its own transaction, whenever an observed column changes.

Layer: percolator. Public: ``Observer``, ``Application``. The paper's second abstraction.

An application wires all of its observers in one place::

    app = Application("counting", [
        Observer("count-a", table="t", column="a", run=count_a),            # strong
        Observer("hot", table="t", column="hits", run=tally, notification="weak"),
    ])

``run(txn, row, column)`` gets a transaction started for this run, the row (bytes) and the
column (str). It reads and writes through ``txn`` like any transaction; the worker commits it.
Writing an observed column (or calling ``txn.notify``) is what triggers the next observer.

Strong notifications (the paper's): at most one run of an observer commits per change of the
column, several changes before a run collapse into one run, and a run never misses the change
that triggered it. The worker writes the observer's ack (the commit_ts of the change it ran
for) in the run's own transaction, so two runs for one change conflict and one loses. A run
that writes nothing commits nothing, its ack included (a prewrite and a commit spared): a later
notification of the same change then runs the observer again, which must find nothing to do
again or do what is now due, once.

Weak notifications: no ack, so no ack conflicts at hot cells; a run may repeat for a change
(observers on weak columns must be idempotent, e.g. recount from the current state).

Work after the commit (``txn.on_commit``, e.g. idempotent writes to a serving table) is not
part of the transaction, so a run can commit and then fail (or its process die) before that
work is done. The notification therefore stays until the callbacks have completed. A strong
observer with such work passes ``redo``: when its notification outlives a committed run
(the ack already covers the change), the worker calls ``redo(txn, row, column)`` instead of
``run``, in a read-only transaction whose ``on_commit`` callbacks then run; it must redo the
committed run's post-commit work, idempotently, from what that run committed. No second
transaction commits for the change. (A weak observer simply runs again.)

Inline runs: an observer declared ``inline=True`` is run by the worker inside the
transaction of another observer's run that changed its column on the same row, right after
that run, reading its writes; its ack then names that transaction (``records.encode_inline_ack``),
so the change it ran for is covered the moment it commits, and no later run is due. The
chain of a row (a page parsed, clustered, exported) then commits once instead of once per
step, and is visible at once instead of one notification scan per step later. The contract
of ``run`` is unchanged but for two things: ``txn.start_ts`` is shared with the run that
wrote the column (and with the other inline runs of that transaction), and a run may find
the transaction's earlier writes in what it reads. Where it cannot be so, the worker runs
the observers one transaction each as before: a retry after a conflict or a failure, a
column written again after its inline observer ran (a cycle on the row), a change made by
a client rather than an observer run. An inline run with work after the commit keeps its
column's notification until that work is done (``redo`` as above); one without has it
cleared with the commit. What it saves is the fixed cost of the transactions it folds, which
the worker's lockstep waves already share across a wave's runs: on the indexing chain it
bought no throughput (bench/README.md, "Inline observers"), so that application does not use
it. An inline ack (``=<start_ts>``) is not a number: workers of one deployment must all
know the format before any observer is made inline.

An observer may declare a ``settle_s``: its notifications wait that long before it runs, so a
burst of changes costs one run (see ``Observer.settle_s``). The freshness of what it derives
lags by up to that much; use it where a change is frequent and its effect can wait (incoming
anchor text, link counts), not on the path that makes a new page searchable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Literal

from caffeine.percolator.layout import SplitPolicy, ack_column

if TYPE_CHECKING:
    from caffeine.percolator.cluster import Cluster
    from caffeine.percolator.transaction import Transaction

ObserverFn = Callable[["Transaction", bytes, str], None]
_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


@dataclass(frozen=True)
class Observer:
    name: str
    table: str
    column: str
    run: ObserverFn = field(compare=False)
    notification: Literal["strong", "weak"] = "strong"
    redo: ObserverFn | None = field(default=None, compare=False)
    # Columns of the notified row that ``run`` reads: a strong observer's worker fetches
    # them with its own first read of the row (the change and the ack), so the observer's
    # ``txn.get_row`` of them costs no round trip. Only a hint: any column can be read.
    reads: tuple[str, ...] = field(default=(), compare=False)
    # Seconds a notification waits before the observer runs for it, so that the changes made
    # meanwhile (a hot row notified by every page that links to it) are handled by one run.
    # Counted from the change's commit, or from when the worker first saw the notification
    # pending, whichever is earlier: a row changed without pause still runs every settle_s.
    # 0: run as soon as found.
    settle_s: float = field(default=0.0, compare=False)
    # What a run writes, for the application's map (``Application.chain_map``): each
    # ``table/column`` (a transactional column, which may be the next observer's) or a serving
    # table's name, with a few words after it where a name alone says too little. A
    # description, as ``reads`` is a hint: nothing stops a run writing elsewhere.
    writes: tuple[str, ...] = field(default=(), compare=False)
    # Run inside the transaction of the observer run that changed the column on the same row
    # (see "Inline runs" above), rather than in a transaction of its own found by a later scan.
    inline: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(f"observer name {self.name!r}: letters, digits, _.:- only, at most 64")
        if self.notification not in ("strong", "weak"):
            raise ValueError(f"observer {self.name}: notification must be 'strong' or 'weak'")
        if not self.settle_s >= 0:
            raise ValueError(f"observer {self.name}: settle_s must be 0 or more, not {self.settle_s!r}")
        if self.inline and self.notification != "strong":
            raise ValueError(f"observer {self.name}: inline is for strong observers (a weak one has no ack to cover the change)")
        if self.redo is not None and self.notification != "strong":
            raise ValueError(f"observer {self.name}: redo is for strong observers (weak ones just run again)")

    @property
    def ack_column(self) -> str:
        return ack_column(self.name)


class Application:
    """All of an application's observers, and the tables they need; ``split_policy``: where to
    cut those tables into regions when ``install`` creates them (``layout.SplitPolicy``)."""

    def __init__(self, name: str, observers: Iterable[Observer], tables: Iterable[str] = (),
                 split_policy: SplitPolicy | None = None) -> None:
        self.name = name
        self.split_policy = split_policy
        self.observers = list(observers)
        names = [o.name for o in self.observers]
        if len(set(names)) != len(names):
            raise ValueError(f"application {name}: observer names must be unique: {names}")
        self.tables = sorted(set(tables) | {o.table for o in self.observers})

    def observers_of(self, table: str, column: str) -> list[Observer]:
        return [o for o in self.observers if o.table == table and o.column == column]

    @property
    def observed(self) -> set[tuple[str, str]]:
        return {(o.table, o.column) for o in self.observers}

    def chain_map(self) -> list[str]:
        """The chain, one line per observer in registration order: the column it observes
        (with ``(weak)`` for a weak notification, ``(inline)`` for ``inline``), its name, what it writes
        (``Observer.writes``), e.g. ``repository/page:meta --document--> repository/doc:fingerprint``.
        The data-triggered chain's only map: ``caffeine engine --map`` prints it, and the
        applications' docs are checked against it."""
        lines = []
        for o in self.observers:
            observed = f"{o.table}/{o.column}" + (" (weak)" if o.notification == "weak" else "") \
                + (" (inline)" if o.inline else "")
            lines.append(f"{observed} --{o.name}--> {', '.join(o.writes) or '(nothing declared)'}")
        return lines

    @property
    def observed_tables(self) -> list[str]:
        return sorted({o.table for o in self.observers})

    def install(self, cluster: "Cluster") -> None:
        """Create the tables and record the observed columns in the deployment.

        Idempotent. Once it returns, writes to observed columns set notify cells in every
        process connected to the deployment, whether it imports the application or not,
        those connected before included: it waits until each has taken the new record up,
        about one heartbeat interval, at most two (see ``caffeine.percolator.registry``).
        The record replaces the one of this application's last install (by name); other
        applications' records stay."""
        for table in self.tables:
            cluster.create_table(table, exist_ok=True, split_policy=self.split_policy)
        cluster.install_observers(self.name, self.observed, self.tables)


def load_application(spec: str) -> Application:
    """``module:attribute`` or ``path/to/file.py:attribute`` -> the Application (or a
    zero-argument function returning one)."""
    import importlib
    import importlib.util

    module_name, _, attr = spec.rpartition(":")
    if not module_name or not attr:
        raise ValueError(f"application {spec!r}: expected module:attribute or file.py:attribute")
    if module_name.endswith(".py"):
        loader_spec = importlib.util.spec_from_file_location("caffeine_app_" + attr, module_name)
        if loader_spec is None:
            raise ValueError(f"application {spec!r}: cannot load {module_name}")
        module = importlib.util.module_from_spec(loader_spec)
        loader_spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    target = getattr(module, attr)
    app = target() if callable(target) and not isinstance(target, Application) else target
    if not isinstance(app, Application):
        raise TypeError(f"{spec} is not an Application")
    return app
