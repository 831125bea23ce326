"""The pure decision core: budget tree, occupancy, fair share, scheduling contract, policies.

No IO, no clock, no randomness: time and ids come in with the events. One implementation
serves the replay driver and the streaming worker.

``COMPILED`` says whether the optional compiled build is in use (``make fast``: the same modules
compiled with mypyc, the same decisions byte for byte; ``make pure`` removes it). Compiled modules
older than their sources are refused at import: they would make the decisions of the code as it
was, not as it reads.
"""

import os

from ledger.buildcheck import refuse_stale_compiled
from ledger.core import scheduler as _scheduler
from ledger.core.contract import Workload
from ledger.core.fairshare import FairShareOrder
from ledger.core.knobs import Knobs, format_duration, parse_duration
from ledger.core.occupancy import Occupancy
from ledger.core.placement import Hosts
from ledger.core.scheduler import DecisionCore
from ledger.core.tree import BudgetTree

__all__ = [
    "COMPILED",
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


refuse_stale_compiled(os.path.dirname(os.path.abspath(__file__)))
COMPILED = not str(_scheduler.__file__).endswith(".py")
