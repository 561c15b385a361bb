"""The local HBase that Caffeine starts itself: plain ``java`` processes, no Docker.

Layer: runtime (imports only ``caffeine.config`` and ``caffeine.errors``; storage and the
layers above use it, never the other way round).

Modules, bottom up:

- ``layout``     where everything lives under ``Settings.home`` (conf, lib, data, logs, run, tmp, idl)
- ``jars``       HBase's jars from Maven Central via ``pom.xml``, cached per version; the Thrift2 IDL
- ``siteconf``   hbase-site.xml and log4j2.properties for the local (and the Docker) instance
- ``ports``      is a port free, who holds it, does it accept connections
- ``process``    start a detached JVM, find our JVMs, stop them with escalation
- ``health``     real Thrift1 / Thrift2 calls that prove HBase answers
- ``local``      ``LocalHBase``: up / down / status / restart_thrift2, the API tests use
- ``commands``   ``caffeine up | down | status``
"""

from caffeine.runtime.errors import LocalHBaseError, PortInUse

__all__ = ["LocalHBaseError", "PortInUse"]
