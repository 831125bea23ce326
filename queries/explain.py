"""Tell one workload's story from the log: when it waited, who was ahead, who held the GPUs, what it lost.

Everything is recounted from the projection (runs, preemptions, shares, capacity); the
``SchedulingDecision`` events in the log are quoted beside the recount when present. The
fair-share standing is recomputed as the design ranks it (Fair Tree): siblings at each level
of the budget tree by usage ÷ allocation over the lookback window, lowest first, depth first.
Usage here is as accrued from the runs in the log (no up-front entry charge). A run replayed under
the ``priority`` or ``fifo`` baseline is told in that policy's terms instead: one queue for the
whole cluster, by priority then submission, or by submission alone.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import duckdb

from ledger.errors import InputError
from ledger.queries.audit import WEEK_S, Source, connect, prepare, rows
from ledger.queries.headroom import headroom_text, held_by_headroom
from ledger.queries.projection import sql_text
from ledger.queries.timefmt import iso

MAX_MOMENTS = 5  # moments shown per waiting period; the rest are summarised
POLICIES = ("fairshare", "priority", "fifo")


def _dur(us: int) -> str:
    s = int(us // 1_000_000)
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 2 * 86_400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86_400:.1f} days"


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _gh(gpu_us: float) -> str:
    return f"{gpu_us / 3.6e9:,.2f} GPU-hours"


def fair_tree_order(con: duckdb.DuckDBPyConnection, t_us: int) -> list[dict[str, Any]]:
    """Return the teams in fair-share order at ``t_us``: Fair Tree walk by usage ÷ allocation, lowest first."""
    standing = {r["budget"]: r for r in rows(con, sql_text("standing").replace("$t", str(int(t_us))))}
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


def _running_at(con: duckdb.DuckDBPyConnection, t_us: int, exclude: str) -> list[dict[str, Any]]:
    return rows(con, f"""
        SELECT r.workload_id, r.budget, r.gpus, r.allocated, s.nodes, r.protected_until, r.start_us
        FROM runs r JOIN ev_started s ON s.seq = r.start_seq
        WHERE r.start_us <= {int(t_us)} AND coalesce(r.end_us, (SELECT t1 FROM params) + 1) > {int(t_us)}
          AND r.workload_id <> '{exclude.replace("'", "''")}'
        ORDER BY r.gpus DESC, r.start_us LIMIT 4""")


def _holders_text(holders: list[dict[str, Any]], t_us: int) -> str:
    if not holders:
        return "nothing else was running"
    parts = []
    for h in holders:
        tier = "allocated" if h["allocated"] else "unallocated"
        if h["allocated"] and h["protected_until"] > t_us:
            prot = f"protected until {iso(h['protected_until'])}"
        elif h["allocated"]:
            prot = f"protection ended {iso(h['protected_until'])}"
        else:
            prot = "never protected"
        parts.append(f"{h['workload_id']} ({h['budget']}, {_gpus(h['gpus'])}, {tier}, {prot})")
    return "GPUs held by " + "; ".join(parts)


def _ratio(r: float | None) -> str:
    if r is None:
        return "-"
    return format(r, ".2g" if 0 < r < 0.01 else ".2f")  # a small but real usage must not read as 0.00


def _standing(con: duckdb.DuckDBPyConnection, me: dict[str, Any], t_us: int) -> dict[str, Any]:
    order = fair_tree_order(con, t_us)
    place = next((i for i, o in enumerate(order, 1) if o["budget"] == me["budget"]), None)
    return {"order": order, "place": place, "ratio": order[place - 1]["ratio"] if place else None}


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


def _moment(con: duckdb.DuckDBPyConnection, me: dict[str, Any], t_us: int, starter: dict[str, Any] | None,
            before: dict[str, Any] | None, headroom: float, policy: str = "fairshare") -> dict[str, Any]:
    """Describe one moment it could have started; repeat only what changed since ``before``."""
    if policy != "fairshare":
        return _flat_moment(con, me, t_us, starter, before, policy)
    st = _standing(con, me, t_us)
    order, place = st["order"], st["place"]
    ahead = order[: place - 1] if place else order
    holders = _running_at(con, t_us, me["workload_id"])
    allocated = me["min_runtime_s"] > 0
    parts = []
    if starter is not None:
        s_place = next((i for i, o in enumerate(order, 1) if o["budget"] == starter["budget"]), None)
        s_ratio = order[s_place - 1]["ratio"] if s_place else None
        who = f"{starter['workload_id']} ({starter['budget']} at {_ratio(s_ratio)}, {_gpus(starter['gpus'])})"
        if not allocated and starter["allocated"]:
            why = "allocated work always ranks ahead of unallocated work"
        elif allocated and not starter["allocated"]:
            why = "unallocated, on GPUs no allocated workload could use"
        elif place is not None and s_place is not None and s_place < place:
            why = "its team ranked ahead"
        elif starter["budget"] == me["budget"] and _queue_key(starter) < _queue_key(me):
            why = "it ranked ahead inside the same team"
        elif starter["gpus"] < me["gpus"]:
            why = f"it fit in room too small for {_gpus(me['gpus'])}"
        else:
            why = "it fit first"
        parts.append(f"{who} started instead ({why})")
    kept = None if allocated else held_by_headroom(con, me["gpus"], t_us, headroom)
    if kept is not None and (before is None or before.get("fill_headroom") is None):
        parts.append(headroom_text(me["gpus"], kept))
    elif starter is None:
        parts.append("it waited for room")
    same_standing = before is not None and before["place"] == place and before["teams"] == len(order)
    if not allocated:
        pass  # its standing does not matter against allocated work; the submission line says so
    elif place is None:
        parts.append("its budget is not a team of the tree")
    elif same_standing:
        parts.append(f"its team still stood {place} of {len(order)} ({_ratio(st['ratio'])})")
    else:
        text = f"its team stood {place} of {len(order)} by usage ÷ allocation ({_ratio(st['ratio'])})"
        if ahead:
            text += "; first ahead of it: " + ", ".join(f"{o['budget']} {_ratio(o['ratio'])}" for o in ahead[:3])
        parts.append(text)
    held = [(h["workload_id"], h["protected_until"] > t_us) for h in holders]
    if before is None or before["held"] != held:
        parts.append(_holders_text(holders, t_us))
    return {"time": iso(t_us), "event": "could_start", "text": f"{iso(t_us)}: " + "; ".join(parts) + ".",
            "place": place, "teams": len(order), "held": held, "fill_headroom": kept,
            "started_instead": None if starter is None else starter["workload_id"],
            "ahead": [{"budget": o["budget"], "ratio": o["ratio"]} for o in ahead], "holders": [
                {"workload_id": h["workload_id"], "budget": h["budget"], "gpus": h["gpus"],
                 "allocated": h["allocated"], "protected_until": iso(h["protected_until"])} for h in holders]}


def _flat_moment(con: duckdb.DuckDBPyConnection, me: dict[str, Any], t_us: int, starter: dict[str, Any] | None,
                 before: dict[str, Any] | None, policy: str) -> dict[str, Any]:
    """Describe one moment under a baseline: who started and why, who held the GPUs; no budget standing."""
    holders = _running_at(con, t_us, me["workload_id"])
    parts = []
    if starter is None:
        parts.append("it waited for room")
    else:
        who = (f"{starter['workload_id']} ({starter['budget']}, {_gpus(starter['gpus'])}, "
               f"priority {starter['priority']})")
        parts.append(f"{who} started instead ({_flat_why(policy, me, starter)})")
    held = [(h["workload_id"], h["protected_until"] > t_us) for h in holders]
    if before is None or before["held"] != held:
        parts.append(_holders_text(holders, t_us))
    return {"time": iso(t_us), "event": "could_start", "text": f"{iso(t_us)}: " + "; ".join(parts) + ".",
            "place": None, "teams": None, "held": held, "fill_headroom": None,
            "started_instead": None if starter is None else starter["workload_id"], "ahead": [], "holders": [
                {"workload_id": h["workload_id"], "budget": h["budget"], "gpus": h["gpus"],
                 "allocated": h["allocated"], "protected_until": iso(h["protected_until"])} for h in holders]}


def _waiting_moments(con: duckdb.DuckDBPyConnection, me: dict[str, Any], lo: int, hi: int | None,
                     headroom: float, policy: str = "fairshare") -> list[dict[str, Any]]:
    if hi is not None and hi <= lo:
        return []  # started again in the same instant: there was no wait to explain
    hi_sql = "(SELECT t1 FROM params) + 1" if hi is None else str(int(hi))
    wid = me["workload_id"].replace("'", "''")
    others = rows(con, f"""
        SELECT r.start_us, r.workload_id, r.budget, r.gpus, r.allocated, w.priority, w.submit_us
        FROM runs r JOIN workloads w USING (workload_id)
        WHERE start_us > {int(lo)} AND start_us < {hi_sql} AND workload_id <> '{wid}'
        ORDER BY start_us, start_seq""")
    moments: list[dict[str, Any]] = []
    before = None
    starters: list[dict[str, Any] | None] = list(others[:MAX_MOMENTS]) or [None]
    if starters[0] is not None and me["min_runtime_s"] == 0 and held_by_headroom(con, me["gpus"], lo, headroom):
        starters = [None, *starters[: MAX_MOMENTS - 1]]  # free fill kept out by the headroom as its wait began
    for o in starters:
        before = _moment(con, me, lo if o is None else o["start_us"], o, before, headroom, policy)
        moments.append(before)
    shown = sum(1 for o in starters if o is not None)
    if len(others) > shown:
        rest = others[shown:]
        wide = sum(1 for o in rest if o["gpus"] >= me["gpus"])
        span = f"{iso(rest[0]['start_us'])}" + ("" if len(rest) == 1 else f" to {iso(rest[-1]['start_us'])}")
        moments.append({"time": iso(rest[0]["start_us"]), "event": "more", "text": (
            f"{span}: {len(rest)} more workload(s) started "
            f"while it waited ({wide} as wide as it or wider, {sum(1 for o in rest if o['allocated'])} allocated).")})
    return moments


def _decisions(con: duckdb.DuckDBPyConnection, wid: str) -> list[dict[str, Any]]:
    q = wid.replace("'", "''")
    out = []
    for d in rows(con, f"""SELECT "time", action, reason, queue_position, budget_ratio, for_workload
                           FROM ev_decision WHERE workload_id = '{q}' ORDER BY seq"""):
        extra = []
        if d["queue_position"] is not None:
            extra.append(f"queue position {d['queue_position']}")
        if d["budget_ratio"] is not None:
            extra.append(f"budget usage ÷ allocation {d['budget_ratio']:.2f}")
        if d["for_workload"]:
            extra.append(f"for {d['for_workload']}")
        text = f"{iso(d['time'])}: the scheduler decided to {d['action']}: {d['reason']}"
        out.append({"time": iso(d["time"]), "event": "decision", "action": d["action"],
                    "text": text + (f" ({', '.join(extra)})" if extra else "") + "."})
    return out


def explain(
    source: Source, workload_id: str, window_s: int = WEEK_S, fill_headroom: float = 0.0, policy: str = "fairshare",
) -> dict[str, Any]:
    """Return the story of one workload: a list of dated sentences and the facts behind them.

    ``fill_headroom`` is the share of capacity the run kept free of new free fill (0: none, or not
    to be recounted); a free-fill workload's wait it explains is told as such. ``policy`` is the
    policy the log was decided under (a replay's ``replay.json`` says which; an imported log's
    own scheduler is told in fair-share terms, the ledger's own).
    """
    if policy not in POLICIES:
        raise InputError(f"policy {policy!r}: expected one of {', '.join(POLICIES)}")
    headroom = fill_headroom if policy == "fairshare" else 0.0
    con = connect(source)
    if not rows(con, "SELECT 1 FROM duckdb_tables() WHERE table_name = 'params'"):
        prepare(con, window_s=window_s)
    q = workload_id.replace("'", "''")
    found = rows(con, f"SELECT * FROM workload_facts WHERE workload_id = '{q}'")
    if not found:
        known = rows(con, "SELECT count(*) AS n, min(workload_id) AS example FROM workloads")[0]
        hint = f" (the log has {known['n']} workload(s), e.g. {known['example']})" if known["n"] else " (empty log)"
        raise InputError(f"workload {workload_id!r} is not in the log{hint}")
    me = found[0]
    story: list[dict[str, Any]] = []
    mode = "allocated" if me["min_runtime_s"] > 0 else (
        "unallocated (minimum runtime 0: charged to nobody, ranked behind every allocated workload, preemptible by "
        "any of them)")
    story.append({"time": iso(me["submit_us"]), "event": "submitted", "text": (
        f"{iso(me['submit_us'])}: {workload_id} was submitted by {me['user']} to {me['budget']}: {_gpus(me['gpus'])}, "
        f"{mode}, minimum runtime {_dur(me['min_runtime_s'] * 1_000_000)}, "
        f"{'resumable' if me['resumable'] else 'not resumable'}, kind {me['kind']}.")})
    runs = rows(con, f"SELECT r.*, s.nodes FROM runs r JOIN ev_started s ON s.seq = r.start_seq "
                     f"WHERE r.workload_id = '{q}' ORDER BY r.start_seq")
    pre = {r["event_id"]: r for r in rows(con, f"SELECT * FROM preemptions WHERE workload_id = '{q}'")}
    wait_from = me["submit_us"]
    for run in runs:
        story.extend(_waiting_moments(con, me, wait_from, run["start_us"], headroom, policy))
        tier = "allocated" if run["allocated"] else "unallocated"
        prot = (f"protected until {iso(run['protected_until'])}" if run["allocated"] else "not protected")
        story.append({"time": iso(run["start_us"]), "event": "started", "text": (
            f"{iso(run['start_us'])}: started (attempt {run['attempt']}) after waiting "
            f"{_dur(run['start_us'] - wait_from)}, on {', '.join(run['nodes'])}, {_gpus(run['gpus'])}, "
            f"{tier}, {prot}.")})
        if run["end_kind"] == "preempt":
            p = pre[run["end_event_id"]]
            by = ""
            if p["preempted_by"]:
                who = rows(con, f"SELECT budget, gpus FROM workloads WHERE workload_id = "
                                f"'{p['preempted_by'].replace(chr(39), chr(39) * 2)}'")
                by = f" to make room for {p['preempted_by']}" + (
                    f" ({who[0]['budget']}, {_gpus(who[0]['gpus'])})" if who else " (not in the log)")
            lost = p["gpus"] * p["lost_us"]
            restart = p["gpus"] * p["restart_us"]
            story.append({"time": iso(p["preempt_us"]), "event": "preempted", "reason": p["reason"],
                          "preempted_by": p["preempted_by"], "discarded_gpu_hours": (lost + restart) / 3.6e9,
                          "text": (
                f"{iso(p['preempt_us'])}: preempted ({p['reason'].replace('_', ' ')}){by} after running "
                f"{_dur(p['preempt_us'] - run['start_us'])}; it lost {_gh(lost)} of work "
                + ("since its last checkpoint or start" if me["resumable"] else "since its start (it cannot resume)")
                + (f" and {_gh(restart)} restarting ({p['restart_s']} s restart)" if restart else "")
                + ".")})
            wait_from = p["preempt_us"]
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
            story.extend(_waiting_moments(con, me, wait_from, me["end_us"], headroom, policy))
            done = rows(con, f"SELECT outcome FROM ev_completed WHERE workload_id = '{q}' ORDER BY seq LIMIT 1")
            outcome = done[0]["outcome"] if done else "ended"
            if not runs:
                how = f"after waiting {_dur(me['end_us'] - wait_from)}, without ever starting"
            elif me["end_us"] > wait_from:
                how = f"after waiting {_dur(me['end_us'] - wait_from)}, without running again after its preemption"
            else:
                how = "as it was preempted, without running again"
            story.append({"time": iso(me["end_us"]), "event": "ended", "outcome": outcome, "text": (
                f"{iso(me['end_us'])}: {outcome} {how}.")})
        else:
            story.extend(_waiting_moments(con, me, wait_from, None, headroom, policy))
            story.append({"time": None, "event": "waiting", "text": "Still waiting at the end of the log."})
    decisions = _decisions(con, workload_id)
    anomalies = rows(con, f"SELECT kind, reason FROM anomalies WHERE workload_id = '{q}'")
    waited = sum(int(r["start_us"]) - int(w) for r, w in zip(runs, [me["submit_us"]] + [
        pre[r["end_event_id"]]["preempt_us"] for r in runs if r["end_kind"] == "preempt"], strict=False))
    if wait_from is not None:  # never started (again): the wait lasts to its completion or the end of the log
        until = me["end_us"] if me["end_us"] is not None else rows(con, "SELECT t1 FROM params")[0]["t1"]
        waited += max(0, int(until) - int(wait_from))
    summary = {"attempts": len(runs), "preemptions": len(pre), "waited_s": waited // 1_000_000,
               "discarded_gpu_hours": sum(s.get("discarded_gpu_hours", 0.0) for s in story)}
    return {"workload_id": workload_id, "budget": me["budget"], "gpus": me["gpus"], "policy": policy,
            "summary": summary, "story": story, "decisions": decisions,
            "anomalies": [{"kind": a["kind"], "reason": a["reason"]} for a in anomalies]}


_POLICY_NOTE = {
    "fairshare": "Standings are usage ÷ allocation over the lookback window, as far as the log covers it.",
    "priority": "Decided under the priority baseline: one queue for the whole cluster, higher priority first, then "
                "earlier submission; anything that fits starts.",
    "fifo": "Decided under the fifo baseline: one queue for the whole cluster by submission; anything that fits "
            "starts.",
}


def as_text(result: dict[str, Any]) -> str:
    """Return the story as plain text, one dated sentence a line."""
    sm = result["summary"]
    lines = [f"Workload {result['workload_id']} ({result['budget']}, {_gpus(result['gpus'])}): "
             f"started {sm['attempts']} time(s), preempted {sm['preemptions']} time(s), waited "
             f"{_dur(sm['waited_s'] * 1_000_000)} in all, {sm['discarded_gpu_hours']:,.2f} GPU-hours thrown away "
             "by preemption.",
             _POLICY_NOTE[result.get("policy", "fairshare")]]
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


__all__ = ["as_text", "explain", "fair_tree_order"]
