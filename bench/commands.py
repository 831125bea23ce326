"""What a user types, timed end to end: ``gpuledger replay`` until the work is done, then ``gpuledger audit``.

For each month (``BENCH_COMMAND_MONTHS``, default ``full,sustained,itp``):

* ``full``: the full demo month (~100,000 workloads on 1,024 GPUs), fairshare, replayed to its end;
* ``sustained``: the scenario family's sustained-demand month (2.5x the capacity for 22 days), fairshare;
* ``itp``: Microsoft ITP cluster 4 (15,802 real jobs; ``bench/data/itp``, MIT), FIFO;
* ``family``: the family-A month of ``bench.month`` (when the sustained month is not in this tree);
* ``PATH.csv``: a workload trace of your own, its budgets file beside it as ``PATH.yaml``.

The month is written as the files a user has (``trace.csv`` and ``budgets.yaml``, untimed), then,
``BENCH_REPEAT`` times (default 3), each in a fresh process:

1. ``core``: ``replay()`` alone in a child process (the clock, the core and the log; no trace
   parsing, no audit), and in the same child the floor under it: the same events appended to a new
   log by the replay's own log writer, in the driver's batches (``log write``);
2. ``replay as typed``: ``gpuledger replay trace.csv --budgets budgets.yaml --out RUN --quiet``
   (``--policy fifo`` for ITP), wall until the command returns, peak memory of the process;
3. ``split``: the same command's steps in one child (read the trace, replay, load the log into
   DuckDB, the audit SQL, the document, the Parquet tables, the JSON file);
4. ``audit``: ``gpuledger audit RUN`` (the text tables) and ``gpuledger audit RUN --format json``.

Then the sizes (the log, ``audit.json``, each Parquet table) and the JSON encoders on the run's
audit (orjson, which writes ``audit.json``, against the standard library's ``json.dumps(indent=1)``,
which wrote it before; the lean document, and the document with every detail table attached, as
``audit.json`` used to hold). Ratios are medians of the same run: replay as typed ÷ core (target
≤ 1.5), audit ÷ core (≤ 0.5), core ÷ log write (≤ 3); peak memory ≤ 1 GiB; ``audit.json`` ≤ 1 MB.
``BENCH_JSON=path`` also writes every figure as JSON (``bench.scaling`` uses the same functions).
``BENCH_COMMAND_STEPS=core`` times step 1 alone (the core ÷ log write ratio, in minutes rather than
the better part of an hour).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
ITP = ROOT / "bench" / "data" / "itp" / "cluster04.csv"
GPULEDGER = Path(sys.executable).with_name("gpuledger")
TARGETS = {"typed_over_core": 1.2, "audit_over_core": 0.1, "core_over_log": 3.0}
PEAK_LIMIT = 1 << 30
AUDIT_JSON_LIMIT = 1_000_000

# Runs a command and reports its wall time, CPU time and the peak memory (max RSS) of its process tree.
TIMED_SCRIPT = """
import json, resource, subprocess, sys, time
t0 = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - t0
if done.returncode:
    sys.exit(done.stderr[-3000:])
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"wall": wall, "cpu": used.ru_utime + used.ru_stime, "peak": used.ru_maxrss * 1024}))
"""

# replay() alone, then the log-write floor: the same events appended by the replay's log writer.
_CORE = """
import json, os, resource, shutil, sys, tempfile, time
from pathlib import Path
from ledger.core.knobs import Knobs
from ledger.events import (AllocationChanged, BudgetNodeDefined, ClusterCapacityChanged, HostHealthChanged,
                           WorkloadSubmitted)
from ledger.gcpause import paused_gc
from ledger.log import EventLog
from ledger.replay.logwriter import LogWriter
from ledger.replay.run import load_inputs, replay
trace, budgets, policy, batch = sys.argv[1], sys.argv[2] or None, sys.argv[3], int(sys.argv[4])
inputs = load_inputs(trace, budgets)
knobs = Knobs(policy=policy, gpus_per_node=inputs.gpus_per_node)
outside = (AllocationChanged, BudgetNodeDefined, ClusterCapacityChanged, HostHealthChanged, WorkloadSubmitted)
with tempfile.TemporaryDirectory(prefix="bench-core-", dir=os.environ.get("BENCH_TMP")) as tmp:
    t0, c0 = time.perf_counter(), time.process_time()
    stats = replay(inputs, knobs, tmp)
    core, core_cpu = time.perf_counter() - t0, time.process_time() - c0
    events = list(EventLog(Path(tmp) / "events"))
    shutil.rmtree(Path(tmp) / "events")
    log = EventLog(Path(tmp) / "again")
    writer = LogWriter(log)
    with paused_gc():
        t0, c0 = time.perf_counter(), time.process_time()
        for i in range(0, len(events), batch):
            part = events[i:i + batch]
            writer.write(part, [j for j, e in enumerate(part) if isinstance(e, outside)])
        log.close()
        floor, floor_cpu = time.perf_counter() - t0, time.process_time() - c0
