"""Reading the runtime's state off the machine: which pieces run, and whether each answers.

Layer: runtime. Looks at ports and asks with ``health``'s probes; starts and stops nothing,
never downloads. Contract:

- ``survey(settings, layout, pieces, found, probe_timeout_s, polling=False)`` is the ``Status`` of ``pieces``
  (HBase's servers first), given ``found``: our running processes by piece name. A piece
  of ours is healthy only when a real call answered (Thrift1 ``tables()``, Thrift2 a read of
  ``hbase:meta``, the oracle ``status()``, ZooKeeper ``srvr``, a region server's ``/jmx``
  with the metrics it has once it reported for duty), and a Thrift server or region server
  only once its info port is open too; the master (standalone: the one HBase JVM) when either
  Thrift server answered or, with neither, when its log says it finished initializing; a
  standalone HBase whose region server answers Thrift2 (``catalogue.thrift2_port_of``) only
  once that Thrift2 answers, since the oracle and every client need it. A
  port that accepts with no process of ours is reported as taken by another process, never
  as ours. ``polling``: the caller asks again soon (startup's wait), so a region server that
  has not reported for duty is asked once, not a few times.
- On an oracle piece's port (the oracle's, the standby's), an oracle that answers but is not
  ours is *external* (healthy, with the pids listening there); anything else there is a
  conflict, said in the detail. ``external_oracle(settings, piece)`` tells who that external
  oracle is, or None.
- An oracle piece of ours is healthy when it answers, as the active oracle or as a standby
  (the detail says which), so long as one of the oracle pieces surveyed is the active one:
  with none active (right after the active one crashed, until a standby has waited out its
  lease) the standbys are "not healthy yet".
- ``coprocessor_status(st, settings, layout, probe_timeout_s)`` fills in whether Caffeine's
  coprocessor is loaded (``health.coprocessor_loaded``, only when Thrift2 answered) and
  whether the settings want it.

Every call is bounded by ``probe_timeout_s``, the oracle's also by ``ORACLE_PROBE_TIMEOUT_S``.
"""

from __future__ import annotations

from caffeine.config import Settings
from caffeine.runtime import coprocessor, health
from caffeine.runtime.catalogue import HOST, MASTER_ROLES, ORACLE, Piece, Port, thrift2_port_of
from caffeine.runtime.diagnostics import master_initialized
from caffeine.runtime.errors import LocalHBaseError
from caffeine.runtime.home import Layout
from caffeine.runtime.ports import describe_pids, listener_pids, port_accepts
from caffeine.runtime.local_status import PieceStatus, Status

# Bound on one oracle status() call: it answers from memory, in well under a millisecond.
ORACLE_PROBE_TIMEOUT_S = 3.0


def survey(
    settings: Settings, layout: Layout, pieces: tuple[Piece, ...], found: dict[str, list[int]], probe_timeout_s: float,
    *, polling: bool = False,
) -> Status:
    out: list[PieceStatus] = []
    probes: dict[str, tuple[bool, str]] = {}
    # Each oracle piece's part: "active", "standby" or None (not answering).
    oracle_roles: dict[str, str | None] = {}
    for piece in pieces:
        pids = found.get(piece.name, [])
        accepting = {p.number: port_accepts(p.number, HOST) for p in piece.ports}
        if piece.role == ORACLE:
            status, oracle_roles[piece.name] = _oracle_status(settings, layout, piece, pids, accepting, probe_timeout_s)
            out.append(status)
            continue
        if not pids:
            held = [p for p in piece.ports if accepting[p.number]]
            detail = "not running" + (
                f" (but port {', '.join(str(p.number) for p in held)} is taken by another process)" if held else ""
            )
            out.append(PieceStatus(piece, pids, accepting, False, detail, layout.log_file(piece.name)))
            continue
        closed = [p for p in piece.ports if not accepting[p.number]]
        metrics: dict[str, int] = {}
        if closed and piece.role not in MASTER_ROLES:
            # The info port too: it opens last, and a server that cannot bind it exits.
            ok, detail = False, _not_listening(closed)
        elif piece.role == "thrift1":
            ok, detail = health.probe_thrift1(HOST, piece.service_port.number, probe_timeout_s)
        elif piece.role == "thrift2":
            ok, detail = health.probe_thrift2(HOST, piece.service_port.number, layout.thrift2_idl, probe_timeout_s)
        elif piece.role == "zookeeper":
            ok, detail = health.probe_zookeeper(HOST, piece.service_port.number, min(probe_timeout_s, 3.0))
        elif piece.role == "regionserver":
            # A caller that polls (startup's wait) asks again on its next round anyway.
            ok, detail, metrics = health.probe_regionserver(HOST, piece.ports[1].number, min(probe_timeout_s, 3.0),
                                                            attempts=1 if polling else health.JMX_ATTEMPTS)
        else:
            ok, detail = True, ""  # the master: decided below, from the Thrift probes and the log
            served = thrift2_port_of(piece)  # Thrift2 answered by the standalone region server
            if served is not None and accepting[served.number]:
                probes["thrift2"] = health.probe_thrift2(HOST, served.number, layout.thrift2_idl, probe_timeout_s)
        probes[piece.role] = (ok, detail)
        out.append(PieceStatus(piece, pids, accepting, ok, detail, layout.log_file(piece.name), metrics=metrics))
    for ps in out:
        if ps.piece.role in MASTER_ROLES and ps.running:
            ps.healthy, ps.detail = _master_health(layout, ps, probes)
    if oracle_roles and "active" not in oracle_roles.values():
        for st in out:
            if oracle_roles.get(st.name) == "standby":
                st.healthy = False
                st.detail += "; no oracle is active yet (a standby takes over once the lease of the one "
                st.detail += "that stopped runs out: the block plus 0.5 s)"
    return Status(layout, out)


