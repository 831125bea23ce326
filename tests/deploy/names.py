"""What the code really provides, read from the source and the live CLI parser, for checking the deploy files.

The deploy files name commands, flags, topics, ports, endpoints, environment variables and metric
names; each check compares one of them with the code. A few names are chosen by the deploy files
before the worker provides them: they are listed in ``AWAITED`` and checked strictly the other way
round (a test fails as soon as the code provides one, so the list is kept honest).
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CODE_DIRS = ("ledger", "streams", "queries")

# Names the deploy files use that the worker does not provide yet (see the report of the deploy work).
AWAITED: set[str] = set()


def provided(name: str, present: bool) -> None:
    """Fail if a name the deploy files use is missing from the code; xfail it while the worker still owes it."""
    provided_all({name: present})


def provided_all(names: dict[str, bool]) -> None:
    """Check several names at once: fail on any missing one not awaited, then xfail if some are still awaited."""
    missing = [n for n, present in names.items() if not present and n not in AWAITED]
    assert not missing, f"deploy files name {missing}, which the code does not provide"
    arrived = [n for n, present in names.items() if present and n in AWAITED]
    if arrived:
        pytest.fail(f"{arrived} now provided by the code: remove from AWAITED in tests/deploy/names.py")
    awaited = [n for n, present in names.items() if not present]
    if awaited:
        pytest.xfail(f"awaited from the worker: {awaited}")


def load_yaml(path: Path) -> Any:
    """Parse one YAML document."""
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def load_yaml_all(path: Path) -> list[Any]:
    """Parse every YAML document of a file."""
    with open(path, encoding="utf-8") as fh:
        return [d for d in yaml.safe_load_all(fh) if d is not None]


def python_files() -> Iterator[Path]:
    """Yield the project's Python sources (not tests)."""
    for folder in CODE_DIRS:
        yield from sorted((ROOT / folder).rglob("*.py"))


@cache
def _trees() -> tuple[tuple[Path, ast.Module], ...]:
    return tuple((p, ast.parse(p.read_text(encoding="utf-8"), filename=str(p))) for p in python_files())


@cache
def string_literals() -> frozenset[str]:
    """Return every string constant in the project's code (including those inside f-strings)."""
    out: set[str] = set()
    for _, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return frozenset(out)


def in_code(text: str) -> bool:
    """Return whether a string constant of the code equals ``text``."""
    return text in string_literals()


@cache
def called_names() -> frozenset[str]:
    """Return the names of everything called in the code (``f(...)`` and ``x.f(...)``), outside its own module."""
    out: set[str] = set()
    for _, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute):
                    out.add(func.attr)
                    if isinstance(func.value, ast.Name):
                        out.add(func.value.id)
                elif isinstance(func, ast.Name):
                    out.add(func.id)
    return frozenset(out)


_METRIC_TYPES = {"Counter", "Gauge", "Histogram", "Summary", "Info", "Enum"}
_SUFFIXES = {
    "Counter": ("_total", "_created"),
    "Gauge": ("",),
    "Histogram": ("_bucket", "_count", "_sum", "_created"),
    "Summary": ("", "_count", "_sum", "_created"),
    "Info": ("_info",),
    "Enum": ("",),
}


@dataclass(frozen=True)
class Metric:
    """One Prometheus metric the code registers: the names it exposes and its labels."""

    kind: str
    name: str
    labels: tuple[str, ...]

    def exposed(self) -> set[str]:
        """Return the sample names Prometheus sees."""
        base = self.name.removesuffix("_total") if self.kind == "Counter" else self.name
        return {base + suffix for suffix in _SUFFIXES[self.kind]}


def _const_str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


@cache
def registered_metrics() -> tuple[Metric, ...]:
    """Return the prometheus_client metrics constructed in the code (names given as string constants)."""
    out = []
    for _, tree in _trees():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            kind = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if kind not in _METRIC_TYPES:
                continue
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            name = _const_str(node.args[0] if node.args else kw.get("name"))
            if name is None:
                continue
            prefix = [_const_str(kw.get(k)) for k in ("namespace", "subsystem")]
            full = "_".join([p for p in prefix if p] + [name])
            label_node = node.args[2] if len(node.args) > 2 else kw.get("labelnames")
            labels: tuple[str, ...] = ()
            if isinstance(label_node, ast.List | ast.Tuple):
                labels = tuple(v for v in (_const_str(e) for e in label_node.elts) if v)
            out.append(Metric(kind, full, labels))
    return tuple(out)


def metric_named(sample: str) -> Metric | None:
    """Return the registered metric that exposes the sample name, if any."""
    for metric in registered_metrics():
        if sample in metric.exposed():
            return metric
    return None


@cache
def cli() -> argparse.ArgumentParser:
    """Return the real ``gpuledger`` argument parser."""
    from ledger.cli import build_parser

    return build_parser()


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Return the parser of every ``gpuledger`` subcommand by name."""
    for action in cli()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("gpuledger has no subcommands")


def option_strings(command: str) -> set[str]:
    """Return every flag of one subcommand."""
    return {s for a in subcommands()[command]._actions for s in a.option_strings}


def flags_in(args: list[str]) -> list[str]:
    """Return the ``--flag`` words of an argument list (``--flag=value`` gives ``--flag``)."""
    return [a.split("=", 1)[0] for a in args if a.startswith("--")]


def flag_value(args: list[str], flag: str) -> str | None:
    """Return the value given to a flag in an argument list."""
    for i, a in enumerate(args):
        if a == flag and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def check_command(args: list[str], where: str) -> None:
    """Check a ``gpuledger`` argument list against the real CLI: subcommand, every flag, and that it parses."""
    assert args, f"{where}: empty command"
    command = args[0]
    assert command in subcommands(), f"{where}: gpuledger has no subcommand {command!r}"
    known = option_strings(command)
    provided_all({f"flag:{flag}": flag in known for flag in flags_in(args[1:])})
    try:
        cli().parse_args(args)
    except SystemExit as exc:
        raise AssertionError(f"{where}: `gpuledger {' '.join(args)}` does not parse") from exc


def http_port(args: list[str]) -> int:
    """Return the port of the worker's ``--http HOST:PORT`` in an argument list (the CLI default if absent)."""
    value = flag_value(args, "--http") or subcommands()["worker"].get_default("http")
    return int(str(value).rpartition(":")[2])


_K8S_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def k8s_expanded(args: list[str]) -> set[str]:
    """Return the variables a Kubernetes container expands in its args (``$(NAME)``)."""
    return {m for a in args for m in _K8S_VAR.findall(a)}


def expand_k8s(args: list[str], env: dict[str, str]) -> list[str]:
    """Return args with ``$(NAME)`` replaced from env, as the kubelet does."""
    return [_K8S_VAR.sub(lambda m: env[m.group(1)], a) for a in args]


def script_reads(path: Path) -> set[str]:
    """Return the environment variables a shell script reads (``$NAME`` or ``${NAME...}``)."""
    text = path.read_text(encoding="utf-8")
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    return set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", code))