print(json.dumps({"core": core, "log_write": floor, "core_cpu": core_cpu, "log_write_cpu": floor_cpu,
                  "events": stats.events, "sim_s": stats.simulated_s,
                  "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

# The steps of `gpuledger replay` in one process, each timed (what the command does, in its order).
_SPLIT = """
import json, os, sys, tempfile, time
from pathlib import Path
from ledger.core.knobs import Knobs
from ledger.queries import snapshot
from ledger.queries.detail import FOLDER, write_tables
from ledger.queries.projection import Loader, register
from ledger.replay.run import load_inputs, replay
import importlib
A = importlib.import_module("ledger.queries.audit")
trace, budgets, policy = sys.argv[1], sys.argv[2] or None, sys.argv[3]
steps = {}
t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); steps[name] = now - t; t = now
inputs = load_inputs(trace, budgets); lap("read trace")
with tempfile.TemporaryDirectory(prefix="bench-split-", dir=os.environ.get("BENCH_TMP")) as tmp:
    t = time.perf_counter()
    loaded = Loader(decisions=False)
    replay(inputs, Knobs(policy=policy, gpus_per_node=inputs.gpus_per_node), tmp, follower=loaded)
    lap("replay, the projection following the log")
    tables = loaded.tables(); lap("projection to Arrow")
    snapshot.save(Path(tmp), tables, snapshot.log_key(Path(tmp) / "events", decisions=False)); lap("keep projection")
    con = register(tables); lap("intervals SQL")
    A.prepare(con); lap("audit SQL")
    written = write_tables(con, Path(tmp) / FOLDER, relative_to=tmp); lap("write Parquet tables")
    data = A.collect(con, written); lap("build the document")
    A.write_json(data, Path(tmp) / "audit.json"); lap("write audit.json")
print(json.dumps(steps))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _child(code: str, *args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=_env(), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"bench.commands: a child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def timed(*command: str) -> dict[str, Any]:
    """Return the wall seconds and peak memory (bytes) of a command run to its end in its own process."""
    return _child(TIMED_SCRIPT, *command)


def write_month(name: str, where: Path) -> tuple[Path, Path | None, str, str]:
    """Write month ``name`` as a user has it (trace and budgets file); return (trace, budgets, policy, label)."""
    if name == "itp":
        return ITP, None, "fifo", "ITP cluster04 (15,802 jobs), fifo, to its end"
    if name.endswith(".csv"):  # a trace of your own, its budgets file beside it (NAME.yaml)
        trace = Path(name)
        rows = sum(1 for _ in trace.open()) - 1
        label = f"{trace.name} ({rows:,} workloads), fairshare, to its end"
        return trace, trace.with_suffix(".yaml"), "fairshare", label
    from ledger.replay.trace import write_trace

    if name == "full":
        from ledger.replay.demo_month import FULL, generate

        month = generate(7, mix=FULL)
        subs, budgets = list(month.submissions), month.budgets
        label = f"full demo month ({len(subs):,} workloads), fairshare, to its end"
    elif name == "sustained":
        from ledger.replay import scenario_family

        subs, budgets = scenario_family.sustained(scenario_family.Sustained(), 1)  # type: ignore[attr-defined]
        label = f"sustained-demand month ({len(subs):,} workloads, 2.5x for 22 days), fairshare, to its end"
    elif name == "family":
        from bench.month import family_month
        from ledger.replay import scenario_family

        params, seed = family_month(scenario_family)
        subs, budgets = scenario_family.month(params, seed)  # type: ignore[arg-type]
        label = f"family A month ({len(subs):,} workloads), fairshare, to its end"
    else:
        from bench.scaling import generated

        subs, budgets, label = generated(name)
    trace, budgets_file = where / f"{name}.csv", where / f"{name}.yaml"
    write_trace(trace, subs)
    budgets_file.write_text(budgets.to_yaml())
    return trace, budgets_file, "fairshare", label


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def measure(
    name: str, repeat: int, where: Path, *, split: bool = True, audits: bool = True, typed: bool = True
) -> dict[str, Any]:
    """Time month ``name`` ``repeat`` times (core, replay as typed, split, audits); return every figure.

    ``typed`` False: the core and its log write only (no command, so no split, audits, sizes or encoders).
    """
    trace, budgets, policy, label = write_month(name, where)
    import inspect

    from ledger.replay.driver import ReplayDriver

    batch_size = int(inspect.signature(ReplayDriver).parameters["batch"].default)  # the driver's batches
    runs: list[dict[str, Any]] = []
    run = where / f"{Path(name).stem}-run"
    policy_args = ["--policy", policy] if policy != "fairshare" else []
    budget_args = ["--budgets", str(budgets)] if budgets else []
    for _ in range(repeat):
        row: dict[str, Any] = {"load": os.getloadavg()[0]}
        row |= _child(_CORE, str(trace), str(budgets or ""), policy, str(batch_size))
        runs.append(row)
        if not typed:
            continue
        typed_run = timed(str(GPULEDGER), "replay", str(trace), *budget_args, "--out", str(run), "--force",
                          "--quiet", *policy_args)
        row["typed"], row["typed_cpu"], row["typed_peak"] = typed_run["wall"], typed_run["cpu"], typed_run["peak"]
        if audits:
            for key, extra in (("audit", []), ("audit_json", ["--format", "json"])):
                got = timed(str(GPULEDGER), "audit", str(run), *extra)
                row[key], row[f"{key}_cpu"], row[f"{key}_peak"] = got["wall"], got["cpu"], got["peak"]
        if split:
            row["split"] = _child(_SPLIT, str(trace), str(budgets or ""), policy)
    figures = {"month": name, "label": label, "runs": runs, "events": runs[0]["events"],
               "sim_days": runs[0]["sim_s"] / 86_400}
    if not typed:
        return figures
    sizes = {"events": _size(run / "events"), "audit.json": _size(run / "audit.json")}
    sizes |= {f"audit/{p.name}": p.stat().st_size for p in sorted((run / "audit").glob("*.parquet"))}
    return figures | {"sizes": sizes, "encoders": encoders(run)}


def encoders(run: Path, repeat: int = 3) -> dict[str, float]:
    """Return the best seconds of orjson and of the standard library encoding the run's audit, lean and whole."""
    import orjson

    from ledger.queries.audit import dumps
    from ledger.queries.detail import TABLES, Details, attach

    lean = json.loads((run / "audit.json").read_bytes())
    whole = attach(lean, Details.files(run / "audit"), tuple(TABLES))
    out: dict[str, float] = {}
    for label, doc in (("lean", lean), ("whole", whole)):
        for enc, fn in (("orjson", dumps), ("json", lambda d: json.dumps(d, indent=1).encode())):
            best = float("inf")
            for _ in range(repeat):
                t0 = time.perf_counter()
                data = fn(doc)
                best = min(best, time.perf_counter() - t0)
            out[f"{label} {enc}"] = best
            out[f"{label} bytes {enc}"] = len(data)
    del orjson
    return out


def _med(values: list[float]) -> str:
    return f"{statistics.median(values):7.2f} s ({min(values):.2f}-{max(values):.2f})"


def report(m: dict[str, Any]) -> list[str]:
    """Return the lines that print one month's figures: medians, spreads, ratios against the targets."""
    runs = m["runs"]
    lines = [f"{m['label']}: {m['events']:,} events over {m['sim_days']:.1f} simulated days, "
             f"load {min(r['load'] for r in runs):.1f}-{max(r['load'] for r in runs):.1f} (median of {len(runs)})"]
    lines.append(f"  core-only replay()           {_med([r['core'] for r in runs])}")
    lines.append(f"  the same events, log write   {_med([r['log_write'] for r in runs])}")
    if "typed" not in runs[0]:  # BENCH_COMMAND_STEPS=core
        cpu = {k: statistics.median(float(r[f"{k}_cpu"]) for r in runs) for k in ("core", "log_write")}
        ratio = cpu["core"] / cpu["log_write"]
        lines.append(f"  CPU seconds: core {_med([r['core_cpu'] for r in runs])}, log write "
                     f"{_med([r['log_write_cpu'] for r in runs])}; core / log write {ratio:.2f} "
                     f"({min(r['core_cpu'] / r['log_write_cpu'] for r in runs):.2f}-"
                     f"{max(r['core_cpu'] / r['log_write_cpu'] for r in runs):.2f}; target <= "
                     f"{TARGETS['core_over_log']:g}: {'met' if ratio <= TARGETS['core_over_log'] else 'NOT met'})")
        m["cpu"], m["ratios"] = cpu, {"core_over_log": ratio}
        return lines
    med = {k: statistics.median(float(r[k]) for r in runs) for k in ("core", "log_write", "typed")}
    lines.append(f"  gpuledger replay (as typed)  {_med([r['typed'] for r in runs])}  peak "
                 f"{max(r['typed_peak'] for r in runs) / 2**20:,.0f} MiB")
    if "audit" in runs[0]:
        med["audit"] = statistics.median(float(r["audit"]) for r in runs)
        lines.append(f"  gpuledger audit RUN          {_med([r['audit'] for r in runs])}  peak "
                     f"{max(r['audit_peak'] for r in runs) / 2**20:,.0f} MiB")
        lines.append(f"  gpuledger audit --format json{_med([r['audit_json'] for r in runs])}  peak "
                     f"{max(r['audit_json_peak'] for r in runs) / 2**20:,.0f} MiB")
    if "split" in runs[0]:
        steps = runs[0]["split"]
        med_steps = {k: statistics.median(float(r["split"][k]) for r in runs) for k in steps}
        lines.append("  split of the command (median): " + ", ".join(f"{k} {v:.2f} s" for k, v in med_steps.items()))
    ratios = {"typed_over_core": med["typed"] / med["core"], "core_over_log": med["core"] / med["log_write"]}
    if "audit" in med:
        ratios["audit_over_core"] = med["audit"] / med["core"]
    if "core_cpu" in runs[0]:  # CPU seconds: what the work cost, whatever else the machine ran meanwhile
        cpu = {k: statistics.median(float(r[f"{k}_cpu"]) for r in runs) for k in ("core", "log_write", "typed")}
        line = (f"  CPU seconds: core {cpu['core']:.2f}, log write {cpu['log_write']:.2f}, replay as typed "
                f"{cpu['typed']:.2f}")
        if "audit_cpu" in runs[0]:
            cpu["audit"] = statistics.median(float(r["audit_cpu"]) for r in runs)
            line += f", audit {cpu['audit']:.2f} (audit / core {cpu['audit'] / cpu['core']:.2f})"
        lines.append(line + f"; replay as typed / core {cpu['typed'] / cpu['core']:.2f}, "
                     f"core / log write {cpu['core'] / cpu['log_write']:.2f}")
        m["cpu"] = cpu
    lines.append("  ratios: " + ", ".join(
        f"{k.replace('_', ' ')} {v:.2f} (target <= {TARGETS[k]:g}: {'met' if v <= TARGETS[k] else 'NOT met'})"
        for k, v in ratios.items()))
    peak = max(max(r["typed_peak"], r.get("audit_peak", 0), r.get("audit_json_peak", 0)) for r in runs)
    sizes = m["sizes"]
    met = "met" if peak <= PEAK_LIMIT else "NOT met"
    lines.append(f"  peak memory {peak / 2**20:,.0f} MiB (target <= 1 GiB: {met});"
                 f" audit.json {sizes['audit.json'] / 1e3:,.1f} kB (target <= 1 MB: "
                 f"{'met' if sizes['audit.json'] <= AUDIT_JSON_LIMIT else 'NOT met'})")
    lines.append("  sizes: " + ", ".join(f"{k} {v / 1e6:,.2f} MB" for k, v in sizes.items()))
    enc = m["encoders"]
    lines.append(f"  JSON encoding, lean document ({enc['lean bytes orjson'] / 1e3:,.0f} kB): orjson "
                 f"{enc['lean orjson'] * 1e3:.1f} ms, json {enc['lean json'] * 1e3:.1f} ms; with every table attached "
                 f"({enc['whole bytes json'] / 1e6:,.1f} MB): orjson {enc['whole orjson']:.2f} s, "
                 f"json {enc['whole json']:.2f} s ({enc['whole json'] / enc['whole orjson']:.0f}x)")
    m["ratios"] = ratios
    return lines


def main() -> None:
    """Measure every month named in BENCH_COMMAND_MONTHS and print its figures."""
    repeat = int(os.environ.get("BENCH_REPEAT", "3"))
    months = [x.strip() for x in os.environ.get("BENCH_COMMAND_MONTHS", "full,sustained,itp").split(",") if x.strip()]
    from ledger.replay import scenario_family

    if "sustained" in months and not hasattr(scenario_family, "sustained"):
        print("(no sustained-demand month in this tree: the family-A month instead)")
        months = ["family" if x == "sustained" else x for x in months]
    if not GPULEDGER.exists():
        raise SystemExit(f"bench.commands: no {GPULEDGER} (install the project: make build)")
    steps = os.environ.get("BENCH_COMMAND_STEPS", "all")
    if steps not in ("all", "core"):
        raise SystemExit(f"bench.commands: BENCH_COMMAND_STEPS={steps!r} (all or core)")
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-commands-", dir=os.environ.get("BENCH_TMP")) as tmp:
        for name in months:
            m = measure(name, repeat, Path(tmp), typed=steps == "all")
            for line in report(m):
                print(line, flush=True)
            results.append(m)
    if "itp" in months:
        print("Against the Alibaba PAI v2020 simulator on ITP cluster04: python -m bench pai")
    if os.environ.get("BENCH_JSON"):
        Path(os.environ["BENCH_JSON"]).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
