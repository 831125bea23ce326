"""Budgets for imported records: owed hours of a real sacct file and of a Kueue import, computed twice.

The audits' owed, delivered and received GPU-hours of an import with ``--budgets`` are checked against
a direct computation written here from the source lines alone: per team and whole UTC hour, owed =
min(share x capacity, demand), demand = the GPUs of every workload from submission to its end
(waiting or running; one cancelled while pending waits until it left), delivered = its runs,
received = min(delivered, owed).
"""

from __future__ import annotations

import calendar
import gzip
import json
import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from ledger.cli import main
from ledger.log import EventLog
from tests.adapters.helpers import DATA

POZIDRIV_GZ = DATA / "slurm" / "pozidriv.log.gz"
SLICE = DATA / "slurm" / "pozidriv-slice.log"
SEVEN = DATA / "budgets" / "pozidriv-seven-accounts.yaml"
QUEUES = DATA / "kueue" / "queues.yaml"
HOUR = 3600


def _epoch(text: str) -> int:
    return calendar.timegm((int(text[0:4]), int(text[5:7]), int(text[8:10]), int(text[11:13]),
                            int(text[14:16]), int(text[17:19]), 0, 0, 0))  # fmt: skip


def sacct_jobs(lines: list[str]) -> list[dict[str, Any]]:
    """Read ``sacct --parsable2 --noheader`` job lines (26 fields, UTC) on their own: account, user, times, state."""
    jobs = []
    for line in lines:
        f = line.rstrip("\n").split("|")
        if len(f) != 26 or "." in f[0]:
            continue
        ran = f[12] not in ("Unknown", "None", "") and f[24] != "None assigned"
        jobs.append({"id": f[0], "account": f[5], "user": f[8], "submit": _epoch(f[10]),
                     "start": _epoch(f[12]) if ran else None, "end": _epoch(f[13]),
                     "state": f[16].split()[0]})  # fmt: skip
    return jobs


def _overlap(lo: int, hi: int, a: int, b: int) -> int:
    return max(0, min(hi, b) - max(lo, a))


