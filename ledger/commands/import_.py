"""Turn scheduler records (Slurm sacct, Philly attempts, any CSV, Kueue) into ledger events.

  gpuledger import slurm  FILE [FILE ...] --out LOG_DIR [--tz ZONE] [--cluster NAME] [--gpus-for-cpu-jobs N]
  gpuledger import philly FILE --out LOG_DIR [--tz America/Los_Angeles] [--cluster philly]
  gpuledger import csv    FILE --map workload_id=COL,submit=COL,gpus=COL,... [--epoch ISO_TIME] --out LOG_DIR
  gpuledger import kueue  FILE --out LOG_DIR [--cluster NAME] [--gpu-resource nvidia.com/gpu]

Prints an import summary per file: rows read, workloads, events by type, rows skipped by
reason, and rejected records (file:line: reason). Malformed records are skipped and listed;
with --strict any malformed record refuses the whole import and nothing is written.
Importing a file twice adds nothing: event ids are derived from the source records.
A file that holds no record, or whose every record is rejected, makes the exit code 1 (the other
files are still appended); when no file gives an event, no log is created.
Without --out nothing is written (a dry run that prints the summary).

With --budgets FILE each workload is charged to the deepest node of the file's tree it belongs to
(``ledger.adapters.charging``), the summary lists those that match none by account, and the tree
and capacity go into the log as events at the start of the imported period.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ledger.errors import ConfigError, InputError

FORMATS = ("slurm", "philly", "csv", "kueue")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Register this command's flags."""
    p.add_argument("format", choices=FORMATS, help="what the files hold")
    p.add_argument("files", nargs="+", metavar="FILE", help="files to import")
    p.add_argument("--out", metavar="LOG_DIR", help="embedded event log (or run directory) to append to")
    p.add_argument("--budgets", metavar="FILE",
                   help="budgets file (YAML/JSON): charge each record to its deepest tree node and add the tree and "
                        "capacity as events, timed at the start of the imported period")
    p.add_argument("--strict", action="store_true", help="refuse the whole import if any record is malformed")
    p.add_argument("--cluster", help="cluster name (default: the file's own, else slurm/philly/kueue/csv)")
    p.add_argument("--tz", help="zone of times without an offset (default UTC; philly: America/Los_Angeles)")
    p.add_argument("--min-runtime", default="1h",
                   help="protected minimum runtime given to imported jobs (slurm: cut to a shorter time limit; "
                        "default 1h)")
    g = p.add_argument_group("slurm")
    g.add_argument("--gpus-for-cpu-jobs", type=int, default=0, metavar="N",
                   help="import jobs without GPUs as N-GPU workloads (default 0: skip and count them)")
    g.add_argument("--resumable", action="store_true", help="mark imported jobs resumable (requeued ones always are)")
    g = p.add_argument_group("csv")
    g.add_argument("--map", dest="column_map", metavar="FIELD=COL,...",
                   help="ledger field -> CSV column: workload_id, submit, start, end, duration, gpus, budget, user, "
                        "outcome, priority, kind, min_runtime")
    g.add_argument("--epoch", metavar="ISO_TIME", help="times are seconds relative to this instant")
    g.add_argument("--delimiter", default=",", help="CSV field separator (default ',')")
    g.add_argument("--budget", default=None, help="budget path for rows without a budget column")
    g = p.add_argument_group("kueue")
    g.add_argument("--gpu-resource", default="nvidia.com/gpu", help="resource name counted as GPUs")


def _checked(path: str) -> str:
    """Return ``path`` if it names a readable text file; raise InputError saying what it is otherwise."""
    from ledger.commands._paths import input_file

    input_file(path, "file to import")
    with open(path, "rb") as fh:
        head = fh.read(8192)
    if b"\0" in head:  # no scheduler export holds NUL bytes: this is a binary file, not a bad record
        raise InputError(f"{path}: not a text file (it holds NUL bytes); expected a scheduler export")
    return path


def _import_one(args: argparse.Namespace, path: str, to: Any) -> Any:
    import csv

    try:
        return _import_file(args, _checked(path), to)
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except csv.Error as exc:
        raise InputError(f"{path}: not a CSV file this import can read ({exc})") from None


