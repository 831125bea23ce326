"""Replay one input under several settings, in a pool of processes: ``compare``'s runs (and ``demo``'s).

Each setting is one replay into its own run directory, audited there; the runs share nothing but
the inputs, so running them side by side gives the same directories and audits, byte for byte, as
running them one by one. Workers are forked: they inherit the inputs instead of receiving a copy.
One line per run goes to stderr when it ends (progress bars would garble each other).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from ledger.commands._runs import run_one
from ledger.core.knobs import Knobs
from ledger.replay.run import ReplayInputs

__all__ = ["default_jobs", "run_settings"]

_INPUTS: ReplayInputs | None = None  # a worker's inputs, inherited from the parent at fork


def default_jobs() -> int:
    """Return the number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _adopt(inputs: ReplayInputs) -> None:
    global _INPUTS
    _INPUTS = inputs


def _run(knobs: Knobs, out_dir: Path, label: str, until: datetime | None) -> dict[str, Any]:
    assert _INPUTS is not None, "a worker starts with the inputs"
    return run_one(_INPUTS, knobs, out_dir, quiet=True, label=label, until=until)


def _line(stream: TextIO, done: int, total: int, label: str, result: dict[str, Any]) -> None:
    info = result["replay"]
    stream.write(
        f"[{done}/{total}] {label}: {info['events']:,} events, {info['simulated_days']:g} days "
        f"replayed in {info['wall_s']:.1f} s\n"
    )
    stream.flush()


def run_settings(
    inputs: ReplayInputs,
    settings: Sequence[tuple[Knobs, str, Path]],
    *,
    jobs: int,
    quiet: bool,
    until: datetime | None = None,
    stream: TextIO | None = None,
) -> list[dict[str, Any]]:
    """Replay ``inputs`` under each (knobs, label, run directory), ``jobs`` at a time; return results in order.

    With one job (or one setting) the runs go one after the other in this process, each with its
    progress bar; otherwise in ``jobs`` forked workers, one line per finished run.
    """
    stream = stream if stream is not None else sys.stderr
    total = len(settings)
    if jobs <= 1 or total <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        results = []
        for knobs, label, out_dir in settings:
            results.append(run_one(inputs, knobs, out_dir, quiet=quiet, label=label, until=until))
        return results
    jobs = min(jobs, total)
    if not quiet:
        stream.write(f"replaying {total} settings, {jobs} at a time\n")
        stream.flush()
    t0 = time.perf_counter()
    found: list[dict[str, Any] | None] = [None] * total
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=_adopt, initargs=(inputs,)) as pool:
        pending: dict[Future[dict[str, Any]], int] = {
            pool.submit(_run, knobs, out_dir, label, until): i for i, (knobs, label, out_dir) in enumerate(settings)
        }
        done = 0
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                i = pending.pop(future)
                try:
                    found[i] = future.result()
                except BaseException:  # a run's error ends the command, as it would one by one
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
                done += 1
                if not quiet:
                    _line(stream, done, total, settings[i][1], found[i] or {})
    if not quiet:
        stream.write(f"{total} replays in {time.perf_counter() - t0:.1f} s wall\n")
    return [r for r in found if r is not None]
