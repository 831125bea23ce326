"""Small clusters and replays for the replay tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ledger.budgets import BudgetNode, Budgets
from ledger.core import DecisionCore
from ledger.core.knobs import Knobs
from ledger.events import Event, WorkloadSubmitted, to_us
from ledger.replay.driver import ReplayDriver
from tests.factories import at

H = 3600


def lab(gpus: int = 16, teams: tuple[tuple[str, float], ...] = (("a", 0.5), ("b", 0.5))) -> Budgets:
    """Return a one-level lab: root ``lab`` and one leaf per team."""
    nodes = [BudgetNode("lab", 1.0, ("director",)), *(BudgetNode(f"lab/{t}", s, ()) for t, s in teams)]
    return Budgets("lab", gpus, 8, tuple(nodes))


def submit(
    minutes: float,
    wid: str,
    team: str,
    gpus: int,
    work_s: int,
    *,
    min_runtime_s: int = H,
    resumable: bool = True,
    interval_s: int = 0,
    restart_s: int = 0,
    priority: int = 0,
    kind: str = "batch",
) -> WorkloadSubmitted:
    """Return a submission to team ``lab/<team>`` at DAY0 + minutes."""
    return WorkloadSubmitted(
        event_id=f"lab/t/{wid}",
        cluster="lab",
        time=at(minutes),
        workload_id=wid,
        budget=f"lab/{team}",
        user="u",
        gpus=gpus,
        min_runtime_s=min_runtime_s,
        resumable=resumable,
        priority=priority,
        kind=kind,  # type: ignore[arg-type]
        work_s=work_s,
        checkpoint_interval_s=interval_s,
        restart_s=restart_s,
    )


@dataclass
class Recording:
    """A decision core that also notes the moments the driver stepped to (to show nothing happens between)."""

    core: DecisionCore
    steps: list[int] = field(default_factory=list)

    def handle(self, event: Event, decide: bool = True, t_us: int | None = None) -> list[Event]:
        t = to_us(event.time)
        assert t_us in (None, t), f"the driver handed {t_us} µs for an event at {t}"
        self.steps.append(t)
        return self.core.handle(event, decide, t_us)

    def advance(self, until_us: int) -> list[Event]:
        self.steps.append(until_us)
        return self.core.advance(until_us)

    def next_wakeup(self) -> int | None:
        return self.core.next_wakeup()


def drive(budgets: Budgets, subs: list[WorkloadSubmitted], knobs: Knobs | None = None) -> tuple[list[Event], Recording]:
    """Replay in memory; return every event in emission order and the recorded steps."""
    out: list[Event] = []
    core = Recording(DecisionCore(knobs or Knobs(), budgets.cluster))
    driver = ReplayDriver(core, budgets.cluster, out.extend)
    driver.feed(budgets.events(min(s.time for s in subs)))
    driver.feed(sorted(subs, key=lambda s: s.time))
    driver.run()
    return out, core


def of(events: list[Event], wid: str, *types: str) -> list[Any]:
    """Return the events about one workload, optionally only some types."""
    return [e for e in events if getattr(e, "workload_id", None) == wid and (not types or e.type_name in types)]


def segment_bytes(log_dir: Path) -> dict[str, bytes]:
    """Return the bytes of every segment file of an embedded log (its data; not the lock or id index)."""
    return {p.name: p.read_bytes() for p in sorted(log_dir.glob("*.avro"))}
