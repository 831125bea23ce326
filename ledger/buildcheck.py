"""Which build runs: the compiled modules (mypyc, built by default) only where they match their sources.

``setup.py`` compiles the hot modules of ``ledger.core``, ``ledger.replay`` and ``ledger.log`` with mypyc
wherever a C compiler and the Python headers are present (first writing ``GENERATED``, the log's record
encoders generated from the schemas), and writes next to them ``_compiled.json``: the sha256 of every
source it compiled. Before each of the three packages first loads, ``use_sources_where_stale`` runs
(a finder ``ledger/__init__`` installs calls it):
if a source no longer matches what was compiled (an edit in an editable install, a checkout of
another commit), or ``GPULEDGER_PURE=1`` is set, the package loads every module from its ``.py``
files instead, so it never runs code as it was rather than as it reads; a stale build says so in one
line on stderr. ``python -m ledger.buildcheck`` prints which build is in use and exits 1 when the
compiled modules should be (re)built (``make`` then rebuilds them).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, SOURCE_SUFFIXES, FileFinder, ModuleSpec, SourceFileLoader
from types import ModuleType

__all__ = [
    "COMPILED_PACKAGES",
    "GENERATED",
    "MANIFEST",
    "compiled_modules",
    "compiler_missing",
    "generated_source",
    "generated_stale",
    "manifest_for",
    "pure_requested",
    "stale_modules",
    "use_sources_where_stale",
    "write_generated",
]

MANIFEST = "_compiled.json"
# the packages setup.py compiles, and which of their modules (setup.py reads this list)
COMPILED_PACKAGES: dict[str, tuple[str, ...]] = {
    "ledger.core": (
        "contract", "fairshare", "occupancy", "placement", "policies", "preemption", "queues", "reasons",
        "rooms", "scheduler", "tree", "walk", "progress", "grace", "wakeups", "holds", "lanes", "roster", "pool",
        "passes", "outputs", "state", "fill", "held", "demand", "verdicts",
    ),
    "ledger.replay": ("driver", "logwriter"),
    "ledger.log": ("avro_bytes", "avro_records"),
}
# modules the build writes before compiling them, never edited by hand: ledger/log/avro_records.py,
# the log's record encoders generated from schemas/*.avsc (ledger/log/avro_codegen.py)
GENERATED = ("ledger/log/avro_records.py",)
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generated_source(root: str = _ROOT) -> str:
    """Return ledger/log/avro_records.py as the schemas of the checkout at ``root`` generate it now.

    Loads ``ledger/log/avro_codegen.py`` by its path: a build has pydantic (for the catalogue's
    order, which is the union's) but not fastavro, which importing ``ledger.log`` needs.
    """
    path = os.path.join(root, "ledger", "log", "avro_codegen.py")
    spec = importlib.util.spec_from_file_location("_gpuledger_avro_codegen", path)
    assert spec is not None and spec.loader is not None
    codegen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(codegen)
    from ledger.events import EVENT_TYPES

    # the checkout's schemas/, or ledger/schemas where a wheel installed them (as ledger.codec looks)
    folder = os.path.join(root, "schemas")
    if not os.path.isdir(folder):
        folder = os.path.join(root, "ledger", "schemas")
    schemas = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".avsc"):
            with open(os.path.join(folder, name), encoding="utf-8") as f:
                schema = json.load(f)
            schemas[schema["name"]] = schema
    source: str = codegen.module_source([schemas[name] for name in EVENT_TYPES])
    return source


def generated_stale(root: str = _ROOT) -> list[str]:
    """Return the generated modules (paths from ``root``) that are missing or differ from what the schemas give."""
    stale = []
    for relative in GENERATED:
        try:
            with open(os.path.join(root, relative), encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != generated_source(root):
            stale.append(relative)
    return stale


def write_generated(root: str = _ROOT) -> None:
    """Write the generated modules of the checkout at ``root`` where they differ from what the schemas give."""
    for relative in generated_stale(root):
        with open(os.path.join(root, relative), "w", encoding="utf-8") as f:
            f.write(generated_source(root))


def pure_requested() -> bool:
    """Return True if ``GPULEDGER_PURE`` asks for the Python sources even where compiled modules exist."""
    return os.environ.get("GPULEDGER_PURE", "").lower() in ("1", "true", "yes")


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def manifest_for(here: str, modules: Sequence[str]) -> dict[str, str]:
    """Return the manifest setup.py writes for ``modules`` of directory ``here``: module -> sha256 of its source."""
    return {name: _sha256(os.path.join(here, f"{name}.py")) for name in modules}


def compiled_modules(here: str) -> list[str]:
    """Return the modules of directory ``here`` that have both a compiled shim and a source."""
    found = []
    for name in sorted(os.listdir(here)):
        for suffix in EXTENSION_SUFFIXES:
            if name.endswith(suffix) and os.path.exists(os.path.join(here, name[: -len(suffix)] + ".py")):
                found.append(name[: -len(suffix)])
    return found


def stale_modules(here: str) -> list[str]:
    """Return the compiled modules of directory ``here`` whose source differs from the one they were built from."""
    built = compiled_modules(here)
    if not built:
        return []
    try:
        with open(os.path.join(here, MANIFEST)) as f:
            recorded: dict[str, str] = json.load(f)
    except (OSError, ValueError):
        return built  # no record of what was compiled: trust none of it
    return [name for name in built if recorded.get(name) != _sha256(os.path.join(here, f"{name}.py"))]


class _Sources(MetaPathFinder):
    """A meta path finder: every submodule of one package from its ``.py`` file, never a compiled one."""

    def __init__(self, package: str) -> None:
        self.prefix = package + "."

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if not name.startswith(self.prefix) or not path:
            return None
        return FileFinder(path[0], (SourceFileLoader, SOURCE_SUFFIXES)).find_spec(name, target)


def use_sources_where_stale(package: str, here: str) -> bool:
    """Load all of ``package`` (directory ``here``) from source if asked to or if a compiled module is stale.

    Called before the package imports a submodule (by ``ledger/__init__``'s finder). Returns True when the
    sources are used although compiled modules exist. The whole package switches, not single
    modules: a compiled module expects its compiled neighbours.
    """
    if not compiled_modules(here):
        return False
    stale = [] if pure_requested() else stale_modules(here)
    if not (stale or pure_requested()):
        return False
    if stale:
        sys.stderr.write(
            f"gpuledger: {package}'s compiled modules were built from other sources "
            f"({', '.join(s + '.py' for s in stale)} changed); running the Python sources instead "
            "(`make` rebuilds them, `make pure` removes them)\n"
        )
    sys.meta_path.insert(0, _Sources(package))
    return True


def compiler_missing() -> str | None:
    """Return why no C extension can be built here (no compiler, no Python headers), or None if one can."""
    include = sysconfig.get_paths()["include"]
    if not os.path.exists(os.path.join(include, "Python.h")):
        return f"no Python headers ({include}/Python.h)"
    cc = shlex.split(os.environ.get("CC") or str(sysconfig.get_config_var("CC") or "cc"))
    with tempfile.TemporaryDirectory(prefix="gpuledger-cc-") as tmp:
        source = os.path.join(tmp, "probe.c")
        with open(source, "w") as f:
            f.write("#include <Python.h>\nint probe(void) { return Py_IsInitialized(); }\n")
        try:
            done = subprocess.run(
                [*cc, "-I", include, "-c", source, "-o", os.path.join(tmp, "probe.o")],
                capture_output=True, text=True, check=False,
            )
        except OSError as exc:
            return f"no C compiler ({cc[0]}: {exc.strerror})"
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["exit status " + str(done.returncode)])[0]
        return f"the C compiler failed ({cc[0]}: {first})"
    return None


def status(root: str = _ROOT) -> tuple[str, bool]:
    """Return a one-line description of the build in the checkout at ``root``, and whether to (re)build it."""
    missing, stale = [], []
    for package, modules in COMPILED_PACKAGES.items():
        here = os.path.join(root, *package.split("."))
        built = compiled_modules(here)
        missing += [f"{package}.{m}" for m in modules if m not in built]
        stale += [f"{package}.{m}" for m in stale_modules(here)]
    # a schema changed since the build: the encoders it generated are no longer used (avro_encode)
    stale += [f"{path} (generated from schemas/*.avsc)" for path in generated_stale(root) if os.path.exists(
        os.path.join(root, path))]
    if not missing and not stale:
        note = " (GPULEDGER_PURE=1 set: running the sources)" if pure_requested() else ""
        return f"gpuledger: compiled build (mypyc) of {', '.join(COMPILED_PACKAGES)}, current{note}", False
    why = compiler_missing()
    if why is not None:
        return f"gpuledger: pure Python build: {why}; the same decisions, two to three times as slow", False
    if stale:
        return f"gpuledger: compiled modules stale ({', '.join(stale)}): rebuild", True
    return f"gpuledger: compiled modules not built ({len(missing)} of them): build", True


def main(argv: Sequence[str]) -> int:
    """Print the build in use; with ``--pure`` report the pure build as chosen; exit 1 if a (re)build is due."""
    if "--pure" in argv:
        print("gpuledger: pure Python build (make pure); `make fast` compiles the hot modules again")
        return 0
    line, rebuild = status()
    print(line)
    return 1 if rebuild else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
