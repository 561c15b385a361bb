"""``caffeine inspect``: one row's protocol cells laid out like the paper's Figure 4.

Layer: percolator. Internal (storage reads only; never resolves locks, so it shows the table
exactly as it is, mid-transaction included).

    row b'Bob'  column 'bal'
    ts                      data        lock                          write           notify  ack
    470613297790713870                                                data @ …713862
    470613297790713862      b'$3'
    470613297790713858                                                data @ …713850
    ...
"""

from __future__ import annotations

from caffeine.percolator.layout import ACK, DATA, LOCK, NOTIFY, WRITE, column_name
from caffeine.percolator.records import CellRef, Kind, Lock, Write
from caffeine.storage import ReadSpec, Row, Store

FAMILIES = (DATA, LOCK, WRITE, NOTIFY, ACK)
HEADERS = ("data", "lock", "write", "notify", "ack")


def read_all_versions(store: Store, table: str, row: bytes, versions: int = 1000) -> Row:
    return store.read_row(table, row, ReadSpec(families=FAMILIES, versions=versions))


def _short(value: bytes, width: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def describe(family: bytes, ts: int, value: bytes, cell: CellRef | None = None) -> str:
    """A cell as a person reads it; ``cell`` tells a primary lock from a secondary."""
    if family == DATA:
        return _short(value)
    if family == LOCK:
        lock = Lock.decode(ts, value)
        role = "primary" if lock.primary == cell else f"primary@{lock.primary}"
        kind = "" if lock.kind is Kind.PUT else " (delete)"
        return f"lock{kind}: {role} ttl={lock.ttl_ms}ms owner={lock.owner.decode(errors='replace')}"
    if family == WRITE:
        write = Write.decode(value)
        if write.kind is Kind.ROLLBACK:
            return "rolled back"
        if write.kind is Kind.DELETE:
            return f"delete @ {write.start_ts}"
        return f"data @ {write.start_ts}"
    if family == NOTIFY:
        return "notify"
    return _short(value)


def render(table: str, key: bytes, snapshot: Row, columns: list[str] | None = None) -> str:
    """Text for every column of the row (or the named ones), newest timestamp first."""
    quals = sorted({cell.qualifier for cell in snapshot})
    if columns is not None:
        wanted = {c.encode() for c in columns}
        quals = [q for q in quals if q in wanted]
    if not quals:
        return f"{table} row {key!r}: no cells"
    out = []
    for q in quals:
        cells = [c for c in snapshot if c.qualifier == q]
        by_ts: dict[int, dict[bytes, str]] = {}
        ref = CellRef(table, key, column_name(q))
        for cell in cells:
            by_ts.setdefault(cell.ts, {})[cell.family] = describe(cell.family, cell.ts, cell.value, ref)
        widths = [max([len(h)] + [len(v.get(f, "")) for v in by_ts.values()]) for f, h in zip(FAMILIES, HEADERS)]
        ts_width = max([2] + [len(str(ts)) for ts in by_ts])
        out.append(f"{table} row {key!r}  column {column_name(q)!r}")
        out.append("  ".join([f"{'ts':<{ts_width}}"] + [f"{h:<{w}}" for h, w in zip(HEADERS, widths)]).rstrip())
        for ts in sorted(by_ts, reverse=True):
            cols = [f"{by_ts[ts].get(f, ''):<{w}}" for f, w in zip(FAMILIES, widths)]
            out.append("  ".join([f"{ts:<{ts_width}}"] + cols).rstrip())
        out.append("")
    return "\n".join(out).rstrip() + "\n"
