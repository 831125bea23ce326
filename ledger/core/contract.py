"""The scheduling contract of one workload: protected minimum runtime, resumability, its state.

Rules (see README "Decision core"):

* minimum runtime is capped at ``knobs.max_min_runtime_s``; the protected window is
  ``[start, start + capped minimum runtime)`` and is charged to the workload's budget;
* minimum runtime 0, or a budget path that was never defined, makes the work *unallocated*:
  charged to nobody, never protected, preemptible by any allocated request, and never able
  to preempt anyone itself;
* a resumable victim is requeued at once and keeps its place (its submit time) in its queue;
* a non-resumable victim (only ever chosen after every resumable one) is not requeued: it ends
  with ``WorkloadPreempted`` then ``WorkloadCompleted(outcome="cancelled")`` and must be
  submitted again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from ledger.core.knobs import Knobs
from ledger.core.pickling import rebuilt_from_fields

__all__ = ["DONE", "EXITING", "RUNNING", "STARTING", "WAITING", "QueueKey", "Workload", "hold_span_s", "start_bound"]

WAITING, STARTING, RUNNING, EXITING, DONE = "waiting", "starting", "running", "exiting", "done"

# (-priority or 0, submit time µs, workload id): sorts best first
QueueKey = tuple[int, int, str]


@dataclass(slots=True)
class Workload:
    """A submitted workload and where it stands."""

    wid: str
    budget: str  # the path as submitted
    node: str | None  # the defined budget node it is charged to (None: path never defined)
    user: str
    gpus: int
    min_runtime_s: int  # already capped
    resumable: bool
    priority: int
    kind: str
    submit_us: int
    size: int = 0  # GPUs it holds when running: ``gpus``, or whole hosts when wide
    submitted_by: str = ""  # event id of the submission (a resubmission under the same id has another)
    key: QueueKey = (0, 0, "")
    state: str = WAITING
    allocated: bool = False  # of the current (or last) run: it declared minimum runtime > 0 under a defined budget
    shielded: bool = False  # priority policy: the current run is non-preemptible (within its team's limit)
    hosts: list[int] = field(default_factory=list)
    held: int = 0  # GPUs held by the current run (whole hosts when wide)
    start_us: int = 0
    protected_until: int = 0
    last_ckpt_us: int = 0  # last checkpoint of the current run (start if none)
    attempt: int = 0
    exposed: bool = False  # allocated run past its protected window (counted in Occupancy.exposed)
    prepaid: bool = False  # upfront entry charge still outstanding
    exit_us: int = 0  # when an exiting run leaves (grace)
    exit_reason: str = ""
    exit_by: str | None = None
    draining: bool = False  # a drain wake-up is pending
    restart_s: int = 0  # declared cost of a restart (0 if not declared): a restarted run's protection covers it
    preemptions: int = 0  # times preempted to make room for a waiter (host failures and drains not counted)
    epoch: int = 0  # bumped at every state change; a wake-up is stale when its epoch differs

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return rebuilt_from_fields(self)

    @property
    def wants_allocation(self) -> bool:
        """Return whether this workload asks for protected, charged time (and may preempt)."""
        return self.min_runtime_s > 0 and self.node is not None

    def lost_if_preempted(self, now_us: int) -> int:
        """Return GPU-µs a preemption now discards: since the last checkpoint (since start if not resumable)."""
        since = self.last_ckpt_us if self.resumable else self.start_us
        return self.held * max(0, now_us - since)


def hold_span_s(knobs: Knobs, restart_s: int = 0) -> int:
    """Return the longest a hold can last (s): from its grant until its holder may start on the held hosts.

    A hold's time is the end of the last protected window on the hosts it holds when granted
    (at most the cap plus a restart's cover, ``restart_s``: the longest ``restart_s`` declared by the
    work that runs there), and nothing started on held hosts afterwards is protected past it; the
    victims then leave within the grace period.
    """
    return knobs.max_min_runtime_s + restart_s + knobs.grace_s


def start_bound(knobs: Knobs, restart_s: int = 0) -> timedelta:
    """Return how long the head of the fair-share order can wait, under sustained demand, before it starts.

    ``ledger.core.contract.start_bound(knobs: Knobs, restart_s: int = 0) -> timedelta``: the *No
    starvation* bound (docs/rules.md, "Holds"), for fair share. The head is the allocated waiter
    first in the fair-share order (its budget stands first at every level, and it is first in its
    budget's queue); the bound is stated for a head that needs more than one host (a wide run: it
    is the one the core holds hosts for). From the moment it is the head, and for as long as it
    stays the head, it starts within this bound: a pass sees it within ``standing_check_s``; a hold already granted to
    another waiter is taken within ``hold_span_s``; the head is then granted the next hold, which
    is taken within ``hold_span_s`` more. ``restart_s`` is the longest ``restart_s`` declared by
    the work on the cluster (0 when none declares one). Host failures and drains are outside the
    bound, and so are hosts held by a settled run (preempted ``max_preemptions`` times and not
    checkpointed since), which keeps its GPUs until it checkpoints or ends.
    """
    return timedelta(seconds=knobs.standing_check_s + 2 * hold_span_s(knobs, restart_s))
