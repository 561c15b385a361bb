"""Where a JVM's CPU went: the hottest methods and subsystems of a Java Flight Recorder file.

    jcmd <pid> JFR.start name=hot settings=profile duration=60s filename=/tmp/hbase.jfr
    python3 bench/jfr_hot.py /tmp/hbase.jfr [--top 25]

Reads the ``jdk.ExecutionSample`` events (``jfr print --json``, JDK 17) and prints the share
of samples (a) by subsystem: the first frame, walking down from the top of the stack, whose
class matches one of ``SUBSYSTEMS`` (a skip-list seek counts as the memstore's, whoever
called it); (b) with Caffeine's coprocessor anywhere on the stack (everything its checks
cost, the reads they make included); (c) by thread pool; (d) by the RPC served (the
outermost ``RSRpcServices`` or Thrift handler method); (e) by top frame (self time).

Execution samples cover Java threads running Java code: the JIT compilers, the collector's
threads and time in system calls are not in them (``jvm_threads.py`` shows those). Starting
a recording makes the JIT recompile for a minute or two: start it before the load's warm-up
and dump only the window that matters (``JFR.dump name=hot begin=-50s filename=...``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import Counter

# (label, class-name prefixes), nearest match on the stack wins.
SUBSYSTEMS = [
    ("caffeine coprocessor", ("org.caffeine.",)),
    ("memstore insert/seek", ("org.apache.hadoop.hbase.regionserver.Segment", "org.apache.hadoop.hbase.regionserver.CellSet",
                              "org.apache.hadoop.hbase.regionserver.MemStore", "org.apache.hadoop.hbase.regionserver.AbstractMemStore",
                              "org.apache.hadoop.hbase.regionserver.DefaultMemStore", "java.util.concurrent.ConcurrentSkipListMap")),
    ("store scanners (reads)", ("org.apache.hadoop.hbase.regionserver.StoreScanner", "org.apache.hadoop.hbase.regionserver.KeyValueHeap",
                                "org.apache.hadoop.hbase.regionserver.RegionScannerImpl", "org.apache.hadoop.hbase.regionserver.HRegion$RegionScannerImpl",
                                "org.apache.hadoop.hbase.io.hfile.", "org.apache.hadoop.hbase.regionserver.StoreFileScanner")),
    ("WAL", ("org.apache.hadoop.hbase.regionserver.wal.", "org.apache.hadoop.hbase.wal.")),
    ("batch mutate (row locks, MVCC)", ("org.apache.hadoop.hbase.regionserver.HRegion$BatchOperation",
                                        "org.apache.hadoop.hbase.regionserver.HRegion$MutationBatchOperation",
                                        "org.apache.hadoop.hbase.regionserver.MultiVersionConcurrencyControl")),
    ("RPC and protobuf", ("org.apache.hadoop.hbase.ipc.", "org.apache.hbase.thirdparty.com.google.protobuf.",
                          "org.apache.hadoop.hbase.shaded.protobuf.", "org.apache.hbase.thirdparty.io.netty.")),
    ("thrift server", ("org.apache.hadoop.hbase.thrift", "org.apache.thrift.")),
    ("HBase client (in the Thrift server)", ("org.apache.hadoop.hbase.client.",)),
    ("GC / JIT / JVM", ("jdk.internal.", "java.lang.ref.")),
]


def thread_group(name: str) -> str:
    """A thread's name without its numbers: one line per pool (RPC handlers, flushers, ...)."""
    return re.sub(r"\d+", "N", name or "?")


def samples(path: str):
    out = subprocess.run(["jfr", "print", "--json", "--stack-depth", "64", "--events", "jdk.ExecutionSample", path],
                         check=True, capture_output=True, text=True).stdout
    for event in json.loads(out)["recording"]["events"]:
        values = event["values"]
        frames = values["stackTrace"]["frames"] if values.get("stackTrace") else []
        thread = (values.get("sampledThread") or {}).get("javaName") or "?"
        yield thread, [f"{f['method']['type']['name'].replace('/', '.')}.{f['method']['name']}" for f in frames]


def subsystem(stack: list[str]) -> str:
    for frame in stack:  # top of the stack first
        for label, prefixes in SUBSYSTEMS:
            if frame.startswith(prefixes):
                return label
    return "other"


def rpc_method(stack: list[str], thread: str) -> str:
    """The region server RPC a sample serves (``RSRpcServices.multi``, ``get``, ``scan``,
    ``mutate``), the Thrift call a Thrift server's sample serves (``ThriftHBaseServiceHandler``
    method), else the thread's own work (flushes, the WAL's threads, netty I/O)."""
    for frame in reversed(stack):  # outermost first
        for cls in ("org.apache.hadoop.hbase.regionserver.RSRpcServices.",
                    "org.apache.hadoop.hbase.thrift2.ThriftHBaseServiceHandler.",
                    "org.apache.hadoop.hbase.thrift.ThriftHBaseServiceHandler."):
            if frame.startswith(cls):
                return frame[len(cls):]
    # JFR keeps the top 64 frames: a deep handler stack loses its RPC frame.
    return f"(none found: {thread_group(thread)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jfr")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    tops, subs, threads, rpcs, n, under_cp = Counter(), Counter(), Counter(), Counter(), 0, 0
    for thread, stack in samples(args.jfr):
        if not stack:
            continue
        n += 1
        tops[stack[0]] += 1
        threads[thread_group(thread)] += 1
        subs[subsystem(stack)] += 1
        rpcs[rpc_method(stack, thread)] += 1
        under_cp += any(f.startswith("org.caffeine.") for f in stack)
    if not n:
        print("no execution samples", file=sys.stderr)
        return 1
    print(f"{n} execution samples\n\nby subsystem (nearest frame on the stack):")
    for label, c in subs.most_common():
        print(f"  {100 * c / n:5.1f}%  {label}")
    print("\nby thread (numbers folded):")
    for name, c in threads.most_common(10):
        print(f"  {100 * c / n:5.1f}%  {name}")
    print("\nby RPC served (outermost RSRpcServices / Thrift handler method on the stack):")
    for name, c in rpcs.most_common(12):
        print(f"  {100 * c / n:5.1f}%  {name}")
    print(f"\nwith Caffeine's coprocessor on the stack: {100 * under_cp / n:.1f}%")
    print(f"\nby top frame (self time), top {args.top}:")
    for frame, c in tops.most_common(args.top):
        print(f"  {100 * c / n:5.1f}%  {frame}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
