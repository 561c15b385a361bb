"""Fixtures of the long kill and fault tests: what they start, prepare and clean up alike.

- ``fast_cluster``: a client in this process over the real HBase and the real timestamp
  oracle, judging locks exactly as the children do (``child_helpers.fast_settings``); skips
  (fails under CI) when the oracle is down;
- ``bank_table``: a fresh table of ``support.bank``'s accounts, each holding the starting
  balance;
- ``proxies``: a fault proxy in front of each Thrift server (faults off), closed afterwards.

``children``, ``workers`` and ``say`` are the suite's (``tests/conftest.py``).
"""

from __future__ import annotations

import os
import uuid

import happybase  # noqa: F401 - its import registers the Thrift1 IDL's module, Hbase_thrift
import Hbase_thrift
import pytest

from caffeine.oracle.client import OracleClient
from caffeine.percolator.cluster import Cluster
from support.bank import open_bank
from support.child_helpers import fast_settings, require_oracle
from support.fault_proxy import THRIFT1_WRITES, THRIFT2_WRITES, FaultProxy
from support.session import close_keeping_store


@pytest.fixture
def fast_cluster(hbase_store, hbase_settings):
    """A client in this process, over the real oracle, judging locks as the children do."""
    require_oracle(hbase_settings)
    settings = fast_settings(hbase_settings)
    cluster = Cluster(hbase_store, OracleClient(settings), settings)
    yield cluster
    close_keeping_store(cluster)()


@pytest.fixture
def bank_table(fast_cluster):
    """A fresh bank table (``support.bank``): every account at the starting balance."""
    return open_bank(fast_cluster, "bank_" + uuid.uuid4().hex[:8])


@pytest.fixture
def proxies(hbase_store, hbase_settings):
    """(Thrift1 proxy, Thrift2 proxy), faults off; closed (threads joined) afterwards.
    ``CAFFEINE_TEST_FAULT_SEED`` picks their seed."""
    s = hbase_settings
    seed = int(os.environ.get("CAFFEINE_TEST_FAULT_SEED", "20261124"))
    with FaultProxy(s.thrift1_host, s.thrift1_port, service=Hbase_thrift.Hbase, write_methods=THRIFT1_WRITES,
                    seed=seed, name="thrift1-proxy") as p1, \
         FaultProxy(s.thrift2_host, s.thrift2_port, service=hbase_store.t2.THBaseService,
                    write_methods=THRIFT2_WRITES, seed=seed + 1, name="thrift2-proxy") as p2:
        yield p1, p2
