"""Ingest: WARC archives replayed into the repository, a URL's responses repeated and out of
order, by concurrent writers, twice at once or interrupted and resumed.

Layer: simulation. Workload (the real ``crawler.ingest.Ingester`` over the simulated store: its
record writes run as threads of the ingest's process, ``SimWrites``).

Setup: 3-5 URLs, each fetched 1-3 times (a different page each time), the responses shuffled
and written into one or two WARC files (plain, in a directory of the run's own). Actors: an
ingest of the files with 2-3 writers (checkpointing after every record, or every second),
and half the time a second one: at once (the same archives ingested twice) or later with
``--resume``. After healing, a last ``--resume`` ingest (no faults) finishes what failed.

"Last" is the ingest's order: the files as given, records in file order.

Invariants:
- before that last ingest, no repository row holds anything but its URL's last response
  (a write of an older one, committed last, would have replaced it);
- after it, every URL's row holds its last response.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from concurrent.futures import Future

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from caffeine.errors import CaffeineError
from caffeine.index.schema import PAGE_CONTENT
from crawler.ingest import Ingester

REPOSITORY = "repo"
STATE = "ingest_state"


class SimFuture(Future):
    """A write's future; ``result()`` lets the other actors run until it is done."""

    def __init__(self, sim) -> None:
        super().__init__()
        self.sim = sim

    def result(self, timeout=None):
        while not self.done():
            self.sim.idle(1)
        return super().result()


class SimWrites:
    """``crawler.ingest.ThreadWrites`` for the simulation: each write runs as another thread of
    the ingest's process (an actor: a crash of any thread kills the process), at most ``bound``
    unfinished at once."""

    def __init__(self, sim, workers: int) -> None:
        self.sim = sim
        self.bound = workers
        self.parent = sim.scheduler.current()
        self.futures: list[SimFuture] = []

    def submit(self, fn, *args) -> Future:
        while sum(not f.done() for f in self.futures) >= self.bound:
            self.sim.idle(1)
        future = SimFuture(self.sim)
        self.futures.append(future)

        def body():
            try:
                future.set_result(fn(*args))
            except BaseException as exc:
                future.set_exception(exc)
                raise

        self.sim.scheduler.spawn(f"{self.parent.name}.w{len(self.futures)}", body,
                                 crashable=self.parent.crashable, thread_of=self.parent)
        return future

    def close(self) -> None:
        for future in self.futures:
            while not future.done():
                self.sim.idle(1)


class InlineWrites:
    """Writes run at once in the calling thread (the last, fault-free ingest of the check)."""

    def submit(self, fn, *args) -> Future:
        future: Future = Future()
        future.set_result(fn(*args))
        return future

    def close(self) -> None:
        pass


def _page(url: str, n: int) -> bytes:
    return f"<html><head><title>{url} #{n}</title></head><body><p>fetch {n} of {url}</p></body></html>".encode()


def _write_warc(path: str, records: list[tuple[str, bytes]]) -> None:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=False, warc_version="1.1")
    for url, body in records:
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                           ("Content-Length", str(len(body)))], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http,
                                                      warc_headers_dict={"WARC-Date": "2026-01-01T00:00:00Z"}))
    with open(path, "wb") as f:
        f.write(out.getvalue())


class Ingest:
    name = "ingest"

    def __init__(self, sim) -> None:
        rng = sim.workload_rng
        self.sim = sim
        self.dir = tempfile.mkdtemp(prefix="caffeine-sim-ingest-")
        sim.redact(self.dir, "<ingest dir>")
        urls = [f"http://sim.test/p{i}.html" for i in range(rng.randint(3, 5))]
        records = [(url, _page(url, n)) for url in urls for n in range(rng.randint(1, 3))]
        rng.shuffle(records)
        cut = rng.randint(1, len(records)) if rng.random() < 0.5 else len(records)
        parts = [records[:cut], records[cut:]] if cut < len(records) else [records]
        self.paths = []
        for n, part in enumerate(parts):
            self.paths.append(os.path.join(self.dir, f"part{n}.warc"))
            _write_warc(self.paths[-1], part)
        self.last = {url: body for part in parts for url, body in part}  # the ingest's order
        self.older = {body for url, body in records} - set(self.last.values())
        workers = rng.randint(2, 3)
        checkpoint_s = rng.choice((0.0, 1.0))
        sim.client("ingest0", self._ingest(workers, checkpoint_s, resume=False, wait=0))
        second = rng.choice((None, "at once", "resume"))
        if second is not None:
            sim.client("ingest1", self._ingest(workers, checkpoint_s, resume=second == "resume",
                                               wait=rng.randint(20, 120) if second == "resume" else 0))

    def _ingest(self, workers: int, checkpoint_s: float, *, resume: bool, wait: int):
        kind = "ingest --resume" if resume else "ingest"

        def body(cluster):
            self.sim.idle(wait)
            ingester = Ingester(cluster, repository=REPOSITORY, state_table=STATE, workers=workers,
                                checkpoint_s=checkpoint_s, writes=lambda n: SimWrites(self.sim, n))
            try:
                report = ingester.run(self.paths, resume=resume)
            except CaffeineError as exc:
                self.sim.operation(kind + " (failed)", self.sim.redacted(f"{type(exc).__name__}: {exc}")[:160])
                return
            self.sim.operation(kind, f"{report.pages} pages, {report.counts.get('superseded', 0)} superseded, "
                                     f"{report.not_recorded} not recorded")
        return body

    def _contents(self) -> dict[str, bytes | None]:
        with self.sim.cluster("checker").begin() as txn:
            return {url: txn.get(REPOSITORY, url, PAGE_CONTENT) for url in self.last}

    def check(self) -> None:
        sim = self.sim
        try:
            for url, body in self._contents().items():
                if body is not None and body != self.last[url]:
                    kind = "an older response" if body in self.older else "something else"
                    sim.violation(f"ingest: {url} holds {kind}, not its last one: {body[:60]!r}")
            finisher = Ingester(sim.cluster("finisher"), repository=REPOSITORY, state_table=STATE, workers=1,
                                checkpoint_s=0.0, writes=lambda n: InlineWrites())
            report = finisher.run(self.paths, resume=True)
            if report.not_recorded:
                sim.violation(f"ingest: the last resume could not record {report.not_recorded} records")
            for url, body in self._contents().items():
                if body != self.last[url]:
                    sim.violation(f"ingest: after the last resume {url} holds {body and body[:60]!r}, "
                                  f"not its last response")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