def _import_file(args: argparse.Namespace, path: str, to: Any) -> Any:
    from ledger.adapters.common import parse_zone
    from ledger.core.knobs import parse_duration

    cluster = args.cluster
    if args.format == "slurm":
        from ledger.adapters.slurm import SlurmOptions, import_sacct_file

        if args.gpus_for_cpu_jobs < 0:
            raise ConfigError(f"--gpus-for-cpu-jobs {args.gpus_for_cpu_jobs}: must be 0 or more")
        opts = SlurmOptions(
            tz=parse_zone(args.tz or "UTC"),
            cluster=cluster,
            gpus_for_cpu_jobs=args.gpus_for_cpu_jobs,
            min_runtime_s=parse_duration(args.min_runtime),
            resumable=args.resumable,
        )
        return import_sacct_file(path, opts, to)
    if args.format == "philly":
        from ledger.adapters.philly import PhillyOptions, import_philly_file

        return import_philly_file(
            path,
            PhillyOptions(
                tz=parse_zone(args.tz or "America/Los_Angeles"),
                cluster=cluster or "philly",
                min_runtime_s=parse_duration(args.min_runtime),
            ),
            to,
        )
    if args.format == "csv":
        from ledger.adapters.csv_trace import CsvOptions, import_csv_file, parse_column_map

        if not args.column_map:
            raise ConfigError("import csv needs --map FIELD=COLUMN,... (at least workload_id, submit and gpus)")
        return import_csv_file(
            path,
            CsvOptions(
                columns=parse_column_map(args.column_map),
                tz=parse_zone(args.tz or "UTC"),
                epoch=args.epoch,
                cluster=cluster or "csv",
                budget=args.budget,
                delimiter=args.delimiter,
                min_runtime_s=parse_duration(args.min_runtime),
            ),
            to,
        )
    from ledger.adapters.kueue import KueueOptions, import_kueue_file

    return import_kueue_file(
        path,
        KueueOptions(
            cluster=cluster or "kueue", gpu_resource=args.gpu_resource, min_runtime_s=parse_duration(args.min_runtime)
        ),
        to,
    )


def run(args: argparse.Namespace) -> int:
    """Import the files, print the summary, append the events to --out."""
    from ledger.adapters.charging import Charge, Charger
    from ledger.adapters.common import Destination
    from ledger.adapters.sink import SORT_KEYS
    from ledger.budgets import load_budgets
    from ledger.commands._paths import output_dir
    from ledger.gcpause import paused_gc
    from ledger.log.batch import EventBatch

    if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
        output_dir(args.out, force=False)  # raises: --out names a file
    if args.out is not None:
        log_dir = Path(args.out).resolve()
        for name in args.files:  # the log is appended to: a file it reads must not be one of its own
            if log_dir in Path(name).resolve().parents:
                raise InputError(f"--out {args.out}: holds the input {name}; import it from outside the log")

    from ledger.allocator import reuse_freed_memory

    reuse_freed_memory()
    budgets = load_budgets(args.budgets) if getattr(args, "budgets", None) else None
    charger = Charger(budgets) if budgets is not None else None
    # Each file's events go into one batch as they are read, the file's section of it (the budget
    # tree takes section 0); the batch keeps about 64 MiB in memory and the rest in sorted runs on disk.
    with paused_gc(), EventBatch(SORT_KEYS) as batch:
        target = batch if args.out is not None else None

        def to(section: int) -> Destination:
            return Destination(target, section, keep=False, charge=Charge(charger) if charger else None)

        results = [_import_one(args, path, to(k)) for k, path in enumerate(args.files, 1)]
        return _report_and_append(args, results, budgets, to(0))


def _report_and_append(args: argparse.Namespace, results: list[Any], budgets: Any, tree_to: Any) -> int:
    for res in results:
        print(res.render())
    if args.strict:
        for res in results:
            res.raise_if_rejected()
    code = 0
    for res in results:
        # the other files are still appended; the exit code says one input gave nothing
        if res.rejected and not res.workloads:
            print(f"gpuledger import: error: {res.file}: every record was rejected ({len(res.rejected)})",
                  file=sys.stderr)
            code = 1
        elif not res.rows_read:  # an empty file, an empty list, a header alone: most likely the wrong file
            print(f"gpuledger import: error: {res.file}: holds no record (an empty {res.kind} export)",
                  file=sys.stderr)
            code = 1
    if budgets is not None:
        from ledger.commands._tree import charge_imports

        tree = charge_imports(results, budgets, args.budgets, tree_to)
        if tree is not None:
            results.insert(0, tree)
    total = sum(sum(res.events_by_type().values()) for res in results)
    if args.out is None:
        print(f"dry run: {total} events, nothing written (give --out LOG_DIR)", file=sys.stderr)
        return code
    if not total:  # opening the log would create it: a directory holding only its lock file
        print(f"nothing written to {args.out} (no events)", file=sys.stderr)
        return code
    from ledger.adapters.sink import append_batch_to_log

    # the adapters checked every value of every record: the log's trusted batch path, one durable block
    added = append_batch_to_log(args.out, tree_to.batch)
    print(f"appended {added} new events to {args.out} ({total - added} already in the log)", file=sys.stderr)
    return code
