"""The protocol's steps: pure decisions over one row snapshot, no I/O.

Layer: percolator. Protocol steps. Each step takes the row read with its ``*_spec`` and returns a
``caffeine.storage.Decision`` (mutations + result) that the storage layer's row transaction
applies only if the row has not changed since it was read. Modelled on TiKV's
``storage/txn/actions`` and TinyKV's ``kv/transaction``.
"""

from caffeine.percolator.steps.check_txn_status import check_txn_status, check_txn_status_spec
from caffeine.percolator.steps.commit import commit, commit_spec, predicted_locked_row
from caffeine.percolator.steps.common import Inconclusive
from caffeine.percolator.steps.get import Blocked, NeedData, NeedOlderWrite, Value, get_spec, read_cell
from caffeine.percolator.steps.prewrite import KeyLocked, Prewritten, WriteConflict, prewrite, prewrite_spec
from caffeine.percolator.steps.rollback import rollback, rollback_spec

__all__ = [
    "check_txn_status", "check_txn_status_spec", "commit", "commit_spec", "predicted_locked_row",
    "Inconclusive", "Blocked", "NeedData", "NeedOlderWrite", "Value", "get_spec", "read_cell",
    "KeyLocked", "Prewritten", "WriteConflict", "prewrite", "prewrite_spec", "rollback", "rollback_spec",
]
