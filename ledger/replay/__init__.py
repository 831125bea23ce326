"""Replay for what-if analysis: a simulated clock drives the decision core over a trace or a log.

``load_inputs`` reads a workload trace (CSV / JSON Lines), an ITP raw trace or an event log;
``replay`` writes every event of the run into ``DIR/events``; ``ReplayDriver`` is the clock itself;
``demo_month.generate`` builds the seeded month ``gpuledger demo`` replays.

``COMPILED`` says whether the driver and its log writer run compiled (built with the core; the
same events, byte for byte). As for the core, where a source no longer matches what was compiled
(or ``GPULEDGER_PURE=1`` is set) the package runs its Python sources.
"""

from ledger.budgets import Budgets, load_budgets
from ledger.replay import driver as _driver
from ledger.replay.driver import ReplayDriver, ReplayStats
from ledger.replay.run import ReplayInputs, inputs_from_budgets, load_inputs, load_trace, replay
from ledger.replay.trace import RejectedRow, Trace, read_trace, write_trace

COMPILED = not str(_driver.__file__).endswith(".py")

__all__ = [
    "COMPILED",
    "Budgets",
    "RejectedRow",
    "ReplayDriver",
    "ReplayInputs",
    "ReplayStats",
    "Trace",
    "inputs_from_budgets",
    "load_budgets",
    "load_inputs",
    "load_trace",
    "read_trace",
    "replay",
    "write_trace",
]
