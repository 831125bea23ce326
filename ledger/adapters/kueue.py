"""Kueue: ``Workload`` objects (``kueue.x-k8s.io/v1beta1``) to ledger events, through their status conditions.

Input, any mix of (pretty-printed or one per line):

* a list, ``kubectl get workloads -A -o json`` (``{"kind": "WorkloadList", "items": [...]}``);
* single Workload objects;
* watch events, ``kubectl get workloads -A -w -o json --output-watch-events``
  (``{"type": "ADDED" | "MODIFIED" | "DELETED", "object": {...}}``), in the order received.

Fields read:

* ``metadata.uid`` (event ids), ``metadata.namespace`` / ``metadata.name`` (workload id
  ``namespace/name``), ``metadata.creationTimestamp`` (submission), ``metadata.deletionTimestamp``;
* ``spec.queueName`` (the LocalQueue), ``spec.priority``, ``spec.active``, ``spec.podSets[].count`` and
  ``spec.podSets[].template.spec.containers[].resources.requests`` (or ``.limits``) of the GPU
  resource (default ``nvidia.com/gpu``);
* ``status.conditions[]`` ``type`` / ``status`` / ``reason`` / ``lastTransitionTime``;
* ``status.admission.clusterQueue`` and ``status.admission.podSetAssignments[].flavors`` (the
  run's "hosts": Kueue admits to a ClusterQueue and ResourceFlavors, not to nodes, so a run is
  recorded on ``clusterQueue/flavor``), ``...podSetAssignments[].resourceUsage`` of the GPU
  resource (GPUs actually admitted, when present);
* ``status.requeueState.requeueAt`` (when a backoff requeue is due).

Budget path ``cluster/namespace/queueName``; user = the namespace (Kueue records no user).

Each condition change (type, status, reason, lastTransitionTime) not seen before for a workload is
a transition; transitions are applied in time order:

=====================================  ===============================================================
``Admitted`` True                      ``WorkloadStarted`` (attempt 1, 2, ...); a requeue still owed
                                       from an earlier eviction is recorded first
``QuotaReserved`` True                 nothing: quota is held, but admission checks may still hold the
                                       workload back; it runs once ``Admitted``
``Evicted`` True, while running        ``WorkloadPreempted``: reason ``Preempted`` -> ``fair_share``;
                                       ``NodeFailures`` or ``PodsReadyTimeout`` -> ``host_failure``;
                                       any other (``InactiveWorkload``, ``Deactivated``,
                                       ``ClusterQueueStopped``, ``AdmissionCheck``...) -> ``user``
``Requeued`` True, after an eviction   ``WorkloadRequeued``; a Workload without a ``Requeued``
                                       condition (Kueue before 0.9) is requeued at once, or at
                                       ``status.requeueState.requeueAt``, unless it was deactivated
``Finished`` True                      ``WorkloadCompleted``: reason ``Failed`` -> failed, otherwise
                                       succeeded; cancelled if it never ran or was left evicted
watch ``DELETED`` before ``Finished``  ``WorkloadCompleted`` cancelled at ``deletionTimestamp``
=====================================  ===============================================================

A snapshot keeps only the latest transition of each condition: a list shows a workload's current
run, not the runs an earlier eviction ended (their start is gone). Such evictions are counted in
the summary, not invented; a watch stream shows every run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from ledger import events as ev
from ledger.adapters.common import Destination, ImportResult, RowError, budget_path, parse_local_time
from ledger.adapters.jsonstream import JsonSyntaxError, iter_json_values
from ledger.errors import EventValidationError
from ledger.gcpause import paused_gc

__all__ = ["KueueOptions", "import_kueue", "import_kueue_file"]

_ORDER = {"Evicted": 0, "Preempted": 1, "Requeued": 2, "QuotaReserved": 3, "Admitted": 4, "PodsReady": 5,
          "Finished": 6}  # fmt: skip
_EVICT_REASONS: dict[str, ev.PreemptReason] = {
    "Preempted": "fair_share",
    "NodeFailures": "host_failure",
    "PodsReadyTimeout": "host_failure",
}
_NO_REQUEUE = frozenset({"InactiveWorkload", "Deactivated"})


@dataclass(frozen=True, slots=True)
class KueueOptions:
    """How to read Workload objects."""

    cluster: str = "kueue"
    gpu_resource: str = "nvidia.com/gpu"
    min_runtime_s: int = 3600


@dataclass
class _Workload:
    uid: str
    wid: str
    base: str
    gpus: int
    attempt: int = 0
    running: bool = False
    owes_requeue: bool = False  # evicted while running, not yet requeued
    deactivated: bool = False
    finished: bool = False
    seen: dict[str, tuple[str, str, str]] = field(default_factory=dict)


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _need(obj: Any, *path: str) -> str:
    value = _get(obj, *path)
    if not isinstance(value, str) or not value:
        raise RowError(f"{'.'.join(path)} {value!r} is missing or not text")
    return value


def _time(text: Any, what: str) -> datetime:
    if not isinstance(text, str):
        raise RowError(f"{what} {text!r} is not a time")
    return parse_local_time(text, UTC, what)


def _quantity(value: Any, what: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise RowError(f"{what} {value!r} is not a whole, non-negative number")


def _gpus(obj: dict[str, Any], resource: str) -> int:
    """GPUs the workload asks for: per pod set, count x the pod's containers' requests (limits if none)."""
    pod_sets = _get(obj, "spec", "podSets")
    if not isinstance(pod_sets, list) or not pod_sets:
        raise RowError("spec.podSets is missing or empty")
    used = _get(obj, "status", "admission", "podSetAssignments")
    if isinstance(used, list) and used:
        admitted = [_get(a, "resourceUsage", resource) for a in used]
        if all(x is not None for x in admitted):
            return sum(_quantity(x, f"podSetAssignments.resourceUsage[{resource}]") for x in admitted)
    total = 0
    for i, ps in enumerate(pod_sets):
        count = _quantity(_get(ps, "count"), f"spec.podSets[{i}].count")
        per_pod = 0
        for c in _get(ps, "template", "spec", "containers") or ():
            res = _get(c, "resources") or {}
            q = _get(res, "requests", resource)
            if q is None:
                q = _get(res, "limits", resource)
            if q is not None:
                per_pod += _quantity(q, f"spec.podSets[{i}] container {resource}")
        total += count * per_pod
    return total


def _hosts(obj: dict[str, Any], resource: str) -> tuple[str, ...]:
    cq = _get(obj, "status", "admission", "clusterQueue") or "unknown"
    flavors: set[str] = set()
    for a in _get(obj, "status", "admission", "podSetAssignments") or ():
        flavor = _get(a, "flavors", resource)
        if flavor:
            flavors.add(str(flavor))
    return tuple(f"{cq}/{f}" for f in sorted(flavors)) or (str(cq),)


# (time, order among same-time changes, type, status, reason, the key that marks it seen)
_Transition = tuple[datetime, int, str, str, str, tuple[str, str, str]]


class _Importer:
    def __init__(self, opts: KueueOptions, res: ImportResult) -> None:
        self.opts = opts
        self.res = res
        self.tracked: dict[str, _Workload | None] = {}  # None: no GPUs, skipped

    def _emit(self, cls: type[ev.Event], w: _Workload, what: str, t: datetime | None = None, **fields: Any) -> None:
        data = {"event_id": w.base + what, "cluster": self.opts.cluster, "time": t, "schema_version": 1,
                "workload_id": w.wid, **fields}  # fmt: skip
        try:
            self.res.add_event(ev.trusted(cls, data))
        except EventValidationError as exc:
            raise RowError(str(exc)) from None

    def _first_sight(self, obj: dict[str, Any], uid: str) -> tuple[_Workload | None, dict[str, Any]]:
        ns = _need(obj, "metadata", "namespace")
        name = _need(obj, "metadata", "name")
        created = _time(_get(obj, "metadata", "creationTimestamp"), "metadata.creationTimestamp")
        gpus = _gpus(obj, self.opts.gpu_resource)
        if gpus == 0:
            return None, {}
        priority = _get(obj, "spec", "priority") or 0
        if not isinstance(priority, int) or isinstance(priority, bool):
            raise RowError(f"spec.priority {priority!r} is not an integer")
        queue = _get(obj, "spec", "queueName") or _get(obj, "metadata", "labels", "kueue.x-k8s.io/queue-name")
        w = _Workload(uid=uid, wid=f"{ns}/{name}", base=f"{self.opts.cluster}/kueue/{uid}/", gpus=gpus)
        budget = budget_path(self.opts.cluster, ns, str(queue or "default"))
        fields = {"time": created, "schema_version": 2, "budget": budget, "user": ns, "gpus": gpus, "nodes": 0,
                  "min_runtime_s": self.opts.min_runtime_s, "resumable": True, "priority": priority,
                  "kind": "batch", "work_s": None, "checkpoint_interval_s": None, "restart_s": None}  # fmt: skip
        return w, fields

    def _transitions(self, obj: dict[str, Any], w: _Workload) -> list[_Transition]:
        conds = _get(obj, "status", "conditions") or []
        if not isinstance(conds, list):
            raise RowError("status.conditions is not a list")
        out = []
        for i, c in enumerate(conds):
            ctype, status = _get(c, "type"), _get(c, "status")
            if not isinstance(ctype, str) or status not in ("True", "False", "Unknown"):
                raise RowError(f"status.conditions[{i}]: type {ctype!r} / status {status!r} is not a condition")
            reason = str(_get(c, "reason") or "")
            stamp = _get(c, "lastTransitionTime")
            key = (status, reason, str(stamp))
            if w.seen.get(ctype) == key:
                continue
            t = _time(stamp, f"status.conditions[{i}] ({ctype}).lastTransitionTime")
            out.append((t, _ORDER.get(ctype, 9), ctype, status, reason, key))
        return sorted(out)

    def snapshot(self, obj: Any, deleted: bool = False) -> None:
        """Apply one observed state of a Workload; raise RowError (having changed nothing) if it is malformed."""
        if not isinstance(obj, dict):
            raise RowError(f"expected a Workload object, found {type(obj).__name__}")
        uid = _need(obj, "metadata", "uid")
        submit: dict[str, Any] | None = None
        if uid in self.tracked:
            w = self.tracked[uid]
        else:
            w, submit = self._first_sight(obj, uid)
        if w is None:
            if uid not in self.tracked:
                self.res.skipped["no GPUs requested"] += 1
                self.tracked[uid] = None
            return
        # read everything that can be malformed before changing any state
        transitions = [] if w.finished else self._transitions(obj, w)
        due = _get(obj, "status", "requeueState", "requeueAt")
        requeue_at = _time(due, "status.requeueState.requeueAt") if due else None
        gone = _get(obj, "metadata", "deletionTimestamp")
        deleted_at = _time(gone, "metadata.deletionTimestamp") if deleted and gone else None
        hosts = _hosts(obj, self.opts.gpu_resource)
        if submit is not None:
            self.tracked[uid] = w
            self.res.workloads += 1
            self._emit(ev.WorkloadSubmitted, w, "submit", **submit)
        if w.finished:
            return
        has_requeued_cond = any(_get(c, "type") == "Requeued" for c in _get(obj, "status", "conditions") or ())
        for t, _, ctype, status, reason, key in transitions:
            w.seen[ctype] = key
            if status != "True":
                continue
            if ctype == "Admitted" and not w.running:
                if w.owes_requeue:
                    self._emit(ev.WorkloadRequeued, w, f"requeue{w.attempt}", t)
                    w.owes_requeue = False
                w.attempt += 1
                w.running = True
                self._emit(ev.WorkloadStarted, w, f"start{w.attempt}", t, nodes=hosts, gpus=w.gpus,
                           allocated=self.opts.min_runtime_s > 0,
                           protected_until=t + timedelta(seconds=self.opts.min_runtime_s),
                           attempt=w.attempt)  # fmt: skip
            elif ctype == "Evicted":
                if not w.running:
                    self.res.skipped["eviction of a run the file does not show"] += 1
                    continue
                w.running = False
                self._emit(ev.WorkloadPreempted, w, f"preempt{w.attempt}", t,
                           reason=_EVICT_REASONS.get(reason, "user"), preempted_by=None)  # fmt: skip
                w.deactivated = reason in _NO_REQUEUE or _get(obj, "spec", "active") is False
                w.owes_requeue = True
                if not has_requeued_cond and not w.deactivated:
                    at = max(t, requeue_at) if requeue_at else t
                    self._emit(ev.WorkloadRequeued, w, f"requeue{w.attempt}", at)
                    w.owes_requeue = False
            elif ctype == "Requeued" and w.owes_requeue:
                self._emit(ev.WorkloadRequeued, w, f"requeue{w.attempt}", t)
                w.owes_requeue = False
            elif ctype == "Finished":
                never_ran_or_left_evicted = (w.attempt == 0 or w.owes_requeue) and not w.running
                outcome: ev.Outcome = (
                    "cancelled" if never_ran_or_left_evicted else ("failed" if reason == "Failed" else "succeeded")
                )
                self._emit(ev.WorkloadCompleted, w, "end", t, outcome=outcome)
                w.finished, w.running = True, False
                return
        if deleted:
            if deleted_at is None:
                self.res.skipped["deleted without a deletionTimestamp"] += 1
                return
            self._emit(ev.WorkloadCompleted, w, "end", deleted_at, outcome="cancelled")
            w.finished, w.running = True, False


def import_kueue(
    text: str, file: str, opts: KueueOptions | None = None, to: Destination | None = None
) -> ImportResult:
    """Read Workload lists, objects or watch events and return the events they stand for, with the summary."""
    with paused_gc():
        return _import_kueue(text, file, opts, to)


def _import_kueue(text: str, file: str, opts: KueueOptions | None, to: Destination | None) -> ImportResult:
    opts = opts or KueueOptions()
    res = ImportResult("kueue", file, to=to or Destination())
    imp = _Importer(opts, res)
    for line, value in iter_json_values(text):
        if isinstance(value, JsonSyntaxError):
            res.rows_read += 1
            res.reject(line, str(value))
            continue
        if isinstance(value, dict) and isinstance(value.get("items"), list):
            items = [(f"items[{i}]: ", obj, False) for i, obj in enumerate(value["items"])]
        elif isinstance(value, dict) and "object" in value and "type" in value:
            if value["type"] not in ("ADDED", "MODIFIED", "DELETED"):
                res.rows_read += 1
                res.skipped[f"watch event {value['type']}"] += 1
                continue
            items = [("", value["object"], value["type"] == "DELETED")]
        else:
            items = [("", value, False)]
        for prefix, obj, deleted in items:
            res.rows_read += 1
            try:
                imp.snapshot(obj, deleted)
            except RowError as exc:
                res.reject(line, prefix + str(exc))
    res.finish()
    return res


def import_kueue_file(
    path: str | Path, opts: KueueOptions | None = None, to: Destination | None = None
) -> ImportResult:
    """Read a file of Kueue Workloads (list, objects or watch events)."""
    with open(path, encoding="utf-8-sig") as fh:  # -sig: a byte-order mark, if any, is not text
        return import_kueue(fh.read(), str(path), opts, to)
