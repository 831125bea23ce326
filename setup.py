"""Optional compiled build of the decision core and the replay driver; everything else is in pyproject.toml.

By default gpuledger installs as pure Python. With ``GPULEDGER_COMPILE=1`` the hot modules of
``ledger/core``, and the replay's clock and log writer (``ledger/replay``), are compiled to C
extensions with mypyc (from the ``mypy`` package, which must already be installed: build with
``--no-build-isolation``, as ``make fast`` does). The compiled
modules make exactly the same decisions and write the same logs, byte for byte (see README,
"Decision core" and "Replay").
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
# the replay's clock and its log writer: the per-event work around the core (README "Replay", Speed)
REPLAY = ["driver", "logwriter"]


def _extensions() -> list[object]:
    if os.environ.get("GPULEDGER_COMPILE", "") not in ("1", "true", "yes"):
        return []
    from mypyc.build import mypycify

    paths = [f"ledger/core/{name}.py" for name in CORE]
    # one shared library, ledger/core/_native__mypyc*.so, next to one small shim per module
    core = mypycify(paths, opt_level="3", group_name="ledger.core._native")
    # and one for the replay (ledger/replay/_native__mypyc*.so): `make pure` removes both
    paths = [f"ledger/replay/{name}.py" for name in REPLAY]
    replay = mypycify(paths, opt_level="3", group_name="ledger.replay._native")
    return [*core, *replay]


setup(ext_modules=_extensions())
