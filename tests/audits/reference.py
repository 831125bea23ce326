"""The audits computed a second way: plain Python over the events, minute by minute.

Every event in the generated logs falls on a whole minute, so all quantities are constant
within a minute and stepping minute by minute gives exact totals. This shares no code with
``queries``: it reads the pydantic events, pairs runs with a small state machine, and
integrates by counting minutes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ledger import events as ev
from ledger.events import to_us

MIN = 60_000_000
HOUR_MIN = 60


def quantile(values: list[float], q: float) -> float | None:
    """Return the linearly interpolated quantile (as numpy's default), or None for no values."""
    if not values:
        return None
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass
class Run:
    wid: str
    start_seq: int
    start: int  # minutes
    gpus: int
    allocated: bool
    nodes: tuple[str, ...]
    end_seq: int | None = None
    end: int | None = None
    end_kind: str | None = None
    preempted_by: str | None = None
    end_event_id: str | None = None


def _m(t: Any) -> int:
    us = to_us(t)
    assert us % MIN == 0, "reference needs whole-minute times"
    return us // MIN


def _nothing_left(room: float) -> float:
    """Return what is left of a share after its children's owed minutes, a rounding residue as none.

    A share less the sum of its children's parts can come out at 1e-16 rather than 0 (the audit's SQL
    sums in another order and gets 0): owed so little, a team would read a ratio of 0 instead of none.
    """
    return room if room > 1e-9 else 0.0


def reference_audit(
    events: list[ev.Event], since_min: int | None = None, until_min: int | None = None, window_h: int = 168
) -> dict[str, Any]:
    """Return the audit figures computed minute by minute from ``events`` (log order)."""
    seq_of = {id(e): i for i, e in enumerate(events)}
    t_all = [_m(e.time) for e in events]
    t0 = since_min if since_min is not None else min(t_all)
    t1 = until_min if until_min is not None else max(t_all)
    t1 = max(t1, t0)
    pt1 = t1 if until_min is not None else t1 + 1  # point events count in [t0, pt1)
    anomalies: set[tuple[str, str]] = set()

    subs: dict[str, ev.WorkloadSubmitted] = {}
    for e in events:
        if isinstance(e, ev.WorkloadSubmitted):
            if e.workload_id in subs:
                anomalies.add(("duplicate_submission", e.event_id))
            else:
                subs[e.workload_id] = e

    # --- pairing -----------------------------------------------------------------------
    life: dict[str, list[ev.Event]] = defaultdict(list)
    for e in events:
        if isinstance(
            e,
            ev.WorkloadStarted
            | ev.WorkloadPreempted
            | ev.WorkloadCompleted
            | ev.CheckpointWritten
            | ev.WorkloadRequeued,
        ):
            if e.workload_id not in subs:
                anomalies.add(("unknown_workload", e.event_id))
            elif not isinstance(e, ev.CheckpointWritten | ev.WorkloadRequeued):
                life[e.workload_id].append(e)
    runs: list[Run] = []
    terminal: dict[str, tuple[int, int]] = {}  # wid -> (seq, minute)
    for wid, items in life.items():
        cand: list[Run] = []
        loose: list[ev.Event] = []
        open_run: Run | None = None
        for e in items:
            s = seq_of[id(e)]
            if isinstance(e, ev.WorkloadStarted):
                if open_run is not None:
                    anomalies.add(("overlapping_runs", e.event_id))
                else:
                    open_run = Run(wid, s, _m(e.time), e.gpus, e.allocated, e.nodes)
            elif open_run is not None:
                open_run.end_seq, open_run.end = s, _m(e.time)
                open_run.end_kind = "preempt" if isinstance(e, ev.WorkloadPreempted) else "complete"
                if isinstance(e, ev.WorkloadPreempted):
                    open_run.preempted_by = e.preempted_by
                open_run.end_event_id = e.event_id
                cand.append(open_run)
                open_run = None
            else:
                loose.append(e)
                if isinstance(e, ev.WorkloadPreempted):
                    anomalies.add(("preempted_while_not_running", e.event_id))
        if open_run is not None:
            cand.append(open_run)
        ends = [(r.end_seq, r.end) for r in cand if r.end_kind == "complete" and r.end is not None and r.end >= r.start]
        ends += [(seq_of[id(e)], _m(e.time)) for e in loose if isinstance(e, ev.WorkloadCompleted)]
        if ends:
            terminal[wid] = min(ends)  # type: ignore[assignment]
        kept: list[Run] = []
        for r in cand:
            if r.end is not None and r.end < r.start:
                anomalies.add(("completion_before_start", str(r.end_event_id)))
            elif wid in terminal and terminal[wid][0] < r.start_seq:
                anomalies.add(("completion_before_start", _start_id(events, r)))
            else:
                kept.append(r)
        latest_end: int | None = None
        for r in kept:
            if latest_end is None or r.start >= latest_end:
                runs.append(r)
            else:
                anomalies.add(("overlapping_runs", _start_id(events, r)))
            if r.end is not None:
                latest_end = r.end if latest_end is None else max(latest_end, r.end)
    runs.sort(key=lambda r: r.start_seq)
    by_wid: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        by_wid[r.wid].append(r)

    def hi(r: Run) -> int:
        return min(r.end if r.end is not None else t1, t1)

    def lo(r: Run) -> int:
        return max(r.start, t0)

    # --- budget tree --------------------------------------------------------------------
    parent: dict[str, str | None] = {}
    defined: dict[str, int] = {}
    versions: dict[str, list[tuple[int, int, float]]] = defaultdict(list)
    for e in events:
        if isinstance(e, ev.BudgetNodeDefined):
            if e.path not in parent:
                parent[e.path], defined[e.path] = e.parent, _m(e.time)
            versions[e.path].append((_m(e.time), seq_of[id(e)], e.share))
    for e in events:
        if isinstance(e, ev.AllocationChanged):
            if e.path in defined and _m(e.time) >= defined[e.path]:
                versions[e.path].append((_m(e.time), seq_of[id(e)], e.share))
            else:
                anomalies.add(("undefined_budget", e.event_id))
    for w in subs.values():
        if _fraction_chain(w.budget, parent) is None:
            anomalies.add(("undefined_budget", w.event_id))
    teams = sorted(
        {p for p in parent if not any(q == p for q in parent.values())}
        | {w.budget for w in subs.values() if w.budget in parent}
    )

    def share_at(path: str, m: int) -> float | None:
        if defined[path] > m:
            return None
        vs = sorted(v for v in versions[path] if v[0] <= m)
        return vs[-1][2]

    def fraction(team: str, m: int) -> float:
        chain = _fraction_chain(team, parent)
        if chain is None:
            return 0.0
        f = 1.0
        for node in chain:
            mine = share_at(node, m)
            if mine is None:
                return 0.0
            sibs = [share_at(p, m) for p, par in parent.items() if par == parent[node]]
            total = sum(s for s in sibs if s is not None)
            f *= mine / total if total > 0 else 0.0
        return f

    # --- capacity and health ------------------------------------------------------------
    caps = sorted((_m(e.time), seq_of[id(e)], e) for e in events if isinstance(e, ev.ClusterCapacityChanged))
    health: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for e in events:
        if isinstance(e, ev.HostHealthChanged):
            health[e.host].append((_m(e.time), seq_of[id(e)], e.state))

    def capacity_at(m: int) -> tuple[int, dict[str, int]]:
        now = [c for c in caps if c[0] <= m]
        if not now:
            return 0, {}
        c = now[-1][2]
        hosts = {}
        for i in range(-(-c.gpus // c.gpus_per_node)):
            hosts[f"{c.cluster}-n{i:03d}"] = min(c.gpus_per_node, c.gpus - i * c.gpus_per_node)
        down = {}
        for h, g in hosts.items():
            states = sorted(v for v in health.get(h, []) if v[0] <= m)
            if states and states[-1][2] in ("unhealthy", "failed"):
                down[h] = g
        return c.gpus, down

    # --- GPUs running at once against the capacity in force ---------------------------
    # Minute by minute over the whole log: a capacity version the running GPUs exceed is an anomaly, named
    # by the event that first took them over it (the capacity change itself when what already ran was more).
    over_seen: set[int] = set()
    for m in range(min(t_all), max(t_all) + 1):
        now = [c for c in caps if c[0] <= m]
        if not now:
            continue
        since = now[-1][0]
        if since in over_seen:
            continue
        cap = now[-1][2].gpus
        if sum(r.gpus for r in runs if r.start <= m and (r.end is None or r.end > m)) <= cap:
            continue
        over_seen.add(since)
        level = sum(r.gpus for r in runs if r.start < m and (r.end is None or r.end > m))
        level -= sum(r.gpus for r in runs if r.start == m and r.end == m)  # ended at m as they began
        changes = [c[2] for c in caps if c[0] == m]
        if changes and level > cap:
            anomalies.add(("over_capacity", changes[0].event_id))
            continue
        for r in sorted((r for r in runs if r.start == m), key=lambda r: r.start_seq):
            level += r.gpus
            if level > cap:
                anomalies.add(("over_capacity", _start_id(events, r)))
                break

    # --- minute by minute ---------------------------------------------------------------
    share_h: dict[tuple[str, int], float] = defaultdict(float)
    demand_h: dict[tuple[str, int], int] = defaultdict(int)
    deliv_h: dict[tuple[str, int], int] = defaultdict(int)
    hours: set[int] = set()
    cap_total = down_total = 0
    occ = {True: 0, False: 0}
    on_down = {True: 0, False: 0}
    alive = [(w, w.workload_id) for w in subs.values() if w.min_runtime_s > 0]
    for m in range(t0, t1):
        h = m // HOUR_MIN
        hours.add(h)
        gpus, down = capacity_at(m)
        avail = gpus - sum(down.values())
        cap_total += avail
        down_total += sum(down.values())
        for t in parent:  # every node: the levels of the tree need the inner nodes' shares too
            share_h[(t, h)] += fraction(t, m) * avail
        for w, wid in alive:
            end = terminal[wid][1] if wid in terminal else t1
            if _m(w.time) <= m < end:
                demand_h[(w.budget, h)] += w.gpus
        for r in runs:
            if lo(r) <= m < hi(r):
                occ[r.allocated] += r.gpus
                if r.allocated:
                    deliv_h[(subs[r.wid].budget, h)] += r.gpus
                n = len(r.nodes)
                for i, node in enumerate(r.nodes):
                    if node in down:
                        on_down[r.allocated] += r.gpus // n + (1 if i < r.gpus % n else 0)

    # --- owed hours ---------------------------------------------------------------------
    # A team with child nodes (it funds work directly) shares its share with the teams below it:
    # its own work is owed what they are not owed, so the teams are taken deepest first.
    def below(t: str) -> list[str]:
        return [u for u in teams if u != t and t in (_fraction_chain(u, parent) or [])]

    def depth(t: str) -> int:
        return len(_fraction_chain(t, parent) or [])

    owed_h: dict[tuple[str, int], float] = {}
    for t in sorted(teams, key=depth, reverse=True):
        inner = below(t)
        for h in hours:
            room = share_h[(t, h)] - sum(owed_h[(u, h)] for u in inner)
            owed_h[(t, h)] = min(_nothing_left(room), demand_h[(t, h)])
    team_rows = []
    for t in teams:
        owed = rec = dl = 0.0
        for h in hours:
            o = owed_h[(t, h)]
            owed += o
            dl += deliv_h[(t, h)]
            rec += min(deliv_h[(t, h)], o)
        team_rows.append(
            {
                "budget": t,
                "owed_gpu_hours": owed / 60,
                "delivered_gpu_hours": dl / 60,
                "received_gpu_hours": rec / 60,
                "ratio": rec / owed if owed > 0 else None,
            }
        )
    owed_sum = sum(t["owed_gpu_hours"] for t in team_rows)
    rec_sum = sum(t["received_gpu_hours"] for t in team_rows)
    rated = [t for t in team_rows if t["ratio"] is not None]
    # Over a day or a week (from Monday; the epoch's hour 0 fell on a Thursday) a team's owed and
    # delivered hours are summed before the min is taken.
    by_period = []
    for period, bucket in (("hour", lambda h: h), ("day", lambda h: h // 24), ("week", lambda h: (h + 72) // 168)):
        sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for (t, h), o in owed_h.items():
            sums[(t, bucket(h))][0] += o
            sums[(t, bucket(h))][1] += deliv_h[(t, h)]
        got = sum(min(o, d) for o, d in sums.values()) / 60
        ratio = got / owed_sum if owed_sum > 0 else None
        by_period.append({"period": period, "received_gpu_hours": got, "ratio": ratio})
    # Every level of the tree: the nodes at that depth (their subtrees) and the teams above it (their own
    # work); a node's share is its own fraction, demand and delivered its teams' sums; a team charged
    # beside its children is owed what of its share the level's nodes below it are not, deepest first.
    node_depth = {p: len(_fraction_chain(p, parent) or [p]) - 1 for p in parent}
    below_any = {t for t in teams if any(par == t for par in parent.values())}  # charged beside children
    levels = []
    for d in range(max(node_depth.values(), default=-1) + 1):
        group_of = {t: t if node_depth[t] < d else next(a for a in (_fraction_chain(t, parent) or [t])
                                                       if node_depth[a] == d) for t in teams}
        groups = sorted(set(group_of.values()), key=lambda g: -node_depth[g])
        lv_owed: dict[tuple[str, int], float] = {}
        lv_deliv: dict[tuple[str, int], float] = defaultdict(float)
        for g in groups:
            members = [t for t in teams if group_of[t] == g]
            for h in hours:
                lv_deliv[(g, h)] = sum(deliv_h[(t, h)] for t in members)
                demand = sum(demand_h[(t, h)] for t in members)
                room = share_h[(g, h)]
                if node_depth[g] < d and g in below_any:
                    room -= sum(lv_owed[(u, h)] for u in groups if u.startswith(g + "/"))
                lv_owed[(g, h)] = min(_nothing_left(room), demand)
        lv_sum = sum(lv_owed.values())
        weekly: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
        for (g, h), o in lv_owed.items():
            weekly[(g, (h + 72) // 168)][0] += o
            weekly[(g, (h + 72) // 168)][1] += lv_deliv[(g, h)]
        levels.append({
            "depth": d,
            "owed_gpu_hours": lv_sum / 60,
            "received_gpu_hours": sum(min(o, lv_deliv[k]) for k, o in lv_owed.items()) / 60,
            "ratio_week": sum(min(o, dl) for o, dl in weekly.values()) / lv_sum if lv_sum > 0 else None,
        })
    owed_hours = {
        "overall_ratio": rec_sum / owed_sum if owed_sum > 0 else None,
        "levels": levels,
        "received_by_period": by_period,
        "teams_at_95": sum(1 for t in rated if t["ratio"] >= 0.95),
        "worst_team": min(rated, key=lambda t: (round(t["ratio"], 9), t["budget"]))["budget"] if rated else None,
        "teams": team_rows,
    }

    # --- discarded work -----------------------------------------------------------------
    ckpts: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for e in events:
        if isinstance(e, ev.CheckpointWritten) and e.workload_id in subs:
            ckpts[e.workload_id].append((seq_of[id(e)], _m(e.time)))
    pre = []
    for wid, rs in by_wid.items():
        for i, r in enumerate(rs):
            if r.end_kind != "preempt":
                continue
            assert r.end is not None and r.end_seq is not None
            inside = [t for s, t in ckpts[wid] if r.start_seq < s < r.end_seq]
            # work that cannot resume starts again from zero: its checkpoints save nothing
            last = max(r.start, max(inside)) if inside and subs[wid].resumable else r.start
            nxt = rs[i + 1].start if i + 1 < len(rs) else None
            restart_min = (subs[wid].restart_s or 0) / 60 if nxt is not None else 0
            pre.append(
                {
                    "wid": wid,
                    "budget": subs[wid].budget,
                    "tier": "allocated" if r.allocated else "unallocated",
                    "gpus": r.gpus,
                    "at": r.end,
                    "lost": max(0, r.end - last),
                    "restart": restart_min,
                    "next": nxt,
                    "restart_s": subs[wid].restart_s or 0,
                    "by": r.preempted_by,
                }
            )
    counted = [p for p in pre if t0 <= p["at"] < pt1]

    def summary(ps: list[dict[str, Any]], rs: list[Run]) -> dict[str, Any]:
        delivered = sum(r.gpus * (hi(r) - lo(r)) for r in rs if hi(r) > lo(r))
        run_min = sum(hi(r) - lo(r) for r in rs if hi(r) > lo(r))
        disc = sum(p["gpus"] * (p["lost"] + p["restart"]) for p in ps)
        return {
            "preemptions": len(ps),
            "discarded_gpu_hours": disc / 60,
            "discarded_share": disc / delivered if delivered > 0 else None,
            "median_restart_s": quantile([float(p["restart_s"]) for p in ps if p["next"] is not None], 0.5),
            "preemptions_per_workload_week": len(ps) / (run_min / (7 * 24 * 60)) if run_min > 0 else None,
        }

    discarded = summary(counted, runs)
    discarded["by_tier"] = {
        tier: summary(
            [p for p in counted if p["tier"] == tier], [r for r in runs if r.allocated == (tier == "allocated")]
        )
        for tier in ("allocated", "unallocated")
    }
    budgets = sorted({p["budget"] for p in counted} | {subs[r.wid].budget for r in runs if hi(r) > lo(r)})
    discarded["by_team"] = [
        {"budget": b} | summary([p for p in counted if p["budget"] == b], [r for r in runs if subs[r.wid].budget == b])
        for b in budgets
    ]
    named = [p for p in counted if p["by"] in subs]
    starts = set()
    for p in named:
        later = [r.start for r in by_wid.get(p["by"], []) if r.start >= p["at"]]
        starts.add((p["by"], min(later) if later else None))
    started = sum(subs[b].gpus for b, _ in starts)
    discarded["eviction_ratio"] = sum(p["gpus"] for p in named) / started if started else None

    # --- waits --------------------------------------------------------------------------
    waits: dict[str, list[tuple[int, int, float]]] = {"first": [], "requeue": []}
    for wid, rs in by_wid.items():
        w = subs[wid]
        first = min(r.start for r in rs)
        if t0 <= first < pt1:
            waits["first"].append((w.gpus, w.min_runtime_s, (first - _m(w.time)) * 60.0))
    for p in pre:
        if p["next"] is not None and t0 <= p["next"] < pt1:
            w = subs[p["wid"]]
            waits["requeue"].append((w.gpus, w.min_runtime_s, (p["next"] - p["at"]) * 60.0))
    bounds = [("1", 1, 1), ("2-8", 2, 8), ("9-64", 9, 64), ("65-256", 65, 256), ("257+", 257, 10**18)]

    def stats(size: str, xs: list[float]) -> dict[str, Any]:
        return {
            "size": size,
            "jobs": len(xs),
            "mean_s": sum(xs) / len(xs) if xs else None,
            "p50_s": quantile(xs, 0.5),
            "p90_s": quantile(xs, 0.9),
            "p99_s": quantile(xs, 0.99),
        }

    wait_by_size: dict[str, Any] = {}
    for kind, ws in waits.items():
        block = {
            "buckets": [stats(s, [x for g, _, x in ws if a <= g <= b]) for s, a, b in bounds],
            "buckets_allocated": [stats(s, [x for g, mr, x in ws if a <= g <= b and mr > 0]) for s, a, b in bounds],
            "debug": stats("debug", [x for _, mr, x in ws if mr <= 900]),
            "debug_allocated": stats("debug_allocated", [x for _, mr, x in ws if 0 < mr <= 900]),
        }
        if kind == "first":
            wait_by_size.update(block)
        else:
            wait_by_size["requeue"] = block

    # --- occupancy and fairness ---------------------------------------------------------
    occupied = occ[True] + occ[False] - on_down[True] - on_down[False]
    occupancy = {
        "capacity_gpu_hours": cap_total / 60,
        "down_gpu_hours": down_total / 60,
        "occupied_gpu_hours": occupied / 60,
        "occupied_on_down_gpu_hours": (on_down[True] + on_down[False]) / 60,
        "occupied_share": occupied / cap_total if cap_total else None,
        "allocated_share": (occ[True] - on_down[True]) / cap_total if cap_total else None,
        "unallocated_share": (occ[False] - on_down[False]) / cap_total if cap_total else None,
    }
    fairness = []
    for t in teams:
        for h in sorted(hours):
            win = [k for k in hours if h - window_h < k <= h]
            u, a = sum(deliv_h[(t, k)] for k in win), sum(share_h[(t, k)] for k in win)
            fairness.append(
                {
                    "budget": t,
                    "usage_gpu_hours": deliv_h[(t, h)] / 60,
                    "allocation_gpu_hours": share_h[(t, h)] / 60,
                    "hour_ratio": deliv_h[(t, h)] / share_h[(t, h)] if share_h[(t, h)] > 0 else None,
                    "window_ratio": u / a if a > 0 else None,
                }
            )

    workloads = []
    for wid in subs:
        rs = by_wid.get(wid, [])
        workloads.append(
            {
                "workload_id": wid,
                "first_start_min": min((r.start for r in rs), default=None),
                "end_min": terminal[wid][1] if wid in terminal else None,
                "preemptions": sum(1 for p in pre if p["wid"] == wid),
            }
        )
    return {
        "owed_hours": owed_hours,
        "discarded_work": discarded,
        "wait_by_size": wait_by_size,
        "occupancy": occupancy,
        "fairness": fairness,
        "workloads": workloads,
        "anomalies": anomalies,
    }


def _fraction_chain(path: str, parent: dict[str, str | None]) -> list[str] | None:
    """Return the path from the root down to ``path``, or None when a link was never defined."""
    chain: list[str] = []
    node: str | None = path
    while node is not None:
        if node not in parent or len(chain) > 64:
            return None
        chain.append(node)
        node = parent[node]
    return chain[::-1]


def _start_id(events: list[ev.Event], r: Run) -> str:
    return events[r.start_seq].event_id
