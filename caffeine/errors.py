"""Errors every layer shares.

Layer: shared. Each layer defines its own subclasses next to the code that raises them::

    CaffeineError
    ├── LocalHBaseError      (caffeine.runtime: the local HBase could not start or stop)
    ├── StorageError         (caffeine.storage)
    │   ├── TableNotFound
    │   ├── StorageUnavailable        a Thrift server did not answer after bounded retries
    │   └── RowTransactionAborted     a row transaction lost its compare-and-set too often
    └── (caffeine.percolator adds its own tree)
"""


class CaffeineError(Exception):
    """Base of every error Caffeine raises on purpose; the CLI prints these without a trace."""
