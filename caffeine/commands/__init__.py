"""The application layer: the ``caffeine`` command line, its sub-commands and the demo.

Layer: commands. The top: everything below it is a library that imports
nothing from here, from ``caffeine.observers`` or from the applications (``crawler``, ``api``,
``spark``); this package is where they are put together.

    cli.py           ``caffeine``: assembles every area's sub-commands, turns failures into messages
    __main__.py      ``python3 -m caffeine.commands``, the same program
    runtime.py       ``up``, ``down``, ``status``: the local HBase, its Thrift servers and the oracle
    transactions.py  ``tables``, ``inspect``, ``worker``, ``wait``, ``engine``, ``gc``
    ops.py           ``notify`` (backfill), ``scan``
    oracle.py        ``oracle``: the timestamp oracle in the foreground
    indexing.py      ``dups``: the indexing application's duplicate clusters
    demo.py          ``demo``: everything, from nothing to search results
    testweb.py       ``testweb``: serve the generated local web (the ``testweb`` fixture)

The crawler, the search service and the batch job keep their sub-commands in their own
packages (``crawler.commands``, ``api.commands``, ``spark.commands``): each is an application
that ships beside the library, already above it, and its commands are its front door, next
to the code they drive and the options only it knows (Spark's arguments, uvicorn's). ``cli``
imports them by name like the modules here.
"""

# The application whose observers ``worker``, ``wait``, ``engine``, ``notify`` and ``status``
# run or watch unless ``--app`` names another: the indexing observer chain.
DEFAULT_APP = "caffeine.observers.app:application"
