"""The simulation's workloads, by name: each sets up its tables and actors on a ``Sim`` and
has a ``check()`` run after healing. Every one of them reports what it finds through
``Sim.violation``.

Layer: simulation.
"""

from caffeine.sim.workloads.backfill import Backfill
from caffeine.sim.workloads.bank import Bank
from caffeine.sim.workloads.chain import Chain
from caffeine.sim.workloads.ingest import Ingest
from caffeine.sim.workloads.install import Install
from caffeine.sim.workloads.registers import Registers
from caffeine.sim.workloads.tables import Tables

WORKLOADS = {
    "backfill": Backfill,
    "bank": Bank,
    "chain": Chain,
    "ingest": Ingest,
    "install": Install,
    "registers": Registers,
    "tables": Tables,
}
