"""Ports: is one free for us to bind, does it accept connections, which process listens on it.

Layer: runtime. Imports the standard library only. Contract:

- ``port_is_free(port, host)`` answers whether a JVM could bind ``host:port`` now. It binds
  with SO_REUSEADDR, as Java's server sockets do, so leftover TIME_WAIT connections from a
  previous run do not count as "in use" while any listener (IPv4, IPv6 or wildcard) does.
- ``port_accepts(port, host)`` is the liveness probe: a TCP connect within a short timeout.
- ``listener_pids(port)`` finds the pids listening on a TCP port through /proc (Linux; an
  empty result means "unknown", e.g. another user's process) and ``describe_pid`` turns one
  into "pid 123: python3 -m http.server 9190" for error messages; ``describe_pids`` does it
  for all of them, "an unknown process" when there are none.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def _listening_inodes(port: int) -> set[str]:
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10:
                continue
            local, state, inode = fields[1], fields[3], fields[9]
            # state 0A is TCP_LISTEN; the local address ends in the port as 4 hex digits.
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:
                inodes.add(inode)
    return inodes


def listener_pids(port: int) -> list[int]:
    """Pids of processes with a socket listening on TCP ``port`` (best effort, Linux only)."""
    inodes = _listening_inodes(port)
    if not inodes:
        return []
    wanted = {f"socket:[{i}]" for i in inodes}
    pids: list[int] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                try:
                    if os.readlink(fd) in wanted:
                        pids.append(int(proc.name))
                        break
                except OSError:
                    continue
        except OSError:
            continue  # gone, or another user's process
    return sorted(pids)


def cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def describe_pid(pid: int, width: int = 160) -> str:
    args = cmdline(pid)
    if not args:
        return f"pid {pid}"
    # A JVM command line is mostly flags; show the program, our marker, the main class and its
    # arguments.
    if os.path.basename(args[0]) == "java":
        marker = [a for a in args if a.startswith("-Dcaffeine.home=")]
        main_at = _java_main_index(args)
        shown = ["java", *marker] + (["...", *args[main_at:]] if main_at else args[1:])
    else:
        shown = args
    text = " ".join(" ".join(a.split()) for a in shown)  # a `python -c` script's newlines, too
    return f"pid {pid}: {text[:width]}{'...' if len(text) > width else ''}"


def describe_pids(pids: list[int]) -> str:
    """Who holds a port, for messages: the listeners ``listener_pids`` found, or "an unknown process"."""
    return "; ".join(describe_pid(pid) for pid in pids) if pids else "an unknown process"


# java options whose value is the next argument (everything else starting with "-" stands alone).
_JAVA_OPTS_WITH_VALUE = {"-cp", "-classpath", "--class-path", "--module-path", "-p", "--add-modules",
                         "--add-opens", "--add-exports", "--add-reads", "--limit-modules"}


def _java_main_index(args: list[str]) -> int | None:
    i = 1
    while i < len(args):
        a = args[i]
        if a in _JAVA_OPTS_WITH_VALUE:
            i += 2
        elif a.startswith("-"):
            i += 1
        else:
            return i
    return None