def owed_reference(
    jobs: list[dict[str, Any]], team_of: dict[str, str], fraction: dict[str, float], capacity: int,
    later: tuple[int, dict[str, float]] | None = None,
) -> dict[str, dict[str, float]]:
    """Return per team owed, delivered and received GPU-hours over the span of the jobs (1 GPU each).

    ``later`` = (time, fractions): the teams' fractions from that time on (a tree that changed).
    """
    t0 = min(j["submit"] for j in jobs)
    t1 = max(j["end"] for j in jobs)
    demand: dict[tuple[str, int], int] = defaultdict(int)
    ran: dict[tuple[str, int], int] = defaultdict(int)
    for j in jobs:
        team = team_of[j["account"]]
        for h in range(j["submit"] // HOUR, (j["end"] - 1) // HOUR + 1):
            demand[team, h] += _overlap(h * HOUR, h * HOUR + HOUR, j["submit"], j["end"])
            if j["start"] is not None:
                ran[team, h] += _overlap(h * HOUR, h * HOUR + HOUR, j["start"], j["end"])
    out: dict[str, dict[str, float]] = {}
    for team, frac in fraction.items():
        owed = delivered = received = 0.0
        for h in range(t0 // HOUR, (t1 - 1) // HOUR + 1):
            share = frac * capacity * _overlap(h * HOUR, h * HOUR + HOUR, t0, t1)
            if later is not None:
                cut, fracs = later
                share = capacity * (frac * _overlap(h * HOUR, h * HOUR + HOUR, t0, min(cut, t1))
                                    + fracs.get(team, 0.0) * _overlap(h * HOUR, h * HOUR + HOUR, max(cut, t0), t1))
            o = min(share, demand[team, h])
            owed += o
            delivered += ran[team, h]
            received += min(ran[team, h], o)
        out[team] = {"owed": owed / HOUR, "delivered": delivered / HOUR, "received": received / HOUR}
    return out


def _audit_json(source: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["audit", str(source), "--format", "json", *extra]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def _check_owed(audit: dict[str, Any], ref: dict[str, dict[str, float]]) -> None:
    teams = {t["budget"]: t for t in audit["owed_hours"]["teams"]}
    assert set(teams) == set(ref)
    for team, want in ref.items():
        got = teams[team]
        assert got["owed_gpu_hours"] == pytest.approx(want["owed"], rel=1e-9, abs=1e-6), team
        assert got["delivered_gpu_hours"] == pytest.approx(want["delivered"], rel=1e-9, abs=1e-6), team
        assert got["received_gpu_hours"] == pytest.approx(want["received"], rel=1e-9, abs=1e-6), team
    owed = sum(r["owed"] for r in ref.values())
    received = sum(r["received"] for r in ref.values())
    assert owed > 0
    assert audit["owed_hours"]["overall_ratio"] == pytest.approx(received / owed, rel=1e-9)
    assert audit["occupancy"]["capacity_gpu_hours"] > 0


SEVEN_FRACTIONS = {  # the seven-account file: ccr/chem (3) and ccr/bio (1); chem's two accounts 2:2, bio's five 1 each
    "ccr/chem/calla": 3 / 4 * 1 / 2, "ccr/chem/taifl": 3 / 4 * 1 / 2,
    **{f"ccr/bio/{a}": 1 / 4 * 1 / 5 for a in ("balsh", "caste", "field", "savwa", "ibech")},
}  # fmt: skip


@pytest.fixture(scope="module")
def pozidriv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole real pozidriv.log (11,704 jobs), unpacked."""
    path = tmp_path_factory.mktemp("poz") / "pozidriv.log"
    path.write_bytes(gzip.decompress(POZIDRIV_GZ.read_bytes()))
    return path


def test_pozidriv_with_seven_accounts_owes_what_the_sacct_lines_say(
    pozidriv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "events"
    args = ["import", "slurm", str(pozidriv), "--gpus-for-cpu-jobs", "1", "--budgets", str(SEVEN), "--out", str(log)]
    assert main(args) == 0
    summary = capsys.readouterr().out
    assert "charged:     11704 workloads to 7 budget nodes" in summary
    assert "unmatched:   0 workloads" in summary
    with EventLog(log, readonly=True) as lg:
        n = len(lg)
        kinds = [name for name, _ in lg.records()]
    assert kinds.count("BudgetNodeDefined") == 10 and kinds.count("ClusterCapacityChanged") == 1
    assert main(args) == 0  # the same file with the same budgets again: nothing new
    assert f"appended 0 new events to {log} ({n} already in the log)" in capsys.readouterr().err

    jobs = sacct_jobs(pozidriv.read_text().splitlines())
    audit = _audit_json(log, capsys)
    _check_owed(audit, owed_reference(jobs, {a: f"ccr/{'chem' if a in ('calla', 'taifl') else 'bio'}/{a}"
                                             for a in {j["account"] for j in jobs}}, SEVEN_FRACTIONS, 128))
    # the preemption bill: one preemption per PREEMPTED record, each throwing away its whole run
    preempted = [j for j in jobs if j["state"] == "PREEMPTED"]
    assert audit["discarded_work"]["preemptions"] == len(preempted) == 86
    lost = sum(j["end"] - j["start"] for j in preempted) / HOUR
    assert audit["discarded_work"]["discarded_gpu_hours"] == pytest.approx(lost, rel=1e-9)
    # waits: every job that ran, once
    waited = sum(b["jobs"] for b in audit["wait_by_size"]["buckets"])
    assert waited == sum(1 for j in jobs if j["start"] is not None)
    assert not [a for a in audit["anomalies"] if a["kind"] == "undefined_budget"]


def test_audit_with_budgets_charges_a_log_without_a_tree_and_writes_nothing(
    pozidriv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "plain"
    assert main(["import", "slurm", str(pozidriv), "--gpus-for-cpu-jobs", "1", "--out", str(log)]) == 0
    with EventLog(log, readonly=True) as lg:
        before = len(lg)
    audit = _audit_json(log, capsys, "--budgets", str(SEVEN))
    with EventLog(log, readonly=True) as lg:
        assert len(lg) == before
    jobs = sacct_jobs(pozidriv.read_text().splitlines())
    _check_owed(audit, owed_reference(jobs, {a: f"ccr/{'chem' if a in ('calla', 'taifl') else 'bio'}/{a}"
                                             for a in {j["account"] for j in jobs}}, SEVEN_FRACTIONS, 128))
    # and the log, audited as it is, has no tree: every workload is undefined, nothing is owed
    bare = _audit_json(log, capsys)
    assert bare["owed_hours"]["teams"] == []
    assert sum(1 for a in bare["anomalies"] if a["kind"] == "undefined_budget") == len(jobs)


def test_accounts_missing_from_the_tree_are_listed_and_audited_as_undefined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = yaml.safe_load(SEVEN.read_text())
    budgets["nodes"] = [n for n in budgets["nodes"] if not n["path"].endswith(("/caste", "/field"))]
    path = tmp_path / "five.yaml"
    path.write_text(yaml.safe_dump(budgets))
    log = tmp_path / "events"
    assert main(["import", "slurm", str(SLICE), "--gpus-for-cpu-jobs", "1", "--budgets", str(path),
                 "--out", str(log)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    jobs = sacct_jobs(SLICE.read_text().splitlines())
    missing = [j for j in jobs if j["account"] in ("caste", "field")]
    assert missing
    assert f"unmatched:   {len(missing)} workloads of 2 accounts" in out
    caste = [j["id"] for j in missing if j["account"] == "caste"]
    line = next(x for x in out.splitlines() if "account caste:" in x)
    assert line.strip().startswith(f"account caste: {len(caste)} workloads, e.g. ")
    assert line.endswith("(no node of the tree is named 'caste')")
    examples = line.split("e.g. ")[1].split(" (")[0].split(", ")
    assert len(examples) == 3 and set(examples) <= set(caste)
    audit = _audit_json(log, capsys)
    undefined = {a["workload_id"] for a in audit["anomalies"] if a["kind"] == "undefined_budget"}
    assert undefined == {j["id"] for j in missing}


def test_a_tree_that_names_users_charges_the_users(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    budgets = tmp_path / "assoc.yaml"
    assert main(["budgets", "from-slurm", str(DATA / "slurm" / "sacctmgr-assoc.txt"), "--gpus", "128",
                 "--out", str(budgets)]) == 0  # fmt: skip
    log = tmp_path / "events"
    assert main(["import", "slurm", str(SLICE), "--gpus-for-cpu-jobs", "1", "--budgets", str(budgets),
                 "--out", str(log)]) == 0  # fmt: skip
    capsys.readouterr()
    with EventLog(log, readonly=True) as lg:
        charged = {r["workload_id"]: r["budget"] for name, r in lg.records() if name == "WorkloadSubmitted"}
    for j in sacct_jobs(SLICE.read_text().splitlines()):
        if j["account"] == "calla":  # users with shares of their own: their nodes
            assert charged[j["id"]] == f"ccr/chem/calla/{j['user']}"
        elif j["account"] == "taifl":  # Share=parent users: the account
            assert charged[j["id"]] == "ccr/chem/taifl"


def test_from_slurm_reads_parent_names_default_columns_and_tree_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def nodes(name: str, *extra: str) -> tuple[dict[str, Any], dict[str, float]]:
        capsys.readouterr()
        assert main(["budgets", "from-slurm", str(DATA / "slurm" / name), *extra]) == 0
        data = yaml.safe_load(capsys.readouterr().out)
        return data["cluster"], {n["path"]: n["share"] for n in data["nodes"]}

    cluster, shares = nodes("sacctmgr-assoc.txt", "--sinfo", str(DATA / "slurm" / "sinfo-gres.txt"))
    assert cluster == {"name": "pozidriv", "gpus": 32, "gpus_per_node": 8}  # four GPU hosts of 8, one listed twice
    assert shares["ccr/chem/calla/reebu"] == 2 and "ccr/chem/taifl/honbu" not in shares  # Share=parent user
    assert shares["ccr/bio/savwa"] == 1  # Share=parent account: the sum of its children's shares
    assert not any(p.startswith("root") for p in shares)
    cluster, _ = nodes("sacctmgr-assoc.txt")
    assert cluster["gpus"] == 128  # the root association's GrpTRES gres/gpu
    cluster, shares = nodes("sacctmgr-default.txt", "--gpus", "64")
    assert shares == {"calla": 4, "calla/reebu": 1, "calla/turdo": 1, "taifl": 4, "balsh": 1}
    _, shares = nodes("sacctmgr-tree.txt", "--gpus", "16")
    assert set(shares) == {"ccr", "ccr/chem", "ccr/chem/calla", "ccr/chem/taifl", "ccr/bio", "ccr/bio/balsh"}


def test_from_slurm_names_the_line_of_a_bad_share(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "assoc.txt"
    lines = (DATA / "slurm" / "sacctmgr-assoc.txt").read_text().splitlines()
    lines[4] = lines[4].replace("|3|", "|lots|")
    bad.write_text("\n".join(lines) + "\n")
    assert main(["budgets", "from-slurm", str(bad), "--gpus", "8"]) == 2
    assert f"{bad}:5: Share 'lots': expected a number or 'parent'" in capsys.readouterr().err


def kueue_workloads(jobs: list[dict[str, Any]], queue_of: dict[str, str]) -> dict[str, Any]:
    """Return sacct jobs as a Kueue WorkloadList: namespace = account, LocalQueue lq-<account>, 1 GPU each."""

    def stamp(t: int) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))

    items = []
    for j in jobs:
        conds = []
        status: dict[str, Any] = {"conditions": conds}
        spec: dict[str, Any] = {
            "queueName": f"lq-{j['account']}",
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}}],
        }  # fmt: skip
        if j["start"] is not None:
            status["admission"] = {"clusterQueue": queue_of[j["account"]], "podSetAssignments": [
                {"name": "main", "flavors": {"nvidia.com/gpu": "a100"}, "resourceUsage": {"nvidia.com/gpu": "1"}}]}
            conds += [{"type": t, "status": "True", "reason": t, "lastTransitionTime": stamp(j["start"])}
                      for t in ("QuotaReserved", "Admitted")]  # fmt: skip
            if j["state"] == "PREEMPTED":
                spec["active"] = False
                conds.append({"type": "Evicted", "status": "True", "reason": "Preempted",
                              "lastTransitionTime": stamp(j["end"])})  # fmt: skip
        reason = "Failed" if j["state"] in ("FAILED", "TIMEOUT") else "Succeeded"
        conds.append({"type": "Finished", "status": "True", "reason": reason, "lastTransitionTime": stamp(j["end"])})
        items.append({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Workload",
                      "metadata": {"name": f"job-{j['id']}", "namespace": j["account"], "uid": f"uid-{j['id']}",
                                   "creationTimestamp": stamp(j["submit"])},
                      "spec": spec, "status": status})  # fmt: skip
    return {"apiVersion": "v1", "kind": "List", "items": items}


CHEM = ("calla", "taifl")


def kueue_workloads_file(tmp_path: Path) -> tuple[list[dict[str, Any]], dict[str, str], Path]:
    """Write the slice's jobs as Kueue Workloads (chem accounts in cq-chem, the rest in cq-bio)."""
    jobs = sacct_jobs(SLICE.read_text().splitlines())
    queue_of = {a: "cq-chem" if a in CHEM else "cq-bio" for a in {j["account"] for j in jobs}}
    workloads = tmp_path / "workloads.json"
    workloads.write_text(json.dumps(kueue_workloads(jobs, queue_of)))
    return jobs, queue_of, workloads


def test_kueue_import_owes_what_the_workloads_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs, queue_of, workloads = kueue_workloads_file(tmp_path)
    budgets = tmp_path / "budgets.yaml"
    assert main(["budgets", "from-kueue", str(QUEUES), "--cluster", "pozidriv", "--out", str(budgets)]) == 0
    assert yaml.safe_load(budgets.read_text())["cluster"]["gpus"] == 128  # 64 + 32 + 32 nominal GPUs
    log = tmp_path / "events"
    assert main(["import", "kueue", str(workloads), "--cluster", "pozidriv", "--budgets", str(budgets),
                 "--out", str(log)]) == 0  # fmt: skip
    summary = capsys.readouterr().out
    assert f"charged:     {len(jobs)} workloads to 2 budget nodes" in summary
    audit = _audit_json(log, capsys)
    team_of = {a: f"ccr/{q}" for a, q in queue_of.items()}
    _check_owed(audit, owed_reference(jobs, team_of, {"ccr/cq-chem": 3 / 4, "ccr/cq-bio": 1 / 4}, 128))
    assert audit["discarded_work"]["preemptions"] == sum(1 for j in jobs if j["state"] == "PREEMPTED")


def test_html_report_headline_boxes_are_filled_for_an_import(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "events"
    assert main(["import", "slurm", str(SLICE), "--gpus-for-cpu-jobs", "1", "--budgets", str(SEVEN),
                 "--out", str(log)]) == 0  # fmt: skip
    html = tmp_path / "report.html"
    assert main(["audit", str(log), "--format", "html", "--out", str(html)]) == 0
    values = re.findall(r"<div class='kpi(?: bad)?'><b>([^<]*)</b>", html.read_text())
    # hour, week and the hourly bound; short nodes by the hour and the week; debug, discarded, eviction
    assert len(values) == 8 and "-" not in values and "0 of 0" not in values


def test_audit_with_budgets_refuses_a_log_that_has_a_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "events"
    assert main(["import", "slurm", str(SLICE), "--gpus-for-cpu-jobs", "1", "--budgets", str(SEVEN),
                 "--out", str(log)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["audit", str(log), "--budgets", str(SEVEN)]) == 2
    assert "already holds a budget tree; audit it without --budgets" in capsys.readouterr().err


def test_changed_budgets_add_a_new_version_that_the_audit_takes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "events"
    base = ["import", "slurm", str(SLICE), "--gpus-for-cpu-jobs", "1", "--out", str(log)]
    assert main([*base, "--budgets", str(SEVEN)]) == 0
    first = _audit_json(log, capsys)
    changed = yaml.safe_load(SEVEN.read_text())
    for node in changed["nodes"]:
        if node["path"] == "ccr/chem":
            node["share"] = 1  # chem and bio now equal
    path = tmp_path / "equal.yaml"
    path.write_text(yaml.safe_dump(changed))
    assert main([*base, "--budgets", str(path)]) == 0
    assert "appended 11 new events" in capsys.readouterr().err  # the tree and capacity again, nothing else
    second = _audit_json(log, capsys)
    jobs = sacct_jobs(SLICE.read_text().splitlines())
    team_of = {a: f"ccr/{'chem' if a in CHEM else 'bio'}/{a}" for a in {j["account"] for j in jobs}}
    equal = {t: (1 / 2 * 1 / 2 if "/chem/" in t else 1 / 2 * 1 / 5) for t in SEVEN_FRACTIONS}
    _check_owed(second, owed_reference(jobs, team_of, equal, 128))
    assert second["owed_hours"]["owed_gpu_hours"] != first["owed_hours"]["owed_gpu_hours"]


def test_a_local_queue_never_admitted_is_listed_as_unmatched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = [j for j in sacct_jobs(SLICE.read_text().splitlines()) if j["account"] in CHEM][:20]
    waiting = {**jobs[0], "id": "never", "account": "newteam", "start": None}
    workloads = tmp_path / "workloads.json"
    workloads.write_text(json.dumps(kueue_workloads([*jobs, waiting], {a: "cq-chem" for a in (*CHEM, "newteam")})))
    budgets = tmp_path / "budgets.yaml"
    assert main(["budgets", "from-kueue", str(QUEUES), "--out", str(budgets)]) == 0
    assert main(["import", "kueue", str(workloads), "--budgets", str(budgets)]) == 0
    out = capsys.readouterr().out
    assert "unmatched:   1 workloads of 1 accounts" in out
    assert "LocalQueue newteam/lq-newteam: 1 workloads, e.g. newteam/job-never " in out
    assert "(no admitted workload of it names its ClusterQueue)" in out


def test_from_kueue_names_the_object_and_field_of_a_bad_weight(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "queues.yaml"
    bad.write_text(QUEUES.read_text().replace('weight: "3"', "weight: lots"))
    assert main(["budgets", "from-kueue", str(bad)]) == 2
    assert f"{bad}: ClusterQueue cq-chem: spec.fairSharing.weight = 'lots'" in capsys.readouterr().err


def test_the_budgets_file_in_the_docs_loads_and_charges_the_accounts_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "audit-your-cluster.md").read_text()
    block = doc.split("## A budgets file by hand")[1].split("```yaml\n")[1].split("```")[0]
    assert len(block.splitlines()) == 10
    path = tmp_path / "budgets.yaml"
    path.write_text(block)
    assert main(["import", "slurm", str(SLICE), "--gpus-for-cpu-jobs", "1", "--budgets", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ccr/chem/calla" in out and "account ibech:" in out and "account savwa:" in out


def test_a_cluster_queue_created_during_the_period_is_owed_from_its_creation_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs, queue_of, workloads = kueue_workloads_file(tmp_path)
    t0, t1 = min(j["submit"] for j in jobs), max(j["end"] for j in jobs)
    created = t0 + (t1 - t0) // 2 + 1234  # inside an hour, not at its start
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
    queues = tmp_path / "queues.yaml"
    dated = f"  name: cq-bio\n  creationTimestamp: '{stamp}'\n"
    queues.write_text(QUEUES.read_text().replace("  name: cq-bio\n", dated))
    budgets = tmp_path / "budgets.yaml"
    assert main(["budgets", "from-kueue", str(queues), "--cluster", "pozidriv", "--out", str(budgets)]) == 0
    assert f"since: '{stamp}'" in budgets.read_text()
    log = tmp_path / "events"
    assert main(["import", "kueue", str(workloads), "--cluster", "pozidriv", "--budgets", str(budgets),
                 "--out", str(log)]) == 0  # fmt: skip
    audit = _audit_json(log, capsys)
    team_of = {a: f"ccr/{q}" for a, q in queue_of.items()}
    # before cq-bio exists, cq-chem is the cohort's only queue; from then on 3:1
    ref = owed_reference(jobs, team_of, {"ccr/cq-chem": 1.0, "ccr/cq-bio": 0.0}, 128,
                         later=(created, {"ccr/cq-chem": 3 / 4, "ccr/cq-bio": 1 / 4}))  # fmt: skip
    _check_owed(audit, ref)


def test_a_bad_since_names_the_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "b.yaml"
    bad.write_text(SEVEN.read_text().replace("{path: ccr/bio, share: 1}", "{path: ccr/bio, share: 1, since: soon}"))
    assert main(["import", "slurm", str(SLICE), "--gpus-for-cpu-jobs", "1", "--budgets", str(bad)]) == 2
    assert f"{bad}: nodes[4] (ccr/bio): since = 'soon': expected an ISO 8601 time" in capsys.readouterr().err


def test_a_csv_import_charges_its_budget_paths_and_notes_another_cluster_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    budgets = tmp_path / "lab.yaml"
    budgets.write_text("cluster: {name: lab, gpus: 16}\nnodes:\n  - {path: lab}\n  - {path: lab/vision, share: 2}\n")
    log = tmp_path / "events"
    assert main(["import", "csv", str(DATA / "csv" / "team-export.csv"), "--map",
                 "workload_id=id,submit=submitted,start=started,end=finished,gpus=gpus,budget=team",
                 "--budgets", str(budgets), "--out", str(log)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "lab/vision                               3" in out
    assert "budget lab/speech: 2 workloads, e.g. j2, j4 (no node of the tree is named 'lab')" not in out
    assert "note: the records are of cluster(s) csv, the budgets file of lab" in out
    with EventLog(log, readonly=True) as lg:
        charged = {r["workload_id"]: r["budget"] for name, r in lg.records() if name == "WorkloadSubmitted"}
    assert charged["j1"] == "lab/vision" and charged["j2"] == "lab"  # lab/speech has no node: its parent


def test_philly_jobs_naming_no_virtual_cluster_are_charged_to_the_root_their_path_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the published Philly subset dropped vc and user: every job keeps the path ``philly``
    philly = DATA / "philly" / "jobs-slice.json"
    jobs = len(json.loads(philly.read_text()))
    # (256 GPUs: the slice runs up to 132 at once, and a smaller capacity would be an over_capacity anomaly)
    tree = "cluster: {name: philly, gpus: 256}\nnodes:\n  - {path: ROOT}\n  - {path: ROOT/research}\n"
    named = tmp_path / "philly.yaml"
    named.write_text(tree.replace("ROOT", "philly"))
    log = tmp_path / "events"
    assert main(["import", "philly", str(philly), "--budgets", str(named), "--out", str(log)]) == 0
    out = capsys.readouterr().out
    # a tree rooted at ``philly``: that path is its root node, so the summary counts them charged there
    assert f"  charged:     {jobs} workloads to 1 budget nodes\n    philly{' ' * 35}{jobs}\n" in out
    assert "  unmatched:   0 workloads of 0 accounts" in out
    audit = _audit_json(log, capsys)
    assert audit["anomalies"] == []
    assert {t["budget"] for t in audit["owed_hours"]["teams"] if t["owed_gpu_hours"] > 0} == {"philly"}
    # a tree rooted elsewhere: now they match no node, and the audit does list them as undefined
    other = tmp_path / "msr.yaml"
    other.write_text(tree.replace("ROOT", "msr"))
    log = tmp_path / "msr-events"
    assert main(["import", "philly", str(philly), "--budgets", str(other), "--out", str(log)]) == 0
    out = capsys.readouterr().out
    assert f"  unmatched:   {jobs} workloads of 1 accounts match no node (audited as undefined budgets)" in out
    audit = _audit_json(log, capsys)
    assert sum(1 for a in audit["anomalies"] if a["kind"] == "undefined_budget") == jobs



def _bio_flavors_a_name(docs: list[Any]) -> None:
    docs[2]["spec"]["resourceGroups"][0]["flavors"][0] = "a100"


def _bio_group_a_name(docs: list[Any]) -> None:
    docs[2]["spec"]["resourceGroups"][0] = "cpu"


def _bio_fair_sharing_a_number(docs: list[Any]) -> None:
    docs[2]["spec"]["fairSharing"] = 1


def _bio_resources_a_mapping(docs: list[Any]) -> None:
    docs[2]["spec"]["resourceGroups"][0]["flavors"][0]["resources"] = {"name": "nvidia.com/gpu"}


def _cohort_metadata_a_list(docs: list[Any]) -> None:
    docs[0]["metadata"] = ["ccr"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_bio_flavors_a_name, "ClusterQueue cq-bio: spec.resourceGroups[0].flavors[0] = 'a100': expected a mapping"),
        (_bio_group_a_name, "ClusterQueue cq-bio: spec.resourceGroups[0] = 'cpu': expected a mapping"),
        (_bio_fair_sharing_a_number, "ClusterQueue cq-bio: spec.fairSharing = 1: expected a mapping"),
        (_bio_resources_a_mapping, "ClusterQueue cq-bio: spec.resourceGroups[0].flavors[0].resources = "
                                   "{'name': 'nvidia.com/gpu'}: expected a list"),
        (_cohort_metadata_a_list, "object 0 (Cohort): metadata = ['ccr']: expected a mapping"),
    ],
)
def test_from_kueue_names_the_field_of_a_value_of_the_wrong_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: Any, named: str
) -> None:
    docs = list(yaml.safe_load_all(QUEUES.read_text()))
    change(docs)
    bad = tmp_path / "queues.yaml"
    bad.write_text(yaml.safe_dump_all(docs))
    out = tmp_path / "budgets.yaml"
    assert main(["budgets", "from-kueue", str(bad), "--out", str(out)]) == 2
    assert f"{bad}: {named}" in capsys.readouterr().err
    assert not out.exists()


def _kueue_objects(path: Path, *objs: tuple[str, str, str | None]) -> Path:
    """Write (kind, name, parent) Cohorts and ClusterQueues, each queue with 8 GPUs of nominal quota."""
    docs = []
    for kind, name, parent in objs:
        spec: dict[str, Any] = {}
        if kind == "Cohort" and parent:
            spec["parentName"] = parent
        if kind == "ClusterQueue":
            spec["resourceGroups"] = [{"flavors": [{"name": "a100", "resources": [
                {"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]  # fmt: skip
            if parent:
                spec["cohort"] = parent
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": kind, "metadata": {"name": name}, "spec": spec})
    path.write_text(yaml.safe_dump_all(docs))
    return path


def test_from_kueue_a_queue_may_share_a_cohorts_name_and_a_cohort_cycle_is_named_in_full(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a queue "b" in cohort "a", itself below cohort "b": Kueue keeps the kinds apart, so this is no cycle
    ok = _kueue_objects(tmp_path / "ok.yaml", ("Cohort", "a", "b"), ("ClusterQueue", "b", "a"))
    assert main(["budgets", "from-kueue", str(ok)]) == 0
    assert [n["path"] for n in yaml.safe_load(capsys.readouterr().out)["nodes"]] == ["b", "b/a", "b/a/b"]
    cycle = _kueue_objects(tmp_path / "cycle.yaml", ("Cohort", "a", "b"), ("Cohort", "b", "a"),
                           ("ClusterQueue", "q", "a"))  # fmt: skip
    assert main(["budgets", "from-kueue", str(cycle)]) == 2
    assert f"{cycle}: Cohort a: is its own ancestor (a -> b -> a)" in capsys.readouterr().err
    alone = _kueue_objects(tmp_path / "alone.yaml", ("Cohort", "a", None))
    assert main(["budgets", "from-kueue", str(alone)]) == 2
    assert f"{alone}: no ClusterQueue object found" in capsys.readouterr().err


def test_from_kueue_refuses_a_cohort_and_a_queue_that_would_be_one_node(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = _kueue_objects(tmp_path / "both.yaml", ("Cohort", "a", None), ("ClusterQueue", "q", "a"),
                          ("ClusterQueue", "a", None))  # fmt: skip
    out = tmp_path / "budgets.yaml"
    assert main(["budgets", "from-kueue", str(both), "--out", str(out)]) == 2
    assert f"{both}: Cohort a and ClusterQueue a both stand for budget node 'a'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("rows", "named"),
    [
        (["c|x|root||1|", "c|a|b||1|", "c|b|a||1|"], "assoc.txt:4: account 'a': is its own ancestor (a -> b -> a)"),
        (["c|a|a||1|"], "assoc.txt:3: account 'a': is its own ancestor (a -> a)"),
        (["c|chem|root||1|", "c|calla|chem||1|", "c|chem||calla|1|"],
         "assoc.txt:5: user 'calla' of account 'chem' has the name of a sub-account of it"),
        ([], "assoc.txt: the association tree has no account below root"),
    ],
)
def test_from_slurm_refuses_a_tree_it_cannot_write_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], rows: list[str], named: str
) -> None:
    assoc = tmp_path / "assoc.txt"
    assoc.write_text("\n".join(["Cluster|Account|Par Name|User|Share|GrpTRES", "c|root|||1|", *rows]) + "\n")
    out = tmp_path / "budgets.yaml"
    assert main(["budgets", "from-slurm", str(assoc), "--gpus", "8", "--out", str(out)]) == 2
    assert f"{tmp_path}/{named}" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize(
    ("weight", "share"), [("1e3", 1000.0), ("2E-1", 0.2), ("+3", 3.0), ("1Ki", 1024.0), (".5", 0.5)]
)
def test_from_kueue_reads_a_weight_in_any_form_of_kubernetes_quantity(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], weight: str, share: float
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES.read_text().replace('weight: "3"', f'weight: "{weight}"'))
    assert main(["budgets", "from-kueue", str(path)]) == 0
    shares = {n["path"]: n["share"] for n in yaml.safe_load(capsys.readouterr().out)["nodes"]}
    assert shares["ccr/cq-chem"] == pytest.approx(share)


@pytest.mark.parametrize("weight", ['"1e400"', '"' + "9" * 400 + '"', "9" * 400])
def test_from_kueue_refuses_a_weight_no_number_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], weight: str
) -> None:
    path = tmp_path / "queues.yaml"
    path.write_text(QUEUES.read_text().replace('weight: "3"', f"weight: {weight}"))
    assert main(["budgets", "from-kueue", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}: ClusterQueue cq-chem: spec.fairSharing.weight = " in err and "too large" in err
