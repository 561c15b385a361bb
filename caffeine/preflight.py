"""Before a command talks to HBase or the oracle: do they answer? If not, say so at once.

Layer: shared. Top of the library, under the application layer (used by ``caffeine.commands.cli``;
probes with ``caffeine.runtime.health``, which makes one real call per server with a bounded
socket timeout).

Why: the storage layer rides out server restarts by retrying for a minute, and the oracle
client for 30 s, which is right in the middle of a run and wrong at its start: a user who
forgot ``caffeine up`` would wait a minute in silence. So every command that needs the
servers first probes the ones it needs, all at once, each within ``preflight_timeout_s``
(3 s by default; 0 turns the check off), and:

- a one-shot command fails with ``Unreachable``: which addresses did not answer and why,
  and the CLI adds what to try (``caffeine status`` / ``caffeine up``);
- a long-running command whose job is to keep going (a worker, the search service, the
  oracle) prints the same once, then probes again every few seconds until everything
  answers, and starts.

``COMMAND_NEEDS`` classifies every sub-command; ``tests/runtime/test_cli_conventions.py``
checks that none is left out.
"""

from __future__ import annotations

import importlib
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from caffeine.config import Settings
from caffeine.errors import CaffeineError

THRIFT1, THRIFT2, ORACLE = "thrift1", "thrift2", "oracle"
STORE = (THRIFT1, THRIFT2)
EVERYTHING = (THRIFT1, THRIFT2, ORACLE)

# What each sub-command talks to. () = nothing, or it starts what it needs itself.
COMMAND_NEEDS: dict[str, tuple[str, ...]] = {
    "up": (), "down": (), "status": (), "demo": (), "testweb": (),
    "tables": STORE, "inspect": STORE,
    "oracle": STORE,  # keeps its high-water mark in HBase
    "worker": EVERYTHING, "wait": EVERYTHING, "engine": EVERYTHING, "gc": EVERYTHING,
    "dups": EVERYTHING, "crawl": EVERYTHING, "serve": EVERYTHING,
    "batch": EVERYTHING, "verify": EVERYTHING, "bench": EVERYTHING,
    "notify": EVERYTHING, "scan": EVERYTHING,
    "ingest": EVERYTHING, "migrate-urls": EVERYTHING,
}
# What the probes import, imported before they run in parallel: threads importing the same
# modules at once can fail with Python's import deadlock detection (_DeadlockError, seen on
# thriftpy2.transport.cybase).
PROBE_MODULES = (
    "caffeine.runtime.health", "caffeine.storage.idl", "caffeine.storage.thrift2", "caffeine.oracle.client",
    "thriftpy2.rpc", "thriftpy2.protocol", "thriftpy2.transport", "thriftpy2.transport.cybase",
)

# Commands whose job is to keep running: they wait for the servers instead of failing.
KEEPS_RETRYING = frozenset({"worker", "serve", "oracle"})
RETRY_EVERY_S = 5.0

NEXT_STEPS = "`caffeine status` says what runs and where the logs are; `caffeine up` starts the local runtime"


@dataclass(frozen=True)
class Silence:
    """One server that did not answer."""

    name: str
    address: str
    detail: str

    def __str__(self) -> str:
        return f"{self.name} {self.address} did not answer ({self.detail})"


class Unreachable(CaffeineError):
    """Servers a command needs did not answer within the preflight timeout."""

    unreachable = True  # the CLI's hint: the runtime is not up

    def __init__(self, silent: list[Silence], timeout_s: float):
        self.silent = silent
        super().__init__(f"no answer within {timeout_s:g} s: " + "; ".join(map(str, silent)))


def _probe(service: str, settings: Settings, timeout_s: float) -> Silence | None:
    from caffeine.runtime import health

    if service == THRIFT1:
        name, host, port = "Thrift1 server", settings.thrift1_host, settings.thrift1_port
        ok, detail = health.probe_thrift1(host, port, timeout_s)
    elif service == THRIFT2:
        from caffeine.storage.idl import thrift2_idl_path

        name, host, port = "Thrift2 server", settings.thrift2_host, settings.thrift2_port
        ok, detail = health.probe_thrift2(host, port, thrift2_idl_path(settings), timeout_s)
    else:
        from caffeine.oracle.errors import describe_addresses

        endpoints = settings.oracle_endpoints
        ok, detail = health.probe_oracles(endpoints, settings, timeout_s)
        return None if ok else Silence("timestamp oracle", describe_addresses(list(endpoints)), detail)
    return None if ok else Silence(name, f"{host}:{port}", detail)


def probe(settings: Settings, services: tuple[str, ...], timeout_s: float) -> list[Silence]:
    """The services that did not answer, probed in parallel (about ``timeout_s`` at most)."""
    if not services:
        return []
    for module in PROBE_MODULES:  # here, before the threads: see PROBE_MODULES
        importlib.import_module(module)
    with ThreadPoolExecutor(len(services), thread_name_prefix="caffeine-preflight") as pool:
        results = list(pool.map(lambda s: _probe(s, settings, timeout_s), services))
    return [r for r in results if r is not None]


def check(command: str, settings: Settings, *, stream=None) -> None:
    """Probe what ``command`` needs; raise ``Unreachable``, or for a command that keeps
    retrying, say what is silent on ``stream`` and wait until everything answers."""
    timeout_s = settings.preflight_timeout_s
    services = COMMAND_NEEDS.get(command, EVERYTHING)
    if timeout_s <= 0 or not services:
        return
    silent = probe(settings, services, timeout_s)
    if not silent:
        return
    if command not in KEEPS_RETRYING:
        raise Unreachable(silent, timeout_s)
    stream = stream or sys.stderr
    print(f"caffeine {command}: {Unreachable(silent, timeout_s)}\n"
          f"  try: {NEXT_STEPS}\n"
          f"  waiting for them, probing every {RETRY_EVERY_S:g} s (Ctrl-C stops)", file=stream, flush=True)
    while silent:
        time.sleep(RETRY_EVERY_S)
        silent = probe(settings, services, timeout_s)
    print(f"caffeine {command}: everything answers now; starting", file=stream, flush=True)


__all__ = ["COMMAND_NEEDS", "KEEPS_RETRYING", "Silence", "Unreachable", "check", "probe"]
