"""Write a budgets file from a scheduler's own tree: Slurm associations or Kueue cohorts and cluster queues.

  gpuledger budgets from-slurm ASSOC_FILE (--gpus N | --sinfo SINFO_FILE) [--cluster NAME] [--out FILE]
  gpuledger budgets from-kueue FILE [--gpus N] [--cluster NAME] [--gpu-resource nvidia.com/gpu] [--out FILE]

ASSOC_FILE: ``sacctmgr --parsable2 show assoc format=Cluster,Account,ParentName,User,Fairshare,GrpTRES``
(or the default columns). SINFO_FILE: ``sinfo -o '%n %G'``. FILE: Kueue Cohort and ClusterQueue
objects, YAML or JSON. The budgets file goes to standard output (or --out), with what was read
as comments at its top; give it to ``gpuledger import ... --budgets`` or ``gpuledger audit --budgets``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ledger.errors import ConfigError


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument("source", choices=("from-slurm", "from-kueue"), help="what the file holds")
    p.add_argument("file", metavar="FILE", help="sacctmgr show assoc output, or Kueue objects")
    p.add_argument("--gpus", type=int, metavar="N", help="cluster capacity in GPUs")
    p.add_argument("--gpus-per-node", type=int, default=8, metavar="N", help="GPUs per host (default 8)")
    p.add_argument("--sinfo", metavar="FILE", help="from-slurm: sinfo -o '%%n %%G' output giving the capacity")
    p.add_argument("--cluster", help="cluster name (from-slurm: the one to read when the file has several; "
                   "from-kueue: default kueue)")
    p.add_argument("--gpu-resource", default="nvidia.com/gpu", help="from-kueue: resource counted as GPUs")
    p.add_argument("--out", metavar="FILE", help="write the budgets file here instead of standard output")
    p.add_argument("--force", action="store_true", help="replace an existing --out file (never one it reads)")


def run(args: argparse.Namespace) -> int:
    """Read the scheduler's tree and write the budgets file."""
    import yaml

    from ledger.adapters.sacctmgr import read_text
    from ledger.budgets import parse_budgets

    if args.gpus is not None and args.gpus < 1:
        raise ConfigError(f"--gpus {args.gpus}: must be at least 1")
    if args.gpus_per_node < 1:
        raise ConfigError(f"--gpus-per-node {args.gpus_per_node}: must be at least 1")
    if args.out:  # checked before anything is read: a bad --out is one line, and never an input
        from ledger.commands._paths import output_file

        output_file(args.out, force=args.force, inputs=[args.file] + ([args.sinfo] if args.sinfo else []))
    text = read_text(args.file)
    if args.source == "from-slurm":
        from ledger.adapters.sacctmgr import parse_sacctmgr, parse_sinfo, slurm_budgets

        tree = parse_sacctmgr(text, args.file, args.cluster)
        gpus, per_node = args.gpus, args.gpus_per_node
        where = "--gpus"
        if gpus is None and args.sinfo:
            gpus, per_node = parse_sinfo(read_text(args.sinfo), args.sinfo)
            where = f"sinfo {args.sinfo}"
        elif gpus is None and tree.root_gpus:
            gpus, where = tree.root_gpus, "the root association's GrpTRES"
        if gpus is None:
            raise ConfigError(f"{args.file}: no capacity: give --gpus N or --sinfo FILE (sinfo -o '%n %G')")
        budgets, notes = slurm_budgets(tree, gpus, per_node)
        head = [f"from sacctmgr associations in {Path(args.file).name} (cluster {tree.cluster}); "
                f"capacity from {where}"]
    else:
        from ledger.adapters.kueue_tree import kueue_budgets, parse_kueue_objects

        ktree = parse_kueue_objects(text, args.file, args.gpu_resource)
        budgets, notes = kueue_budgets(ktree, args.cluster or "kueue", args.gpus, args.gpus_per_node)
        head = [f"from Kueue Cohorts and ClusterQueues in {Path(args.file).name}"]
    body = budgets.to_yaml()
    parse_budgets(yaml.safe_load(body), "<generated budgets>")  # what is written must load back
    out = "".join(f"# {line}\n" for line in head + notes) + body
    if args.out:
        Path(args.out).write_text(out, encoding="utf-8")
        print(f"wrote {args.out}: {len(budgets.nodes)} nodes, {budgets.gpus} GPUs", file=sys.stderr)
    else:
        sys.stdout.write(out)
    return 0