def _not_listening(closed: list[Port]) -> str:
    return "JVM up, not listening yet on " + ", ".join(f"{p.label} {p.number}" for p in closed)


def _oracle_status(
    settings: Settings, layout: Layout, piece: Piece, pids: list[int], accepting: dict[int, bool],
    probe_timeout_s: float,
) -> tuple[PieceStatus, str | None]:
    """The piece's status, and its role: "active", "standby" or None (not answering)."""
    port = piece.service_port.number
    log = layout.log_file(piece.name)
    timeout = min(probe_timeout_s, ORACLE_PROBE_TIMEOUT_S)
    if pids:
        if not accepting[port]:
            # Before it listens it opens the store (and, without a standby, takes the
            # high-water mark's lease: a wait of one block if a previous oracle died
            # without handing it back).
            return PieceStatus(piece, pids, accepting, False,
                               "process up, not listening yet (opening HBase, taking the high-water mark's lease)",
                               log), None
        role, detail = health.oracle_role(HOST, port, settings, timeout)
        return PieceStatus(piece, pids, accepting, role is not None, detail, log), role
    if not accepting[port]:
        return PieceStatus(piece, pids, accepting, False, "not running", log), None
    holders = listener_pids(port)
    who = describe_pids(holders)
    role, detail = health.oracle_role(HOST, port, settings, timeout)
    if role is not None:
        return PieceStatus(
            piece, pids, accepting, True,
            f"{detail}; not started by `caffeine up` for this home ({who}); `caffeine down` leaves it running",
            log, external=True, foreign_pids=holders,
        ), role
    return PieceStatus(piece, pids, accepting, False,
                       f"not running (but port {port} is taken by another process, which does not answer "
                       f"as an oracle: {who})", log), None


def _master_health(layout: Layout, hb: PieceStatus, probes: dict[str, tuple[bool, str]]) -> tuple[bool, str]:
    closed = [p for p in hb.piece.ports if not hb.accepting[p.number]]
    if closed:
        return False, _not_listening(closed)
    thrift2_ok, thrift2_detail = probes.get("thrift2", (False, ""))
    if thrift2_port_of(hb.piece) is not None and not thrift2_ok:
        return False, f"listening; Thrift2 in the region server does not answer yet ({thrift2_detail})"
    # The real proof is a call through a Thrift server; both go to the master (tables()) and
    # to the region server holding hbase:meta.
    answered = [n for n in ("thrift1", "thrift2") if probes.get(n, (False, ""))[0]]
    if answered:
        return True, "answers through " + " and ".join(answered)
    if master_initialized(layout, hb.name):
        return True, "master initialized (per its log); no Thrift server answers to confirm"
    return False, "listening; master still initializing"


def external_oracle(settings: Settings, piece: Piece) -> str | None:
    """If something not ours answers the oracle protocol on ``piece``'s port: who (else None).

    Call only when no oracle of ours runs (ours holds that port too).
    """
    port = piece.service_port.number
    if not port_accepts(port, HOST):
        return None
    ok, _ = health.probe_oracle(HOST, port, settings, ORACLE_PROBE_TIMEOUT_S)
    if not ok:
        return None
    return describe_pids(listener_pids(port))


def coprocessor_table(settings: Settings) -> str:
    """The table the coprocessor probe writes to: the oracle's (it exists once ``up`` ran)."""
    return f"{settings.runtime_table_prefix}oracle"


def coprocessor_status(st: Status, settings: Settings, layout: Layout, probe_timeout_s: float) -> None:
    """Fill in ``st.coprocessor`` with a probe through Thrift2 (when it answers)."""
    try:
        st.coprocessor_wanted = coprocessor.wanted(settings)
    except LocalHBaseError:
        st.coprocessor_wanted = True  # CAFFEINE_COPROCESSOR=on without sources: `up` says so
    served = next(((ps, port) for ps in st.pieces for port in [thrift2_port_of(ps.piece)] if port is not None), None)
    if served is None or not served[0].healthy:
        return
    st.coprocessor = health.coprocessor_loaded(
        HOST, served[1].number, layout.thrift2_idl, coprocessor_table(settings), probe_timeout_s,
    )
