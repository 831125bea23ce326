"""The compiled build of the decision core and the replay driver; everything else is in pyproject.toml.

Where a C compiler and the Python headers are present, ``pip install .`` (and ``make``) compiles
the hot modules of ``ledger/core``, the replay's clock and log writer (``ledger/replay``) and the log's
Avro byte helpers and record encoders (``ledger/log``; the encoders are first generated from
``schemas/*.avsc`` into ``ledger/log/avro_records.py``) to C extensions with mypyc, from the same
sources: the same decisions and the same logs, byte for byte.
Without a compiler it installs pure Python and says so in one line. ``GPULEDGER_COMPILE=0`` asks for
the pure build. Once every compiled module is in place, ``_compiled.json`` goes next to them: the
sha256 of each source compiled. At import a package whose sources differ from it (or that has none,
as while a build is under way) runs its sources instead (``ledger/buildcheck.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # for ledger.buildcheck, in any build backend

from ledger.buildcheck import COMPILED_PACKAGES, MANIFEST, compiler_missing, manifest_for, write_generated


def _notice(text: str) -> None:
    sys.stderr.write(f"gpuledger: {text}\n")


# package -> the manifest of the sources as compiled (taken before mypyc reads them)
_COMPILED: dict[str, dict[str, str]] = {}


class _BuildExt(build_ext):
    """build_ext that records what it compiled only once the compiled modules are all in place."""

    def run(self) -> None:
        for package in _COMPILED:
            # no record while building: a half-built package (new shims, old shared library) runs its sources
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(*package.split("."), MANIFEST))
        super().run()
        for package, manifest in _COMPILED.items():
            here = os.path.join(*package.split("."))
            for where in {os.path.join(self.build_lib, here), *([here] if self.inplace or self.editable_mode else [])}:
                os.makedirs(where, exist_ok=True)
                with open(os.path.join(where, MANIFEST), "w") as f:
                    json.dump(manifest, f, indent=1, sort_keys=True)


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
        _notice(f"installing the pure Python build: {why} (the same decisions, two to three times as slow)")
        return []
    # the log's record encoders, generated from schemas/*.avsc: written before they are hashed and compiled
    write_generated(os.path.dirname(os.path.abspath(__file__)))
    extensions: list[object] = []
    for package, modules in COMPILED_PACKAGES.items():
        here = package.replace(".", "/")
        # the sources as compiled: an edited source no longer matches and the package runs the sources
        _COMPILED[package] = manifest_for(here, modules)
        # one shared library per package (e.g. ledger/core/_native__mypyc*.so) and a small shim per module
        paths = [f"{here}/{name}.py" for name in modules]
        # only the compiled modules must type-check here: the modules they import are read for their
        # types but not judged, and an ignore that only the full environment needs is no error (an
        # isolated build has mypy and pydantic, not numpy or fastavro's types)
        options = ["--follow-imports=silent", "--no-warn-unused-ignores", *paths]
        extensions += mypycify(options, opt_level="3", group_name=f"{package}._native")
    return extensions


setup(
    ext_modules=_extensions(),
    cmdclass={"build_ext": _BuildExt},
    # the shared libraries and the shims compile side by side
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)
