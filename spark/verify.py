"""``caffeine verify``: the incremental pipeline's tables against a batch recomputation.

Layer: spark. Reads the incremental side through the public API (a snapshot
transaction for ``repository``, ``inlinks`` and ``dups`` (its band rows too); ``ServingTable`` scans for
``postings``, ``impacts`` and ``docstats``), runs ``spark.job.run_batch`` at the same snapshot,
reads the ``batch_*`` tables back, and compares the logical tables of ``spark.transforms``
cell by cell. Nothing is expected to differ once the pipeline is quiescent.

What is compared (docs/INDEXING.md; the incremental side normalized as the batch writes it):

    documents  repository doc:parsed, doc:outlinks, doc:fingerprint, cluster:state ("0 -",
               i.e. in no cluster, counts as absent), doc:anchors (of documents: a page that
               is no document any more keeps its last value, which nothing reads)
    inlinks    inlinks in:<source> = anchor text
    dups       dups member:<url> = inlinks, declares:<url>, near:<fp>, canonical-url, sketch
    bands      dups ~<band key> members
    postings   postings p:<url> (tombstones are absent)
    impacts    impacts i:<impact qualifier> (tombstones are absent: a removed posting's, and
               the cell of a posting whose level changed)
    docstats   docstats s:length, s:title, s:fingerprint, s:fields, s:votes, s:inlinks ("0" counts as absent, and so
               does the stale count a page that is no document any more keeps; s:done is the
               export's bookkeeping and has no batch counterpart)

Differences are reported per table (rows on each side, rows only in one, rows whose cells
differ) and the first N one by one. Then every ``impacts`` row's stored count of live cells
(kept by the coprocessor, read by cold queries) is compared with the live cells scanned.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from caffeine.index.schema import (
    CANONICAL_URL,
    CLUSTER_STATE,
    DECLARES_PREFIX,
    DOC_ANCHORS,
    DOC_FINGERPRINT,
    DOCSTATS,
    DOCSTATS_FAMILY,
    DUPS,
    BAND_MEMBERS,
    BAND_ROW_PREFIX,
    NEAR_PREFIX,
    SKETCH,
    IMPACTS,
    IMPACTS_FAMILY,
    INLINK_PREFIX,
    INLINKS,
    MEMBER_PREFIX,
    NO_CLUSTER,
    POSTINGS,
    POSTINGS_FAMILY,
    REPOSITORY,
    S_INLINKS,
)
from caffeine.percolator import ServingTable
from caffeine.storage import TableNotFound
from spark.transforms import DOCSTATS_COLUMNS, DOCUMENT_COLUMNS, LOGICAL_TABLES

Tables = dict[str, dict[str, dict[str, bytes]]]  # table -> row -> column -> value


@dataclass
class Difference:
    table: str
    row: str
    column: str
    incremental: bytes | None
    batch: bytes | None

    def __str__(self) -> str:
        return f"{self.table}[{self.row}] {self.column}: incremental={_show(self.incremental)} batch={_show(self.batch)}"


@dataclass
class TableDiff:
    table: str
    incremental_rows: int = 0
    batch_rows: int = 0
    only_incremental: int = 0
    only_batch: int = 0
    differing: int = 0
    cells_compared: int = 0

    @property
    def clean(self) -> bool:
        return not (self.only_incremental or self.only_batch or self.differing)


@dataclass(frozen=True)
class CountMismatch:
    """A row of a counted family whose stored count is not its number of live cells."""

    table: str
    row: str
    stored: int
    walked: int

    def __str__(self) -> str:
        return f"{self.table}[{self.row}] stored count {self.stored}, live cells {self.walked}"


@dataclass
class VerifyReport:
    snapshot_ts: int
    tables: list[TableDiff]
    differences: list[Difference] = field(default_factory=list)  # the first ``limit``
    total_differences: int = 0
    batch_summary: str = ""
    count_mismatches: list[CountMismatch] = field(default_factory=list)
    counts_checked: int = 0

    @property
    def clean(self) -> bool:
        return self.total_differences == 0 and not self.count_mismatches

    def format(self) -> str:
        lines = [f"snapshot {self.snapshot_ts}; {self.batch_summary}", ""]
        lines.append(f"{'table':<10} {'incremental':>12} {'batch':>8} {'only incr.':>10} {'only batch':>10} {'differ':>7} {'cells':>8}")
        for t in self.tables:
            lines.append(f"{t.table:<10} {t.incremental_rows:>12,} {t.batch_rows:>8,} {t.only_incremental:>10,} "
                         f"{t.only_batch:>10,} {t.differing:>7,} {t.cells_compared:>8,}")
        lines.append("")
        if self.count_mismatches:
            lines.append(f"{len(self.count_mismatches):,} of {self.counts_checked:,} counted rows have a stored count "
                         f"that is not their number of live cells; the first {min(len(self.count_mismatches), 20)}:")
            lines.extend(f"  {m}" for m in self.count_mismatches[:20])
        else:
            lines.append(f"stored counts: all {self.counts_checked:,} counted rows match their live cells")
        if self.total_differences == 0:
            lines.append("no difference: the incremental index equals the batch recomputation")
        else:
            lines.append(f"{self.total_differences:,} differing cells; the first {len(self.differences)}:")
            lines.extend(f"  {d}" for d in self.differences)
        return "\n".join(lines)


def _show(value: bytes | None, width: int = 80) -> str:
    if value is None:
        return "<absent>"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


# -- reading the incremental side ----------------------------------------------------------

def incremental_tables(cluster, snapshot_ts: int) -> Tables:
    """The pipeline's tables as logical tables, the Percolator ones at ``snapshot_ts``."""
    out: Tables = {name: {} for name in LOGICAL_TABLES}
    txn = cluster.snapshot(snapshot_ts)
    try:
        for row, cols in _scan(txn, REPOSITORY, list(DOCUMENT_COLUMNS)):
            if cols.get(CLUSTER_STATE) == NO_CLUSTER.encode():
                del cols[CLUSTER_STATE]
            if DOC_FINGERPRINT not in cols:
                cols.pop(DOC_ANCHORS, None)
            if cols:
                out["documents"][row.decode("utf-8")] = cols
        for row, cols in _scan(txn, INLINKS, None):
            cells = {c: v for c, v in cols.items() if c.startswith(INLINK_PREFIX)}
            if cells:
                out["inlinks"][row.decode("utf-8")] = cells
        for row, cols in _scan(txn, DUPS, None):
            key = row.decode("utf-8")
            if key.startswith(BAND_ROW_PREFIX):
                if cols.get(BAND_MEMBERS):
                    out["bands"][key] = {BAND_MEMBERS: cols[BAND_MEMBERS]}
                continue
            cells = {c: v for c, v in cols.items()
                     if c.startswith((MEMBER_PREFIX, DECLARES_PREFIX, NEAR_PREFIX)) or c in (CANONICAL_URL, SKETCH)}
            if cells:
                out["dups"][key] = cells
    finally:
        txn.close()
    for name, table, family in (("postings", POSTINGS, POSTINGS_FAMILY), ("impacts", IMPACTS, IMPACTS_FAMILY)):
        for row, cells in _serving_scan(cluster, table, family, None):
            out[name][row.decode("utf-8")] = cells
    documents = out["documents"]
    for row, cells in _serving_scan(cluster, DOCSTATS, DOCSTATS_FAMILY, list(DOCSTATS_COLUMNS)):
        url = row.decode("utf-8")
        # Recounts write s:inlinks only while a page is in a cluster; a page that left the
        # index keeps its last count there, which nothing reads.
        if cells.get(S_INLINKS) == b"0" or DOC_FINGERPRINT not in documents.get(url, {}):
            cells.pop(S_INLINKS, None)
        if cells:
            out["docstats"][url] = cells
    return out


