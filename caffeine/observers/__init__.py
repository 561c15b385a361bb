"""Caffeine's indexing application: the observer chain (document -> cluster -> export).

Layer: observers. Observers use only the public ``caffeine.percolator`` API (through the
transaction each run is given) and the pure ``caffeine.index`` core. ``caffeine.observers.app``
wires them; docs/INDEXING.md is the data model they share with the Spark job and the API.
"""
