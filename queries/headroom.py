"""Did the fill headroom keep a free-fill workload waiting? Recounted from the log's runs, hosts and capacity.

Under fair share the decision core does not start free fill into the last ``fill_headroom`` of the
capacity left free while allocated work runs or waits (``--fill-headroom``, default 3 %). The log
records no decision for a workload that is not started, so the moment is recounted: the free GPUs
of each healthy host after the instant's starts, whether allocated work was running or waiting,
and the headroom the run was replayed under (from the run directory's ``replay.json`` when it
has one, else the setting given).
"""

from __future__ import annotations

import math
from typing import Any

import duckdb

from ledger.queries.audit import rows

_NEVER = 9_223_372_036_854_775_807


def _free_by_host(con: duckdb.DuckDBPyConnection, t_us: int) -> tuple[int, int, list[int]]:
    """Return (capacity GPUs, GPUs per host, free GPUs of each healthy host) just after ``t_us``'s starts."""
    cap = rows(con, f"""SELECT gpus, gpus_per_node, cluster FROM ev_capacity WHERE "time" <= {int(t_us)}
                        ORDER BY "time" DESC, seq DESC LIMIT 1""")
    if not cap:
        return 0, 0, []
    gpus, per, cluster = int(cap[0]["gpus"]), int(cap[0]["gpus_per_node"]), str(cap[0]["cluster"])
    hosts = {f"{cluster}-n{i:03d}": min(per, gpus - i * per) for i in range(-(-gpus // per))}
    for h in rows(con, f"""SELECT host, arg_max(state, seq) AS state FROM ev_health WHERE "time" <= {int(t_us)}
                           GROUP BY host"""):
        if h["state"] != "healthy":
            hosts.pop(h["host"], None)  # an unhealthy host takes no new work
    for r in rows(con, f"""SELECT r.gpus, s.nodes FROM runs r JOIN ev_started s ON s.seq = r.start_seq
                           WHERE r.start_us <= {int(t_us)} AND coalesce(r.end_us, {_NEVER}) > {int(t_us)}"""):
        nodes = list(r["nodes"])
        for n in nodes:  # a narrow run holds its GPUs on one host, a wide one whole hosts
            if n in hosts:
                hosts[n] -= int(r["gpus"]) if len(nodes) == 1 else per
    return gpus, per, [max(0, f) for f in hosts.values()]


def _allocated_busy(con: duckdb.DuckDBPyConnection, t_us: int) -> bool:
    """Return whether allocated work was running or waiting at ``t_us`` (the headroom is kept only then)."""
    t = int(t_us)
    running = f"""SELECT 1 FROM runs WHERE allocated AND start_us <= {t} AND coalesce(end_us, {_NEVER}) > {t}"""
    waiting = f"""SELECT 1 FROM workload_facts w
                  WHERE w.min_runtime_s > 0 AND w.budget IN (SELECT path FROM nodes)
                    AND w.submit_us <= {t} AND coalesce(w.end_us, {_NEVER}) > {t}
                    AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.workload_id = w.workload_id
                                    AND r.start_us <= {t} AND coalesce(r.end_us, {_NEVER}) > {t})"""
    return bool(rows(con, f"SELECT EXISTS ({running}) OR EXISTS ({waiting}) AS busy")[0]["busy"])


def held_by_headroom(con: duckdb.DuckDBPyConnection, gpus: int, t_us: int, share: float) -> dict[str, Any] | None:
    """Return the facts when the headroom alone kept a ``gpus``-GPU fill workload from starting at ``t_us``, else None.

    Held: allocated work ran or waited, some healthy host had room for it (whole free hosts for a wide
    one), and the free GPUs less the headroom (``ceil(share × capacity)``, as the core counts it)
    were fewer than it needs.
    """
    if share <= 0:
        return None
    capacity, per, free = _free_by_host(con, t_us)
    if not free or not per:
        return None
    size = gpus if gpus <= per else -(-gpus // per) * per  # a wide workload holds whole hosts
    fits = max(free) >= gpus if gpus <= per else sum(1 for f in free if f == per) * per >= size
    kept = math.ceil(share * capacity)
    total = sum(free)
    if not fits or size <= total - kept or not _allocated_busy(con, t_us):
        return None
    return {"free_gpus": total, "most_on_one_host": max(free), "headroom_gpus": kept, "share": share,
            "capacity_gpus": capacity}


def headroom_text(gpus: int, held: dict[str, Any]) -> str:
    """Return the plain-words account of a wait the fill headroom caused."""
    free = held["free_gpus"]
    room = f" ({held['most_on_one_host']} on one host, room for its {gpus})" if gpus <= held["most_on_one_host"] else ""
    return (f"it waited although {free} GPUs were free{room}: the fill headroom (--fill-headroom "
            f"{held['share'] * 100:g} %: {held['headroom_gpus']} of the {held['capacity_gpus']} GPUs) is kept free "
            f"of new free fill while allocated work runs or waits, so free fill could take only "
            f"{max(0, free - held['headroom_gpus'])} of them")


__all__ = ["headroom_text", "held_by_headroom"]