def _scan(txn, table, columns):
    try:
        yield from txn.scan(table, columns=columns)
    except TableNotFound:
        return


def _serving_scan(cluster, table, family, columns):
    try:
        yield from ServingTable(cluster.store, table, [family]).scan(columns=columns, batch_size=1024)
    except TableNotFound:
        return


# -- comparing -------------------------------------------------------------------------------

def count_mismatches(store, table: str, family: str, live_rows, *, batch: int = 512) -> list[CountMismatch]:
    """Rows of ``table``'s counted ``family`` whose stored count of live cells (what
    ``read_prefix`` answers with, kept by the coprocessor as it writes) differs from the live
    cells a scan found: ``live_rows`` maps each row (text) to its live cells, as
    ``incremental_tables`` reads them. Why: the count is maintained, never recomputed, so a
    change made around the coprocessor would stay, and a count too low makes a partial head
    look like the whole list (docs/RANKING.md, "Cold queries")."""
    serving = ServingTable(store, table, [family])
    keys = sorted(live_rows)
    out = []
    for i in range(0, len(keys), batch):
        counts = serving.read_prefix(keys[i:i + batch], 0)
        for key in keys[i:i + batch]:
            stored, walked = counts[key.encode("utf-8")].count, len(live_rows[key])
            if stored != walked:
                out.append(CountMismatch(table, key, stored, walked))
    return out


