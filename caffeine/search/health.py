"""Health probes (``/healthz``): does HBase answer reads, does the oracle answer?

Layer: search. Imports nothing of the library beyond what it is given (the ``Cluster``
and two ``ServingTable``s). Knows nothing of HTTP.

Contract: each probe runs in a thread of its own pool, so a hung HBase stalls neither the
searches' reads nor the other probe; a probe that has not answered within
``health_timeout_s`` fails with that reason. The report is ``{"ok", "checks": {name: {"ok",
"detail", "ms"}}}``, ``ok`` when every check is.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout


class HealthProbes:
    """Probes of one ``Cluster``; thread-safe; ``close`` when done."""

    def __init__(self, cluster, docstats, postings, timeout_s: float) -> None:
        self.cluster = cluster
        self.docstats = docstats
        self.postings = postings
        self.timeout_s = timeout_s
        self._probes = ThreadPoolExecutor(4, thread_name_prefix="api-probe")

    def close(self) -> None:
        self._probes.shutdown(wait=False, cancel_futures=True)

    def health(self) -> dict:
        """Probe HBase (a point read of ``docstats`` and ``postings``) and the oracle."""
        timeout = self.timeout_s

        def hbase():
            self.docstats.get(b"\x00healthz")
            self.postings.get(b"\x00healthz")
            return "reads of docstats and postings answered"

        def oracle():
            return f"next timestamp {self.cluster.oracle.status()}"

        checks = {}
        futures = {name: self._probes.submit(fn) for name, fn in (("hbase", hbase), ("oracle", oracle))}
        for name, future in futures.items():
            started = time.monotonic()
            try:
                detail = future.result(timeout=timeout)
                checks[name] = {"ok": True, "detail": detail}
            except FutureTimeout:
                checks[name] = {"ok": False, "detail": f"no answer within {timeout:g}s"}
            except Exception as exc:  # noqa: BLE001 - the reason is the answer
                text = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
                checks[name] = {"ok": False, "detail": f"{type(exc).__name__}: {text}".rstrip(": ")}
            checks[name]["ms"] = round((time.monotonic() - started) * 1000, 1)
        return {"ok": all(c["ok"] for c in checks.values()), "checks": checks}
