"""The index's serving tables as the observers write them: ``postings``, ``impacts``, ``docstats``.

Layer: observers. One home for how the export and cluster observers open them: with the
families the data contract names, the counted ones (``schema.counted_families``), and split
into regions by the contract's policy (``schema.split_points``) when the call creates the
table. Whichever observer run opens a table first creates it, so every opener asks alike.
"""

from __future__ import annotations

from caffeine.index.schema import (
    DOCSTATS, DOCSTATS_FAMILY, IMPACTS, IMPACTS_FAMILY, POSTINGS, POSTINGS_FAMILY, counted_families, split_points,
)
from caffeine.percolator.serving import ServingTable

FAMILY = {POSTINGS: POSTINGS_FAMILY, IMPACTS: IMPACTS_FAMILY, DOCSTATS: DOCSTATS_FAMILY}


def serving_table(cluster, name: str) -> ServingTable:
    """Serving table ``name`` (one of ``FAMILY``'s) of ``cluster``, created if need be."""
    return cluster.serving(name, [FAMILY[name]], counted=counted_families(name), split_policy=split_points)
