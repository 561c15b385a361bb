"""The local HBase that Caffeine starts itself (plain ``java`` processes, no Docker), and the oracle.

Layer: runtime. Imports ``caffeine.config`` and ``caffeine.errors``; storage and the layers
above use it, never the other way round. Three exceptions, all kept out of module import
time: ``health``'s oracle probes import ``caffeine.oracle.client`` (standard library and config
only) to ask an oracle for its status, ``health``'s Thrift2 probes use the storage layer's
Thrift2 module and row-step probe (``caffeine.storage.thrift2``, ``caffeine.storage.probe``),
and ``oracle_main`` is a process entry point that runs ``caffeine.oracle`` itself.

Modules, bottom up:

- ``home``       ``Layout``: where everything lives under ``Settings.home`` (conf, lib, data, logs, run, tmp, idl)
- ``jars``       HBase's jars from Maven Central via ``pom.xml``, cached per version; the Thrift2 IDL
- ``siteconf``   hbase-site.xml and log4j2.properties for the local (and the Docker) instance
- ``ports``      is a port free, who holds it, does it accept connections
- ``process``    start a detached JVM or Python process, find ours, stop them with escalation
- ``health``     real Thrift1 / Thrift2 calls that prove HBase answers; the oracle's status(); ZooKeeper, region servers
- ``oracle_main`` ``python -m caffeine.oracle`` with the runtime's marker arguments
- ``catalogue``  the pieces (standalone HBase or the cluster mode's servers, two Thrift servers, the
                 oracle and its standby): main class or module, arguments, roles, ports, the
                 oracles' environment
- ``modes``      which mode runs under a home; whether a start in the mode asked may go ahead,
                 its ports free
- ``local_status`` ``Status`` / ``PieceStatus``: what runs and whether it answers, and its report
- ``diagnostics`` why a piece failed, from its log: the errors ``up`` raises
- ``survey``     reads the state off the machine into a ``Status`` (ports, processes, probes)
- ``startup``    the wait after a start: poll until healthy, reporting progress, or raise
- ``shutdown``   stopping: all pieces in reverse order, HBase cleanly, or one by SIGKILL
- ``local``      ``LocalHBase``: up / down / status / restart / kill, the API commands and tests use
- ``spark``      ``StandaloneCluster``: a Spark standalone master and workers (``caffeine spark``),
                 and ``executor_conf`` for a driver that runs a job there

Its commands, ``caffeine up | down | status`` and ``caffeine spark up | down | status``, are
``caffeine.commands.runtime``.
"""

from caffeine.runtime.errors import LocalHBaseError, PortInUse

__all__ = ["LocalHBaseError", "PortInUse"]
