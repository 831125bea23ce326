"""The pure decision core: budget tree, occupancy, fair share, scheduling contract, policies.

No IO, no clock, no randomness: time and ids come in with the events. One implementation
serves the replay driver and the streaming worker.
"""

from ledger.core.contract import Workload
from ledger.core.fairshare import FairShareOrder
from ledger.core.knobs import Knobs, format_duration, parse_duration
from ledger.core.occupancy import Occupancy
from ledger.core.placement import Hosts
from ledger.core.scheduler import DecisionCore
from ledger.core.tree import BudgetTree

__all__ = [
    "BudgetTree",
    "DecisionCore",
    "FairShareOrder",
    "Hosts",
    "Knobs",
    "Occupancy",
    "Workload",
    "format_duration",
    "parse_duration",
]
