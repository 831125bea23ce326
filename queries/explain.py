"""Tell one workload's story from the log: when it waited, who started meanwhile, who held the GPUs, what it lost.

Two kinds of log are told differently, so that no story puts words in a scheduler's mouth:

* A log the ledger decided (a replay, or the stream worker's) holds the decision core's own
  ``SchedulingDecision`` events. Its reasons, and the fair-share standings it acted on (each
  decision carries the budget's usage ÷ allocation at that instant, under the run's own window
  and charge rule), are quoted from those events; nothing is recomputed. A run replayed under
  the ``priority`` or ``fifo`` baseline is told in that policy's terms: one queue for the whole
  cluster, by priority then submission, or by submission alone.
* A log of imported records (Slurm, Kueue, a CSV trace) holds what happened and nothing of why.
  Its story says what the records show (submitted, started, preempted, requeued, by whom when the
  records name it, how busy the cluster was), and the fair-share standing it adds is labelled as
  the ledger's reading under the budgets in the log (usage as accrued over the lookback window,
  Fair Tree order: siblings at each level by usage ÷ allocation, lowest first).

Units are the same throughout: times ISO 8601 UTC, durations as people read them (one formatter,
``timefmt.duration``), work in GPU-hours, standings as percentages of the allocation.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import duckdb

from ledger.errors import InputError
from ledger.queries.audit import WEEK_S, Source, connect, prepare, rows
from ledger.queries.headroom import headroom_text, held_by_headroom
from ledger.queries.projection import sql_text
from ledger.queries.timefmt import duration, iso


@dataclass(frozen=True)
class DebugPartition:
    """A run's debug partition: its hosts (fixed, or as the replay recorded them over time) and what a debug run is."""

    fixed: int | None  # the hosts the run's ``--debug-hosts`` fixed (never every live host), or None: recorded
    sizes: tuple[tuple[int, int], ...]  # (from, µs; hosts): its size whenever it changed, when sized from demand
    runtime_s: int  # the longest protected runtime of a debug run
    per_node: int  # GPUs per host, to count the live hosts from the capacity

    def hosts_at(self, t_us: int, live: int) -> int:
        """Return how many hosts the partition held at ``t_us`` on a cluster of ``live`` hosts."""
        if self.fixed is not None:
            return min(self.fixed, max(live - 1, 0))
        return next((hosts for at, hosts in reversed(self.sizes) if at <= t_us), 0)

MAX_MOMENTS = 5  # moments shown per waiting period, spread over all of it; the rest are summarised
POLICIES = ("fairshare", "priority", "fifo")
_NEVER = 9_223_372_036_854_775_807
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}


