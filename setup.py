"""The compiled build of the decision core and the replay driver; everything else is in pyproject.toml.

Where a C compiler and the Python headers are present, ``pip install .`` (and ``make``) compiles
the hot modules of ``ledger/core`` and the replay's clock and log writer (``ledger/replay``) to C
extensions with mypyc, from the same sources: the same decisions and the same logs, byte for byte.
Without a compiler it installs pure Python and says so in one line. ``GPULEDGER_COMPILE=0`` asks for
the pure build. Next to the compiled modules goes ``_compiled.json``, the sha256 of each source
compiled: at import a package whose sources differ runs them instead (``ledger/buildcheck.py``).
"""

from __future__ import annotations

import json
import os
import sys

from setuptools import setup

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for ledger.buildcheck, in any build backend

from ledger.buildcheck import COMPILED_PACKAGES, MANIFEST, compiler_missing, manifest_for


def _notice(text: str) -> None:
    sys.stderr.write(f"gpuledger: {text}\n")


def _extensions() -> list[object]:
    if os.environ.get("GPULEDGER_COMPILE", "1").lower() in ("0", "false", "no"):
        return []
    why = compiler_missing()
    if why is None:
        try:
            from mypyc.build import mypycify
        except ImportError:
            why = "mypyc is not installed (it comes with mypy; pip install mypy, or build with isolation)"
    if why is not None:
        _notice(f"installing the pure Python build: {why} (the same decisions, about twice as slow)")
        return []
    extensions: list[object] = []
    for package, modules in COMPILED_PACKAGES.items():
        here = package.replace(".", "/")
        # the sources as compiled: an edited source no longer matches and the package runs the sources
        with open(f"{here}/{MANIFEST}", "w") as f:
            json.dump(manifest_for(here, modules), f, indent=1, sort_keys=True)
        # one shared library per package (e.g. ledger/core/_native__mypyc*.so) and a small shim per module
        paths = [f"{here}/{name}.py" for name in modules]
        # only the compiled modules must type-check here: the modules they import are read for their
        # types but not judged (an isolated build has mypy and pydantic, not numpy or fastavro's types)
        options = ["--follow-imports=silent", *paths]
        extensions += mypycify(options, opt_level="3", group_name=f"{package}._native")
    return extensions


setup(
    ext_modules=_extensions(),
    # the shared libraries and the shims compile side by side
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
