"""Replay for what-if analysis: a simulated clock drives the decision core over a trace or a log.

``load_inputs`` reads a workload trace (CSV / JSON Lines), an ITP raw trace or an event log;
``replay`` writes every event of the run into ``DIR/events``; ``ReplayDriver`` is the clock itself;
``demo_month.generate`` builds the seeded month ``gpuledger demo`` replays.
"""

from ledger.replay.budgets import Budgets, load_budgets
from ledger.replay.driver import ReplayDriver, ReplayStats
from ledger.replay.run import ReplayInputs, inputs_from_budgets, load_inputs, load_trace, replay
from ledger.replay.trace import RejectedRow, Trace, read_trace, write_trace

__all__ = [
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
