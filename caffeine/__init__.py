"""Caffeine: incremental web indexing on Percolator-style transactions over Apache HBase.

Layer: shared. The package's own modules (``config``, ``errors``, ``failures``, ``preflight``,
``arguments``) are small and shared: any layer may use them.

Layers, bottom up (each imports only from the ones below it):

- ``caffeine.config``      settings from ``CAFFEINE_*`` environment variables
- ``caffeine.runtime``     the local HBase (jars from Maven Central, plain java processes)
- ``caffeine.storage``     one interface over HBase: reads, scans, atomic row mutations and
                           row transactions; an in-memory twin for fast protocol tests
- ``caffeine.percolator``  transactions and observers (the public API applications use)
- ``caffeine.observers``   the indexing application's observer chain
- ``caffeine.commands``    the application layer, on top: the ``caffeine`` command line,
                           the library's sub-commands and the demo; the applications
                           beside this package (``crawler``, ``testweb``, ``api``, ``spark``)
                           add theirs through entry points (group ``caffeine.commands``)
"""

__version__ = "0.1.0"