def _dur(us: int) -> str:
    return duration(int(us) // 1_000_000)


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _gh(gpu_us: float) -> str:
    return f"{gpu_us / 3.6e9:,.2f} GPU-hours"


def pct(ratio: float | None) -> str:
    """Return a standing (usage ÷ allocation) as a percentage of the allocation: 43 %, 1.1 %, 0.0052 %."""
    if ratio is None:
        return "-"
    v = ratio * 100
    if v == 0:
        return "0 %"
    if v < 1:
        return f"{v:.2g} %"  # a small but real usage must not read as 0
    return f"{v:.1f} %" if v < 10 else f"{v:,.0f} %"


def plain_units(reason: str, own_ratio: float | None = None) -> str:
    """Return a decision's reason with its units spelled as the rest of the story (GPU-hours, hours, percentages).

    The core writes its reasons compactly (``10560 GPU-seconds``, ``protected for 245m``, ``3600 s
    protected``, ``(in 85m)``, ``1%``); ``own_ratio`` is the exact standing the decision logged for its own budget.
    """
    text = re.sub(r"\b(\d+) GPU-seconds\b", lambda m: f"{int(m.group(1)) / 3600:,.2f} GPU-hours", reason)
    text = re.sub(r"\b(\d+) s protected\b", lambda m: f"{duration(int(m.group(1)))} protected", text)
    text = re.sub(r"\b(\d+)([smhdw])( window| half-life)\b",
                  lambda m: f"{duration(int(m.group(1)) * _UNIT_S[m.group(2)])}{m.group(3)}", text)
    text = re.sub(r"\bprotected (for|<=) (\d+)([smhdw])\b",
                  lambda m: f"protected {m.group(1)} {duration(int(m.group(2)) * _UNIT_S[m.group(3)])}", text)
    # a hold's span, "(in 85m)", and the holder's wait on its hosts, "since ... UTC (85m)"
    text = re.sub(r"\((in )?(\d+)([smhdw])\)",
                  lambda m: f"({m.group(1) or ''}{duration(int(m.group(2)) * _UNIT_S[m.group(3)])})", text)
    if own_ratio is not None:  # the rounded percent of the reason, exact from the decision's own field
        text = re.sub(r"has used \d+% of its allocation", f"has used {pct(own_ratio)} of its allocation", text, count=1)
    return re.sub(r"\b(\d+)%", r"\1 %", text)


def fair_tree_order(con: duckdb.DuckDBPyConnection, t_us: int) -> list[dict[str, Any]]:
    """Return the ledger's reading of the teams' fair-share order at ``t_us``: Fair Tree by usage ÷ allocation.

    Usage as accrued from the runs in the log over the lookback window: the reading for imported
    records, which hold no standings of their own (a log the ledger decided quotes its decisions).
    """
    standing = {r["budget"]: r for r in rows(con, sql_text("standing"), {"t": int(t_us)})}
    parents = {r["path"]: r["parent"] for r in rows(con, "SELECT path, parent FROM nodes")}
    children: dict[str | None, list[str]] = defaultdict(list)
    for path, parent in parents.items():
        children[parent].append(path)
    used: dict[str, float] = defaultdict(float)
    alloc: dict[str, float] = defaultdict(float)
    for team, r in standing.items():
        node: str | None = team
        seen = 0
        while node is not None and seen < 64:  # sum leaves into every ancestor
            used[node] += r["used_gpu_us"]
            alloc[node] += r["allocated_gpu_us"]
            node = parents.get(node)
            seen += 1

    def ratio(node: str) -> float:
        return used[node] / alloc[node] if alloc[node] > 0 else float("inf")

    order: list[dict[str, Any]] = []

    def walk(parent: str | None, depth: int) -> None:
        for node in sorted(children.get(parent, []), key=lambda n: (ratio(n), n)):
            if node in standing:
                r = standing[node]
                order.append({"budget": node, "ratio": r["ratio"], "used_gpu_us": r["used_gpu_us"],
                              "allocated_gpu_us": r["allocated_gpu_us"]})
            if depth < 64:
                walk(node, depth + 1)

    walk(None, 0)
    return order


class _Log:
    """The projected log and the facts of the workload being explained, with the queries its story asks."""

    def __init__(self, con: duckdb.DuckDBPyConnection, me: dict[str, Any], policy: str, headroom: float,
                 debug_partition: DebugPartition | None = None) -> None:
        self.con, self.me, self.policy, self.headroom = con, me, policy, headroom
        self.debug_partition = debug_partition
        self.recorded = bool(rows(con, "SELECT 1 FROM ev_decision LIMIT 1"))
        self.decided = {(d["workload_id"], d["action"], d["time"]): d for d in rows(con, """
            SELECT workload_id, action, "time", reason, budget_ratio, queue_position, for_workload
            FROM ev_decision WHERE action IN ('start', 'preempt') ORDER BY seq""")} if self.recorded else {}

    def q(self, sql: str, **params: Any) -> list[dict[str, Any]]:
        return rows(self.con, sql, params)

    def running_at(self, t_us: int) -> list[dict[str, Any]]:
        return self.q("""
            SELECT r.workload_id, r.budget, r.gpus, r.allocated, r.protected_until, r.start_us
            FROM runs r WHERE r.start_us <= $t AND coalesce(r.end_us, $never) > $t AND r.workload_id <> $wid
            ORDER BY r.gpus DESC, r.start_us""", t=int(t_us), never=_NEVER, wid=self.me["workload_id"])

    def in_use(self, t_us: int) -> str:
        """Return how busy the cluster was just after ``t_us``'s starts and ends, in words ('' with no capacity)."""
        found = self.q("""
            SELECT (SELECT coalesce(sum(gpus), 0) FROM runs WHERE start_us <= $t AND coalesce(end_us, $never) > $t)
                   AS used,
                   (SELECT gpus FROM capacity_versions WHERE from_us <= $t ORDER BY from_us DESC LIMIT 1) AS capacity
            """, t=int(t_us), never=_NEVER)[0]
        if not found["capacity"]:
            return ""
        used, capacity = int(found["used"]), int(found["capacity"])
        return f"{used} of {capacity} GPUs in use ({pct(used / capacity)})"

    def standing_at(self, budget: str, t_us: int) -> dict[str, Any] | None:
        """Return the standing the scheduler logged for ``budget`` at the instant ``t_us``, if it decided about it then.

        Only the same instant: a standing logged earlier is stale (usage accrues), and is not quoted.
        """
        found = self.q("""
            SELECT d.workload_id, d.budget_ratio FROM ev_decision d JOIN workloads w USING (workload_id)
            WHERE w.budget = $budget AND d."time" = $t AND d.budget_ratio IS NOT NULL
            ORDER BY d.seq DESC LIMIT 1""", budget=budget, t=int(t_us))
        return found[0] if found else None


def _holders_text(log: _Log, holders: list[dict[str, Any]], t_us: int) -> str:
    if not holders:
        return "nothing else was running"
    parts = []
    for h in holders[:4]:
        if not log.recorded:
            parts.append(f"{h['workload_id']} ({h['budget']}, {_gpus(h['gpus'])}, since {iso(h['start_us'])})")
            continue
        tier = "allocated" if h["allocated"] else "unallocated"
        if h["allocated"] and h["protected_until"] > t_us:
            prot = f"protected until {iso(h['protected_until'])}"
        elif h["allocated"]:
            prot = f"protection ended {iso(h['protected_until'])}"
        else:
            prot = "never protected"
        parts.append(f"{h['workload_id']} ({h['budget']}, {_gpus(h['gpus'])}, {tier}, {prot})")
    more = f"; and {len(holders) - 4} more (of {len(holders)})" if len(holders) > 4 else ""
    return "GPUs held by " + "; ".join(parts) + more


def _queue_key(w: dict[str, Any]) -> tuple[int, int, str]:
    """Return a workload's place in its team's queue: higher priority first, then earlier submission."""
    return (-int(w["priority"]), int(w["submit_us"]), str(w["workload_id"]))


def _flat_why(policy: str, me: dict[str, Any], starter: dict[str, Any]) -> str:
    """Return why ``starter`` went before ``me`` in the one queue of the priority or fifo baseline."""
    if policy == "priority" and int(starter["priority"]) != int(me["priority"]):
        if int(starter["priority"]) > int(me["priority"]):
            return f"higher priority: {starter['priority']} against {me['priority']}"
    elif int(starter["submit_us"]) < int(me["submit_us"]) or (
        starter["submit_us"] == me["submit_us"] and str(starter["workload_id"]) < str(me["workload_id"])
    ):
        return "submitted earlier" + (" at the same priority" if policy == "priority" else "")
    if starter["gpus"] < me["gpus"]:
        return f"it fit in room too small for {_gpus(me['gpus'])}"
    return "it fit first"


def _rule_why(me: dict[str, Any], starter: dict[str, Any]) -> str | None:
    """Return the fair-share rule that put ``starter`` first when one follows from the two workloads, else None."""
    allocated = me["min_runtime_s"] > 0
    if not allocated and starter["allocated"]:
        return "allocated work always ranks ahead of unallocated work"
    if allocated and not starter["allocated"]:
        return "unallocated, on GPUs no allocated workload could use"
    if starter["budget"] == me["budget"] and _queue_key(starter) < _queue_key(me):
        return "it ranked ahead inside the same team"
    if starter["gpus"] < me["gpus"]:
        return f"it fit in room too small for {_gpus(me['gpus'])}"
    return None


def _holding(log: _Log, t_us: int, before: dict[str, Any] | None) -> tuple[list[str], list[tuple[str, bool]]]:
    holders = log.running_at(t_us)
    held = [(h["workload_id"], h["protected_until"] > t_us) for h in holders]
    if before is not None and before["held"] == held:
        return [], held
    busy = log.in_use(t_us)
    return [_holders_text(log, holders, t_us)] + ([busy] if busy else []), held


def _moment(log: _Log, t_us: int, starter: dict[str, Any] | None, before: dict[str, Any] | None) -> dict[str, Any]:
    """Describe one moment it could have started; repeat only what changed since ``before``."""
    me = log.me
    parts: list[str] = []
    place, teams, standing = None, None, None
    ahead: list[dict[str, Any]] = []
    if log.policy != "fairshare":
        if starter is None:
            parts.append("it waited for room")
        else:
            parts.append(f"{starter['workload_id']} ({starter['budget']}, {_gpus(starter['gpus'])}, priority "
                         f"{starter['priority']}) started instead ({_flat_why(log.policy, me, starter)})")
    elif log.recorded:
        if starter is not None:
            why = _rule_why(me, starter)
            parts.append(f"{starter['workload_id']} ({starter['budget']}, {_gpus(starter['gpus'])}) started instead"
                         + (f" ({why})" if why else ""))
            d = log.decided.get((starter["workload_id"], "start", starter["start_us"]))
            if d is not None:
                parts.append(f"the scheduler's reason: {plain_units(d['reason'], d['budget_ratio'])}")
        kept = None if me["min_runtime_s"] > 0 else held_by_headroom(log.con, me["gpus"], t_us, log.headroom)
        if kept is not None and (before is None or before.get("fill_headroom") is None):
            parts.append(headroom_text(me["gpus"], kept))
        elif starter is None:
            parts.append("it waited for room")
        mine = log.standing_at(me["budget"], t_us) if me["min_runtime_s"] > 0 else None
        standing = None if mine is None else mine["budget_ratio"]
        if mine is not None and (before is None or before.get("standing") != standing):
            parts.append(f"its team {me['budget']} stood at {pct(standing)} of its allocation then, as the "
                         f"scheduler logged it for {mine['workload_id']}")
        text_held, held = _holding(log, t_us, before)
        return _moment_row(t_us, parts + text_held, held, starter, kept=kept, standing=standing)
    else:  # records only: what they show, and the ledger's reading of the standings, labelled as such
        order = fair_tree_order(log.con, t_us)
        teams = len(order)
        place = next((i for i, o in enumerate(order, 1) if o["budget"] == me["budget"]), None)
        ahead = order[: place - 1] if place else []
        if starter is None:
            parts.append("it waited")
        else:
            s_ratio = next((o["ratio"] for o in order if o["budget"] == starter["budget"]), None)
            parts.append(f"{starter['workload_id']} ({starter['budget']}, {_gpus(starter['gpus'])}) started "
                         f"while it waited (the ledger's reading: {starter['budget']} at {pct(s_ratio)})")
        if place is not None and (before is None or (before["place"], before["teams"]) != (place, teams)):
            text = (f"under the budgets in this log, {me['budget']} stood {place} of {teams} at "
                    f"{pct(order[place - 1]['ratio'])} of its allocation")
            if ahead:
                text += " (ahead of it: " + ", ".join(f"{o['budget']} {pct(o['ratio'])}" for o in ahead[:3]) + ")"
            parts.append(text)
        elif place is None and before is None:
            parts.append(f"{me['budget']} is not a team of the budget tree in this log")
    text_held, held = _holding(log, t_us, before)
    return {**_moment_row(t_us, parts + text_held, held, starter),
            "place": place, "teams": teams, "ahead": [{"budget": o["budget"], "ratio": o["ratio"]} for o in ahead]}


def _moment_row(t_us: int, parts: list[str], held: list[tuple[str, bool]], starter: dict[str, Any] | None,
                kept: dict[str, Any] | None = None, standing: float | None = None) -> dict[str, Any]:
    return {"time": iso(t_us), "event": "could_start", "text": f"{iso(t_us)}: " + "; ".join(parts) + ".",
            "place": None, "teams": None, "held": held, "fill_headroom": kept, "standing": standing,
            "started_instead": None if starter is None else starter["workload_id"], "ahead": []}


def _spread(items: list[Any], most: int) -> list[Any]:
    """Return at most ``most`` of ``items``, the first and the last among them, evenly spread between."""
    if len(items) <= most:
        return items
    picks = sorted({round(i * (len(items) - 1) / (most - 1)) for i in range(most)})
    return [items[i] for i in picks]


def _most_free(log: _Log, lo: int, hi: int) -> tuple[int, int] | None:
    """Return (most GPUs free at once, capacity then) over [lo, hi), from the runs and capacity in the log."""
    found = log.q("""
        WITH d AS (
            SELECT start_us AS t, gpus AS g FROM runs
            WHERE start_us < $hi AND coalesce(end_us, $never) > $lo AND workload_id <> $wid
            UNION ALL
            SELECT end_us, -gpus FROM runs
            WHERE end_us IS NOT NULL AND start_us < $hi AND end_us > $lo AND end_us < $hi AND workload_id <> $wid
        ), s AS (SELECT t, sum(g) AS g FROM d GROUP BY t),
        c AS (SELECT t, sum(g) OVER (ORDER BY t) AS busy FROM s),
        p AS (SELECT greatest(t, $lo) AS t, busy FROM c
              WHERE t >= coalesce((SELECT max(t) FROM c WHERE t <= $lo), $lo) AND t < $hi
              UNION ALL SELECT $lo, 0 WHERE NOT EXISTS (SELECT 1 FROM c WHERE t <= $lo))
        SELECT v.gpus - p.busy AS free, v.gpus AS capacity
        FROM p ASOF JOIN capacity_versions v ON v.from_us <= p.t
        ORDER BY free DESC, p.t LIMIT 1""", lo=int(lo), hi=int(hi), never=_NEVER, wid=log.me["workload_id"])
    return (int(found[0]["free"]), int(found[0]["capacity"])) if found else None


def _waiting_moments(log: _Log, lo: int, hi: int | None) -> list[dict[str, Any]]:
    """Tell a wait from ``lo`` to ``hi`` (None: the end of the log) across its whole span."""
    me = log.me
    if hi is not None and hi <= lo:
        return []  # started again in the same instant: there was no wait to explain
    end = int(hi) if hi is not None else int(log.q("SELECT t1 FROM params")[0]["t1"]) + 1
    others = log.q("""
        SELECT r.start_us, r.workload_id, r.budget, r.gpus, r.allocated, w.priority, w.submit_us
        FROM runs r JOIN workloads w USING (workload_id)
        WHERE start_us > $lo AND start_us < $hi AND workload_id <> $wid
        ORDER BY start_us, start_seq""", lo=int(lo), hi=end, wid=me["workload_id"])
    shown = _spread(others, MAX_MOMENTS)
    starters: list[dict[str, Any] | None] = list(shown) or [None]
    if (starters[0] is not None and log.recorded and me["min_runtime_s"] == 0
            and held_by_headroom(log.con, me["gpus"], lo, log.headroom)):
        starters = [None, *starters[: MAX_MOMENTS - 1]]  # free fill kept out by the headroom as its wait began
    moments: list[dict[str, Any]] = []
    before = None
    for o in starters:
        before = _moment(log, lo if o is None else o["start_us"], o, before)
        moments.append(before)
    if len(others) > len(shown) or end - lo >= 6 * 3_600_000_000:
        wide = sum(1 for o in others if o["gpus"] >= me["gpus"])
        free = _most_free(log, lo, end)
        room = "" if free is None else (
            f"; the most GPUs free at any moment of it was {free[0]} of {free[1]} (it needs {me['gpus']})")
        until = "the end of the log" if hi is None else iso(hi)
        moments.append({"time": iso(lo), "event": "wait_summary", "text": (
            f"Over the whole wait, {iso(lo)} to {until} ({_dur(end - lo)}): {len(others)} other workload(s) "
            f"started, {wide} as wide as it or wider, {sum(1 for o in others if o['allocated'])} allocated"
            + (f" ({len(shown)} of them told above, spread over the wait)" if len(others) > len(shown) else "")
            + room + "." + _partition_note(log, lo))})
    return moments


def _partition_note(log: _Log, t_us: int) -> str:
    """Say, for allocated work that is no debug run, that the debug partition's room (at ``t_us``) was never its own."""
    me, partition = log.me, log.debug_partition
    if partition is None or me["min_runtime_s"] <= 0 or me["min_runtime_s"] <= partition.runtime_s:
        return ""
    found = log.q("SELECT gpus FROM capacity_versions WHERE from_us <= $t ORDER BY from_us DESC LIMIT 1", t=t_us)
    size = partition.hosts_at(t_us, -(-int(found[0]["gpus"]) // partition.per_node) if found else 0)
    if not size:
        return ""
    hosts = "host was" if size == 1 else f"{size} hosts were"
    return (f" The cluster's last {hosts} a debug partition, which starts only allocated runs protected "
            f"at most {duration(partition.runtime_s)} on one host, and free fill: its minimum runtime of "
            f"{duration(me['min_runtime_s'])} kept it off that room, which the free GPUs above count.")


def _decisions(log: _Log, wid: str) -> list[dict[str, Any]]:
    out = []
    for d in log.q("""SELECT "time", action, reason, queue_position, budget_ratio, for_workload
                      FROM ev_decision WHERE workload_id = $wid ORDER BY seq""", wid=wid):
        extra = []
        if d["queue_position"] is not None:
            extra.append(f"queue position {d['queue_position']}")
        if d["budget_ratio"] is not None:
            extra.append(f"its budget at {pct(d['budget_ratio'])} of its allocation")
        if d["for_workload"]:
            extra.append(f"for {d['for_workload']}")
        text = f"{iso(d['time'])}: the scheduler decided to {d['action']}: {plain_units(d['reason'])}"
        out.append({"time": iso(d["time"]), "event": "decision", "action": d["action"],
                    "text": text + (f" ({', '.join(extra)})" if extra else "") + "."})
    return out


def _swap_note(log: _Log, victim: str, winner: str, t_us: int) -> str:
    """Say why ``winner`` preempting ``victim`` at ``t_us`` and the reverse at another time are no swap back."""
    me_budget = {r["workload_id"]: r["budget"] for r in log.q(
        "SELECT workload_id, budget FROM workloads WHERE workload_id IN ($a, $b)", a=victim, b=winner)}
    back = [d for (wid, action, t), d in log.decided.items()
            if wid == winner and action == "preempt" and d["for_workload"] == victim and t != t_us]
    if not back or victim not in me_budget or winner not in me_budget:
        return ""
    t2 = min(back, key=lambda d: abs(int(d["time"]) - t_us))["time"]

    def stood(t: int, loser: str, taker: str) -> tuple[float | None, float | None]:
        lost = log.decided.get((loser, "preempt", t))
        took = log.decided.get((taker, "start", t))
        return (None if lost is None else lost["budget_ratio"], None if took is None else took["budget_ratio"])

    v1, w1 = stood(t_us, victim, winner)  # at the first moment: the victim's and the winner's budgets
    w2, v2 = stood(int(t2), winner, victim)
    if None in (v1, w1, v2, w2):
        return ""
    vb, wb = me_budget[victim], me_budget[winner]
    when = "later" if t2 > t_us else "earlier"
    return (f" The {when} preemption at {iso(t2)}, where {victim} took the room from {winner}, is not the swap "
            f"back this check rules out: each preemption is checked against the standings of its own moment, and "
            f"they had moved in between. At {iso(t_us)} {wb} stood at {pct(w1)} and {vb} at {pct(v1)}; at "
            f"{iso(t2)} {wb} stood at {pct(w2)} and {vb} at {pct(v2)}.")


def _preempted_text(log: _Log, run: dict[str, Any], p: dict[str, Any]) -> str:
    me = log.me
    lost = p["gpus"] * p["lost_us"]
    restart = p["gpus"] * p["restart_us"]
    loss = (f"it lost {_gh(lost)} of work "
            + ("since its last checkpoint or start" if me["resumable"] else "since its start (it cannot resume)")
            + (f" and {_gh(restart)} restarting ({duration(p['restart_s'])} restart)" if restart else ""))
    by = ""
    if p["preempted_by"]:
        who = log.q("SELECT budget, gpus FROM workloads WHERE workload_id = $w", w=p["preempted_by"])
        by = f" to make room for {p['preempted_by']}" + (
            f" ({who[0]['budget']}, {_gpus(who[0]['gpus'])})" if who else " (not in the log)")
    ran = _dur(p["preempt_us"] - run["start_us"])
    when = iso(p["preempt_us"])
    if not log.recorded:
        kind = {"fair_share": "preempted by the scheduler", "host_failure": "ended by a failure of its host",
                "user": "interrupted and requeued by a user or an operator (the records do not say which)"}.get(
            p["reason"], f"preempted ({p['reason'].replace('_', ' ')})")
        whom = by or (" (by whom, and for which job, is not in the records)" if p["reason"] == "fair_share" else "")
        busy = log.in_use(p["preempt_us"])
        return (f"{when}: the records show it {kind}{whom} after running {ran}"
                + (f", with {busy} just after" if busy else "") + f"; {loss}.")
    text = f"{when}: preempted ({p['reason'].replace('_', ' ')}){by} after running {ran}; {loss}."
    d = log.decided.get((me["workload_id"], "preempt", p["preempt_us"]))
    if d is not None:
        text += f" The scheduler's reason: {plain_units(d['reason'])}."
        if p["preempted_by"]:
            text += _swap_note(log, me["workload_id"], p["preempted_by"], int(p["preempt_us"]))
    return text


def explain(
    source: Source, workload_id: str, window_s: int = WEEK_S, fill_headroom: float = 0.0, policy: str = "fairshare",
    debug_partition: DebugPartition | None = None,
) -> dict[str, Any]:
    """Return the story of one workload: a list of dated sentences and the facts behind them.

    ``fill_headroom`` is the share of capacity the run kept free of new free fill (0: none, or not
    to be recounted); a free-fill workload's wait it explains is told as such. ``policy`` is the
    policy the log was decided under (a replay's ``replay.json`` says which). ``window_s`` is the
    lookback of the ledger's own reading of standings, used for imported records only.
    ``debug_partition`` is the run's debug partition rule, when it had one: a wait of other allocated
    work then says that room was not its own.
    """
    if policy not in POLICIES:
        raise InputError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
    con = connect(source)
    if not rows(con, "SELECT 1 FROM duckdb_tables() WHERE table_name = 'params'"):
        prepare(con, window_s=window_s)
    found = rows(con, "SELECT * FROM workload_facts WHERE workload_id = $w", {"w": workload_id})
    if not found:
        known = rows(con, "SELECT count(*) AS n, min(workload_id) AS example FROM workloads")[0]
        hint = f" (the log has {known['n']} workload(s), e.g. {known['example']})" if known["n"] else " (empty log)"
        raise InputError(f"workload {workload_id!r} is not in the log{hint}")
    me = found[0]
    log = _Log(con, me, policy, fill_headroom if policy == "fairshare" else 0.0,
               debug_partition if policy == "fairshare" else None)
    story: list[dict[str, Any]] = []
    if log.recorded:
        mode = "allocated" if me["min_runtime_s"] > 0 else (
            "unallocated (minimum runtime 0: charged to nobody, ranked behind every allocated workload, "
            "preemptible by any of them)")
        shape = (f"{_gpus(me['gpus'])}, {mode}, minimum runtime {duration(me['min_runtime_s'])}, "
                 f"{'resumable' if me['resumable'] else 'not resumable'}, kind {me['kind']}")
    else:
        shape = f"{_gpus(me['gpus'])}, {'resumable' if me['resumable'] else 'not resumable'}"
    story.append({"time": iso(me["submit_us"]), "event": "submitted", "text": (
        f"{iso(me['submit_us'])}: {workload_id} was submitted by {me['user']} to {me['budget']}: {shape}.")})
    runs = log.q("""SELECT r.*, s.nodes FROM runs r JOIN ev_started s ON s.seq = r.start_seq
                    WHERE r.workload_id = $w ORDER BY r.start_seq""", w=workload_id)
    pre = {r["event_id"]: r for r in log.q("SELECT * FROM preemptions WHERE workload_id = $w", w=workload_id)}
    requeued = [r["time"] for r in log.q(
        'SELECT "time" FROM ev_requeued WHERE workload_id = $w ORDER BY seq', w=workload_id)]
    wait_from = me["submit_us"]
    for run in runs:
        story.extend(_waiting_moments(log, wait_from, run["start_us"]))
        if log.recorded:
            prot = (f"allocated, protected until {iso(run['protected_until'])}" if run["allocated"]
                    else "unallocated, not protected")
            where = f"on {', '.join(run['nodes'])}, {_gpus(run['gpus'])}, {prot}"
        else:
            busy = log.in_use(run["start_us"])
            where = f"on {', '.join(run['nodes'])}, {_gpus(run['gpus'])}" + (f"; {busy} with it" if busy else "")
        story.append({"time": iso(run["start_us"]), "event": "started", "text": (
            f"{iso(run['start_us'])}: started (attempt {run['attempt']}) after waiting "
            f"{_dur(run['start_us'] - wait_from)}, {where}.")})
        if run["end_kind"] == "preempt":
            p = pre[run["end_event_id"]]
            story.append({"time": iso(p["preempt_us"]), "event": "preempted", "reason": p["reason"],
                          "preempted_by": p["preempted_by"],
                          "discarded_gpu_hours": p["gpus"] * (p["lost_us"] + p["restart_us"]) / 3.6e9,
                          "text": _preempted_text(log, run, p)})
            wait_from = p["preempt_us"]
            again = [t for t in requeued if t >= wait_from]
            if again:
                story.append({"time": iso(again[0]), "event": "requeued", "text": (
                    f"{iso(again[0])}: " + ("requeued; it keeps its submit time." if log.recorded
                                            else "the records show it requeued."))})
        elif run["end_kind"] == "complete":
            story.append({"time": iso(run["end_us"]), "event": "completed", "text": (
                f"{iso(run['end_us'])}: completed ({run['outcome']}) after running "
                f"{_dur(run['end_us'] - run['start_us'])}.")})
            wait_from = None
        else:
            story.append({"time": None, "event": "running", "text": "Still running at the end of the log."})
            wait_from = None
        if wait_from is None:
            break
    if wait_from is not None:
        if me["end_us"] is not None:
            story.extend(_waiting_moments(log, wait_from, me["end_us"]))
            done = log.q("SELECT outcome FROM ev_completed WHERE workload_id = $w ORDER BY seq LIMIT 1", w=workload_id)
            outcome = done[0]["outcome"] if done else "ended"
            if not runs:
                how = f"after waiting {_dur(me['end_us'] - wait_from)}, without ever starting"
            elif me["end_us"] > wait_from:
                how = f"after waiting {_dur(me['end_us'] - wait_from)}, without running again after its preemption"
            elif log.recorded:
                how = "as it was preempted, without running again"
            else:
                how = "as the records end it where it was preempted: it never ran again"
            story.append({"time": iso(me["end_us"]), "event": "ended", "outcome": outcome, "text": (
                f"{iso(me['end_us'])}: {outcome} {how}.")})
        else:
            story.extend(_waiting_moments(log, wait_from, None))
            story.append({"time": None, "event": "waiting", "text": "Still waiting at the end of the log."})
    decisions = _decisions(log, workload_id) if log.recorded else []
    anomalies = log.q("SELECT kind, reason FROM anomalies WHERE workload_id = $w", w=workload_id)
    waited = sum(int(r["start_us"]) - int(w) for r, w in zip(runs, [me["submit_us"]] + [
        pre[r["end_event_id"]]["preempt_us"] for r in runs if r["end_kind"] == "preempt"], strict=False))
    if wait_from is not None:  # never started (again): the wait lasts to its completion or the end of the log
        until = me["end_us"] if me["end_us"] is not None else log.q("SELECT t1 FROM params")[0]["t1"]
        waited += max(0, int(until) - int(wait_from))
    summary = {"attempts": len(runs), "preemptions": len(pre), "waited_s": waited // 1_000_000,
               "discarded_gpu_hours": sum(s.get("discarded_gpu_hours", 0.0) for s in story)}
    return {"workload_id": workload_id, "budget": me["budget"], "gpus": me["gpus"], "policy": policy,
            "recorded": log.recorded, "summary": summary, "story": story, "decisions": decisions,
            "anomalies": [{"kind": a["kind"], "reason": a["reason"]} for a in anomalies]}


_POLICY_NOTE = {
    "fairshare": "Standings are usage ÷ allocation over the run's lookback window, as a share of the allocation, "
                 "as the scheduler's own decisions logged them; its reasons are quoted from the log.",
    "priority": "Decided under the priority baseline: one queue for the whole cluster, higher priority first, then "
                "earlier submission; anything that fits starts.",
    "fifo": "Decided under the fifo baseline: one queue for the whole cluster by submission; anything that fits "
            "starts.",
}
RECORDS_NOTE = (
    "The log holds the cluster's records only, no scheduling decisions: what they show is told as fact. Standings "
    "are the ledger's reading under the budgets in this log (usage as accrued ÷ allocation over the lookback window, "
    "as a share of the allocation); the scheduler's own reasons are not in its records."
)


def as_text(result: dict[str, Any]) -> str:
    """Return the story as plain text, one dated sentence a line."""
    sm = result["summary"]
    lines = [f"Workload {result['workload_id']} ({result['budget']}, {_gpus(result['gpus'])}): "
             f"started {sm['attempts']} time(s), preempted {sm['preemptions']} time(s), waited "
             f"{duration(sm['waited_s'])} in all, {sm['discarded_gpu_hours']:,.2f} GPU-hours thrown away "
             "by preemption.",
             _POLICY_NOTE[result.get("policy", "fairshare")] if result.get("recorded", True) else RECORDS_NOTE]
    if result.get("lookback_note"):
        lines.append(str(result["lookback_note"]))
    lines.append("")
    lines += [f"- {s['text']}" for s in result["story"]]
    if result["decisions"]:
        lines += ["", "Scheduling decisions recorded in the log:"] + [f"- {d['text']}" for d in result["decisions"]]
    if result["anomalies"]:
        lines += ["", "Records about it that the audit could not take at face value:"]
        lines += [f"- {a['kind']}: {a['reason']}" for a in result["anomalies"]]
    return "\n".join(lines) + "\n"


__all__ = ["RECORDS_NOTE", "DebugPartition", "as_text", "explain", "fair_tree_order", "pct", "plain_units"]
