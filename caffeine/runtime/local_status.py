"""The runtime's status as values, and how it reads for a person (``caffeine status``).

Layer: runtime. Values, no I/O: ``survey`` fills them in from what runs on the machine, commands
and tests read them; imports only the catalogue, the home's ``Layout`` and the coprocessor's class name.
Contract:

- ``PieceStatus.state`` is derived, never stored: "external" (an oracle this home did not
  start answers on the port), "stopped" (no process of ours), "healthy" (a real call
  answered), "starting" (ours, but not every port accepts yet), otherwise "unhealthy".
- ``Status.healthy`` holds when every piece is healthy (an external oracle that answers
  counts); ``all_running`` / ``any_running`` count our processes (and the external oracle
  for ``all_running``).
- ``Status.render()`` is the report ``caffeine up`` and ``caffeine status`` print: the overall
  state, then per piece its state, pids, ports (with a note on a port that does not answer
  or is taken), health detail and log, then the data and config paths, the coprocessor
  (with what to do when what runs differs from what the settings ask for) and notes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from caffeine.runtime import coprocessor
from caffeine.runtime.catalogue import HOST, ORACLE, Piece, Port
from caffeine.runtime.home import Layout


@dataclass
class PieceStatus:
    piece: Piece
    pids: list[int]  # our processes (carrying this home's marker)
    accepting: dict[int, bool]  # port number -> accepts connections
    healthy: bool
    detail: str
    log: Path
    # Oracle pieces only: an oracle this home did not start answers on the port (run by hand);
    # ``foreign_pids`` are the processes listening there, when /proc tells.
    external: bool = False
    foreign_pids: list[int] = field(default_factory=list)
    # A region server of the cluster mode, once it answers: its region and request counts
    # (``health.REGIONSERVER_METRICS``: regions, requests, read_requests, write_requests).
    metrics: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.piece.name

    @property
    def running(self) -> bool:
        return bool(self.pids)

    @property
    def state(self) -> str:
        if self.external:
            return "external"
        if not self.pids:
            return "stopped"
        if self.healthy:
            return "healthy"
        if not all(self.accepting.values()):
            return "starting"
        return "unhealthy"


@dataclass
class Status:
    layout: Layout
    pieces: list[PieceStatus]
    notes: list[str] = field(default_factory=list)
    # Caffeine's coprocessor, when Thrift2 answered: (loaded: True / False / None unknown,
    # what the probe saw) and whether this runtime's settings load it.
    coprocessor: tuple[bool | None, str] | None = None
    coprocessor_wanted: bool = False

    @property
    def healthy(self) -> bool:
        return all(p.healthy for p in self.pieces)

    @property
    def all_running(self) -> bool:
        return all(p.running or p.external for p in self.pieces)

    @property
    def any_running(self) -> bool:
        return any(p.running for p in self.pieces)

    def piece(self, name: str) -> PieceStatus:
        return next(p for p in self.pieces if p.name == name)

    def render(self) -> str:
        if self.healthy:
            overall = "healthy"
        elif not self.any_running:
            overall = "not running"
        elif not self.all_running:
            overall = "partially running"
        else:
            overall = "running but not healthy"
        lay = self.layout
        servers = [p for p in self.pieces if p.piece.role == "regionserver"]
        mode = f" (a cluster: ZooKeeper, master, {len(servers)} region servers)" if servers else ""
        what = f"Local HBase {lay.hbase_version}{mode}" + (" and timestamp oracle" if any(p.name == ORACLE for p in self.pieces) else "")
        out = [f"{what} in {lay.home}: {overall}"]
        w = max(8, *(len(p.name) for p in self.pieces))
        for p in self.pieces:
            pids = p.pids or p.foreign_pids
            pid = ",".join(map(str, pids)) if pids else "-"
            ports = ", ".join(f"{port.label} {HOST}:{port.number}{_port_note(p, port)}" for port in p.piece.ports)
            out.append(f"  {p.name:<{w}} {p.state:<9} pid {pid:<8} {ports}")
            out.append(f"  {'':<{w}} {p.detail}")
            out.append(f"  {'':<{w}} log {p.log}" if not p.external else f"  {'':<{w}} log (its own: not started under this home)")
        if servers and all(s.metrics for s in servers):
            total = sum(s.metrics["regions"] for s in servers)
            out.append("  regions  " + ", ".join(f"{s.name} {s.metrics['regions']}" for s in servers)
                       + f" ({total} in all; `caffeine tables list --regions` shows each table's)")
        out.append(f"  data     {lay.hbase_root_dir}  (ZooKeeper: {lay.zookeeper_data_dir})")
        out.append(f"  config   {lay.hbase_site}")
        if self.coprocessor is not None:
            loaded, detail = self.coprocessor
            word = {True: "loaded", False: "NOT loaded", None: "unknown"}[loaded]
            out.append(f"  coprocessor {word} ({coprocessor.OBSERVER_CLASS}): {detail}")
            if loaded is False and self.coprocessor_wanted:
                out.append("  coprocessor HBase was started without it: `caffeine down && caffeine up` loads it")
            elif loaded is True and not self.coprocessor_wanted:
                out.append("  coprocessor CAFFEINE_COPROCESSOR=off, but the running HBase still loads it until restarted")
        out.extend(f"  note     {n}" for n in self.notes)
        return "\n".join(out)


def _port_note(p: PieceStatus, port: Port) -> str:
    accepting = p.accepting.get(port.number, False)
    if p.external:
        return ""
    if p.running:
        return "" if accepting else " (not listening)"
    return " (taken by another process)" if accepting else ""
