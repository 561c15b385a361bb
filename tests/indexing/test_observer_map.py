"""The observer chain's map comes from the code: ``Application.chain_map`` (printed by
``caffeine engine --map``) and the block of docs/INDEXING.md ("The chain") say the same."""

from __future__ import annotations

import re
import subprocess
import sys

from caffeine.observers.app import application
from caffeine.percolator import Application, Observer
from support.search_web import feed, page
from support import ROOT

INDEXING = ROOT / "docs" / "INDEXING.md"


def documented_chain() -> list[str]:
    section = INDEXING.read_text(encoding="utf-8").split("## The chain", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```\n(.*?)```", section, flags=re.S)
    return block.strip().splitlines()


def test_the_documented_chain_is_the_application_s():
    assert documented_chain() == application.chain_map()


def test_every_observer_declares_what_it_writes():
    assert all(o.writes for o in application.observers)
    # Each observed column is written by some observer or by the crawler (page:meta).
    written = {w.split(" ")[0].rstrip(",") for o in application.observers for w in o.writes}
    observed = {f"{o.table}/{o.column}" for o in application.observers}
    assert observed - written == {"repository/page:meta"}


def test_the_map_follows_the_observers():
    app = Application("t", [Observer("a", "t1", "c:x", lambda *a: None, writes=("t2/c:y",)),
                            Observer("b", "t2", "c:y", lambda *a: None, notification="weak")])
    assert app.chain_map() == ["t1/c:x --a--> t2/c:y", "t2/c:y (weak) --b--> (nothing declared)"]


def test_caffeine_engine_map_prints_it_without_hbase():
    proc = subprocess.run([sys.executable, "-m", "caffeine.commands", "engine", "--map"],
                          capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "CAFFEINE_THRIFT1_PORT": "1"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == application.chain_map()


# -- the declarations are what the observers do --------------------------------------------------

class _Recorder:
    """What one observer run writes: transactional cells through ``txn.set``/``txn.delete``,
    serving tables through ``txn.cluster.serving(...).put``."""

    def __init__(self, seen: set) -> None:
        self.seen = seen

    def txn(self, txn):
        recorder = self

        class Txn:
            def __getattr__(self, name):
                return getattr(txn, name)

            def set(self, table, row, column, value):
                recorder.seen.add((table, column))
                return txn.set(table, row, column, value)

            def delete(self, table, row, column):
                recorder.seen.add((table, column))
                return txn.delete(table, row, column)

            @property
            def cluster(self):
                return recorder.cluster(txn.cluster)

        return Txn()

    def cluster(self, cluster):
        recorder = self

        class Cluster:
            def __getattr__(self, name):
                return getattr(cluster, name)

            def serving(self, name, *args, **kwargs):
                table = cluster.serving(name, *args, **kwargs)

                class Serving:
                    def __getattr__(self, attr):
                        return getattr(table, attr)

                    def put(self, rows, *a, **k):
                        if rows:
                            recorder.seen.add((name, None))
                        return table.put(rows, *a, **k)

                return Serving()

        return Cluster()


def _declared(observer) -> set:
    """(table, column) of each ``writes`` entry; column None for a whole (serving) table."""
    out = set()
    for entry in observer.writes:
        target = entry.split(" ")[0]
        table, _, column = target.partition("/")
        out.add((table, column or None))
    return out


def _covers(declared: set, table: str, column: str | None) -> bool:
    family = column.split(":")[0] if column else None
    return any(t == table and (c is None or c == column or c == family) for t, c in declared)


def _page(name, title, body, links=(), head=""):
    base = "http://web.test/"
    return page(base + name, title, body, [(base + target, text) for target, text in links], head=head)


WORDS = "quokka smiles on rottnest island while the walrus naps near a marmot burrow at dawn"


def _small_web() -> list[dict[str, tuple[dict, bytes]]]:
    """Three rounds over a few pages (three exact copies): first the pages; then pages that
    link to one copy, so the inlinks recount changes its anchor text and re-elects the cluster,
    and one that links to a page alone in its cluster; then a copy fetched again declaring its
    canonical."""
    copy = ("Quokka facts", WORDS)
    first = dict([
        _page("a.html", *copy, links=[("b.html", "walrus page"), ("c.html", "copy")]),
        _page("b.html", "Walrus notes", "walrus tusks " + WORDS, links=[("a.html", "quokka facts")]),
        _page("c.html", *copy, links=[("a.html", "the original")]),
        _page("d.html", *copy),
    ])
    second = dict(_page(f"fan{i}.html", f"Fan {i}", f"fan page number {i} about marmots",
                        links=[("c.html", f"brand new anchor words {i}")]) for i in range(4))
    # New anchor text for a page whose cluster state stays: only export-anchors re-exports it
    # (a change of both is exported by whichever export observer runs first).
    second.update([_page("walrus-fan.html", "Walrus fan", "a fan of walruses", links=[("b.html", "tusk heaven")])])
    third = dict([_page("d.html", *copy, head='<link rel="canonical" href="http://web.test/a.html">'
                                                '<meta name="robots" content="noarchive">')])
    return [first, second, third]


def test_each_observer_writes_what_it_declares_and_declares_nothing_it_never_writes():
    """The indexing chain over a small web on the in-memory cluster, each observer's writes
    recorded: none outside its declaration, and every declared target written by some run."""
    import dataclasses

    from caffeine.percolator.engine_status import wait_until_quiescent
    from caffeine.percolator.testing import memory_cluster
    from caffeine.percolator.worker import Worker

    seen: dict[str, set] = {o.name: set() for o in application.observers}

    def recording(fn, name):
        if fn is None:
            return None
        return lambda txn, row, column: fn(_Recorder(seen[name]).txn(txn), row, column)

    recorded = Application(application.name, [
        dataclasses.replace(o, run=recording(o.run, o.name), redo=recording(o.redo, o.name))
        for o in application.observers], tables=application.tables)
    cluster = memory_cluster()
    try:
        recorded.install(cluster)
        with Worker(cluster, recorded, threads=2):
            for pages in _small_web():
                feed(cluster, pages)
                wait_until_quiescent(cluster, recorded.observed_tables, timeout_s=120, poll_s=0.05)
    finally:
        cluster.close()
    for o in application.observers:
        stray = sorted(f"{t}/{c}" for t, c in seen[o.name] if not _covers(_declared(o), t, c))
        assert not stray, f"{o.name} writes {stray}, which its `writes` does not declare"
    unseen = sorted(f"{o.name}: {t}/{c or '*'}" for o in application.observers for t, c in _declared(o)
                    if not any(_covers({(t, c)}, st, sc) for st, sc in seen[o.name]))
    assert not unseen, f"declared but never written over the small web: {unseen}"