def diff_tables(incremental: Tables, batch: Tables, *, limit: int = 20) -> tuple[list[TableDiff], list[Difference], int]:
    """Per-table summaries, the first ``limit`` differing cells, and their total count."""
    summaries, examples, total = [], [], 0
    for name in LOGICAL_TABLES:
        a, b = incremental.get(name, {}), batch.get(name, {})
        summary = TableDiff(name, len(a), len(b))
        for row in sorted(a.keys() | b.keys()):
            ra, rb = a.get(row), b.get(row)
            if rb is None:
                summary.only_incremental += 1
            elif ra is None:
                summary.only_batch += 1
            ra, rb = ra or {}, rb or {}
            row_differs = False
            for column in sorted(ra.keys() | rb.keys()):
                summary.cells_compared += 1
                va, vb = ra.get(column), rb.get(column)
                if va != vb:
                    row_differs = True
                    total += 1
                    if len(examples) < limit:
                        examples.append(Difference(name, row, column, va, vb))
            if row_differs and row in a and row in b:
                summary.differing += 1
        summaries.append(summary)
    return summaries, examples, total


def verify(
    settings,
    *,
    spark=None,
    master: str | None = None,
    partitions: int | None = None,
    wait: bool = True,
    timeout_s: float | None = 600.0,
    limit: int = 20,
    progress=None,
) -> VerifyReport:
    """Wait for quiescence (unless ``wait`` is False), then compare both indexes at one snapshot."""
    from caffeine.percolator import connect
    from caffeine.percolator.engine_status import wait_until_quiescent
    from spark.hbase_io import read_batch_tables
    from spark.job import run_batch

    say = progress or (lambda message: None)
    with connect(settings) as cluster:
        if wait:
            say("waiting until the observers are quiescent")
            wait_until_quiescent(cluster, cluster.observed_tables(), timeout_s=timeout_s)
        txn = cluster.snapshot()  # the snapshot both sides are read at; held open against GC
        try:
            ts = txn.start_ts
            say(f"batch recomputation at snapshot {ts}")
            report = run_batch(settings, spark=spark, master=master, partitions=partitions, snapshot_ts=ts)
            say(report.summary())
            say("reading both sides")
            incremental = incremental_tables(cluster, ts)
            batch = read_batch_tables(cluster.store)
        finally:
            txn.close()
        # Counts are not versioned: nothing here needs the snapshot held.
        say("checking the stored counts of impacts")
        mismatches = count_mismatches(cluster.store, IMPACTS, IMPACTS_FAMILY, incremental["impacts"])
    summaries, examples, total = diff_tables(incremental, batch, limit=limit)
    return VerifyReport(ts, summaries, examples, total, report.summary(), mismatches, len(incremental["impacts"]))
