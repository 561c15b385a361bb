"""The batch baseline: a PySpark job that recomputes the observer chain's output from scratch.

Layer: spark. Reads the ``repository`` table through the public
``caffeine.percolator`` API (one snapshot, read in parallel by row ranges), computes with the
same pure functions as the observers (``caffeine.index``, ``caffeine.index.documents``) and
the same data contract (``caffeine.index.schema``: names and value codecs), and writes serving-style tables of its own (``batch_*``).

    spark.transforms   pure functions over Python objects and RDDs (no I/O): the logic
    spark.hbase_io     key-range sampling, the per-partition snapshot reader and writers
    spark.job          the thin job: session, read, transform, write (``caffeine batch``,
                       ``spark-submit spark/job.py``)
    spark.verify       incremental vs batch, table by table (``caffeine verify``)
    spark.commands     the CLI sub-commands (batch, verify, bench)

docs/INDEXING.md is the data model both sides implement; spark/README.md says how to run the
job on a cluster.
"""
