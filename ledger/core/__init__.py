"""The pure decision core: budget tree, occupancy, fair share, scheduling contract, policies.

No IO, no clock, no randomness: time and ids come in with the events. One implementation
serves the replay driver and the streaming worker.

``COMPILED`` says whether the compiled build is in use (built by default where a C compiler is
present: the same modules compiled with mypyc, the same decisions byte for byte; ``make pure``
removes it). Where a source no longer matches what was compiled, or ``GPULEDGER_PURE=1`` is set,
the package runs its Python sources instead (``ledger.buildcheck``).
"""

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

COMPILED = not str(_scheduler.__file__).endswith(".py")
