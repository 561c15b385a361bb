"""Which mode runs under a home, and whether a start in the mode asked may go ahead.

Layer: runtime. Pure, over the catalogue and the processes found (``process.find_pieces``'s
answer), except ``ports_in_use``, which asks the machine which ports are free. Contract:

- ``running_settings(settings, found)`` is ``settings`` with the mode of what runs: standalone,
  or a cluster of as many region servers as the highest one running or the settings ask for
  (so one that died shows as stopped), and a standalone HBase beside a ``thrift2`` JVM with
  Thrift2 in that JVM; ``settings`` itself when no HBase server runs. What
  ``status`` and ``down`` go by, whatever mode the command that asks was given.
- ``mode_conflict(settings, pieces, found, home)`` says why ``up`` must not start the mode of
  ``settings`` (processes of the other mode, or more region servers than asked, run under the
  home), or None. Missing pieces of the mode asked are no conflict: ``up`` starts them.
- ``port_clashes(pieces)`` lists ports given to two pieces (a region server's range can reach
  another setting's port), each with the setting that moves it.
- ``ports_in_use(pieces, order)`` is the ``PortInUse`` to raise when a port of ``pieces`` is
  held by any process (which one, and the setting that moves the port), or None.
"""

from __future__ import annotations

from pathlib import Path

from caffeine.config import Settings
from caffeine.runtime.catalogue import HOST, ORACLES, Piece, describe_mode, regionservers_running
from caffeine.runtime.errors import PortInUse
from caffeine.runtime.ports import describe_pids, listener_pids, port_is_free
from caffeine.runtime.shutdown import STOP_PIECE


def running_settings(settings: Settings, found: dict[str, list[int]]) -> Settings:
    running = regionservers_running(found)
    if running is None:
        return settings
    asked = settings.regionservers
    n = max(running, asked) if running > 0 and asked > 0 else running
    update: dict[str, object] = {} if n == asked else {"regionservers": n}
    if n <= 0 and "thrift2" in found and settings.thrift2_server != "separate":
        update["thrift2_server"] = "separate"
    return settings.model_copy(update=update) if update else settings


def mode_conflict(settings: Settings, pieces: tuple[Piece, ...], found: dict[str, list[int]], home: Path) -> str | None:
    names = {p.name for p in pieces}
    # The stop JVM (STOP_PIECE) belongs to no mode, nor do the oracles: a standby left running
    # by an `up` with another CAFFEINE_ORACLE_STANDBY_PORT is no HBase of another mode.
    if not [n for n in found if n not in names and n != STOP_PIECE and n not in ORACLES]:
        return None
    now = describe_mode(running_settings(settings, found))
    return (f"HBase runs under {home} as {now} ({', '.join(sorted(found))}); this asks for "
            f"{describe_mode(settings)} (CAFFEINE_REGIONSERVERS={settings.regionservers}, "
            f"CAFFEINE_THRIFT2_SERVER={settings.thrift2_server}): "
            "`caffeine down` first, or ask for what runs")


def port_clashes(pieces: tuple[Piece, ...]) -> list[str]:
    seen: dict[int, str] = {}
    clashes = []
    for piece in pieces:
        for port in piece.ports:
            here = f"{piece.name} {port.label}"
            other = seen.setdefault(port.number, here)
            if other != here:
                clashes.append(f"port {port.number}: {other} and {here} (move one: {port.how_to_move()})")
    return clashes


def ports_in_use(pieces: list[Piece], order: list[str]) -> PortInUse | None:
    """Every port of ``pieces`` that something holds, said piece by piece (``order``: the
    piece names in start order), with whom and how to move it; None when all are free."""
    conflicts: list[tuple[str, int, str]] = []
    lines: list[str] = []
    for piece in pieces:
        for port in piece.ports:
            if port_is_free(port.number, HOST):
                continue
            holder = describe_pids(listener_pids(port.number))
            conflicts.append((f"{piece.name} {port.label}", port.number, holder))
            lines.append(
                f"  port {port.number} ({piece.name}: {port.label}) is in use by {holder}\n"
                f"    -> stop that process, or move this port: {port.how_to_move()}"
            )
    if not conflicts:
        return None
    names = sorted({c[0].split()[0] for c in conflicts}, key=order.index)
    return PortInUse(
        f"cannot start {', '.join(names)}: ports already in use (nothing was started)\n" + "\n".join(lines),
        conflicts,
    )
