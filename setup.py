"""Optional compiled build of the decision core; everything else is in pyproject.toml.

By default gpuledger installs as pure Python. With ``GPULEDGER_COMPILE=1`` the hot modules of
``ledger/core`` are compiled to C extensions with mypyc (from the ``mypy`` package, which must
already be installed: build with ``--no-build-isolation``, as ``make fast`` does). The compiled
modules make exactly the same decisions, byte for byte (see README, "Decision core").
"""

from __future__ import annotations

import os

from setuptools import setup

# the modules worth compiling: every module of the core but the package's ``__init__`` and
# ``knobs`` (a frozen dataclass read once per run; it stays Python)
CORE = [
    "contract", "fairshare", "occupancy", "placement", "policies", "preemption", "queues", "reasons",
    "scheduler", "tree",
]


def _extensions() -> list[object]:
    if os.environ.get("GPULEDGER_COMPILE", "") not in ("1", "true", "yes"):
        return []
    from mypyc.build import mypycify

    paths = [f"ledger/core/{name}.py" for name in CORE]
    # one shared library, ledger/core/_native__mypyc*.so, next to one small shim per module
    return list(mypycify(paths, opt_level="3", group_name="ledger.core._native"))


setup(ext_modules=_extensions())
