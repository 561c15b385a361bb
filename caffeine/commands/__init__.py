"""The application layer: the ``caffeine`` command line, its sub-commands and the demo.

Layer: commands. The top: everything below it is a library that imports
nothing from here, from ``caffeine.observers`` or from the applications (``crawler``, ``api``,
``spark``, ``testweb``); this package is where they are put together.

    cli.py           ``caffeine``: assembles every area's sub-commands, turns failures into messages
    plugins.py       finds them: the entry points of the group ``caffeine.commands``, in order
    __main__.py      ``python3 -m caffeine.commands``, the same program
    runtime.py       ``up``, ``down``, ``status``: the local HBase, its Thrift servers and the oracle
    transactions.py  ``tables``, ``inspect``, ``worker``, ``wait``, ``engine``, ``gc``
    ops.py           ``notify`` (backfill), ``scan``
    oracle.py        ``oracle``: the timestamp oracle in the foreground
    indexing.py      ``dups``: the indexing application's duplicate clusters
    demo.py          ``demo``: everything, from nothing to search results

The crawler, the test web, the search service and the batch job keep their sub-commands in
their own packages (``crawler.commands``, ``testweb.commands``, ``api.commands``,
``spark.commands``): each is an application that ships beside the library, and its commands
are its front door, next to the code they drive and the options only it knows (Spark's
arguments, uvicorn's). Every module that contributes sub-commands, these and the ones here,
is an entry point of the group ``caffeine.commands`` in ``pyproject.toml``, so ``cli`` finds
them without naming one, and no module here but the demo imports an application (the
import-linter contract ``commands-import-no-application``): the demo puts the crawler and
the test web together, which is this layer's job.
"""

# The application whose observers ``worker``, ``wait``, ``engine``, ``notify`` and ``status``
# run or watch unless ``--app`` names another: the indexing observer chain.
DEFAULT_APP = "caffeine.observers.app:application"
# Observer threads of a ``caffeine worker`` process: a wave runs up to this many notifications
# of one observer together. 16 against 8, alternated in one session (bench_pipeline, 3,000
# pages, 2 processes, flat out): 1.13x the documents/s, 0.85x the storage calls per document,
# 0.96x the CPU per page; 32 was no better than 16 (a wave waits for its slowest run).
DEFAULT_WORKER_THREADS = 16
