"""deploy/Dockerfile builds the project from the repository and starts a command the CLI has."""

from __future__ import annotations

import json
import shlex
import tomllib

from tests.deploy.names import DEPLOY, ROOT, check_command, http_port

DOCKERFILE = DEPLOY / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """Return (INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    lines = [ln for ln in DOCKERFILE.read_text(encoding="utf-8").splitlines() if not ln.lstrip().startswith("#")]
    text = "\n".join(lines).replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _args(name: str) -> list[str]:
    (value,) = [rest for word, rest in instructions() if word == name]
    parsed: list[str] = json.loads(value)  # exec form, so signals reach the worker (no shell in between)
    return parsed


def _pyproject() -> dict[str, object]:
    with open(ROOT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def test_base_images_are_pinned() -> None:
    args = dict(rest.split("=", 1) for word, rest in instructions() if word == "ARG" and "=" in rest)
    for word, rest in instructions():
        if word == "FROM":
            image = rest.split()[0]
            image = args.get(image.strip("${}"), image)
            assert ":" in image and not image.endswith(":latest"), f"FROM {image} is not pinned"


def test_every_package_and_its_data_is_copied_into_the_build() -> None:
    copied = set()
    for word, rest in instructions():
        if word == "COPY" and "--from" not in rest:
            *sources, _ = shlex.split(rest)
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: no such path in the repository"
                copied.add(source.rstrip("/"))
    project = _pyproject()
    setuptools = project["tool"]["setuptools"]  # type: ignore[index]
    package_dir = setuptools.get("package-dir", {})
    for package in setuptools["packages"]:
        source = package_dir.get(package, package.replace(".", "/"))
        assert source.split("/")[0] in copied, f"package {package} ({source}) is not copied into the image"
    assert {"pyproject.toml", project["project"]["readme"]} <= copied  # type: ignore[index]


def test_the_image_builds_and_checks_the_compiled_modules() -> None:
    # setup.py compiles the hot modules (mypyc) where a C compiler is present: the build stage has
    # one and the sources setup.py needs; the final stage fails unless the compiled build runs
    steps = instructions()
    starts = [i for i, (word, _) in enumerate(steps) if word == "FROM"]
    assert len(starts) == 2, "a build stage and the image"
    build = steps[starts[0] : starts[1]]
    copied = {s for word, rest in build if word == "COPY" for s in shlex.split(rest)[:-1]}
    assert "setup.py" in copied and "ledger" in copied
    assert any(word == "RUN" and "gcc" in rest.split() for word, rest in build), "no C compiler in the build stage"
    wheel = [rest for word, rest in build if word == "RUN" and "pip wheel" in rest]
    assert wheel and "GPULEDGER_COMPILE=0" not in wheel[0]
    final = [rest for word, rest in steps[starts[1] :] if word == "RUN"]
    assert any("c.COMPILED and r.COMPILED" in rest for rest in final), "the image does not check its build"
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert "ledger/*/*.so" in ignored and "ledger/*/_compiled.json" in ignored  # never a local build's modules


def test_the_entrypoint_is_the_console_script_and_the_default_command_parses() -> None:
    scripts = _pyproject()["project"]["scripts"]  # type: ignore[index]
    entry = _args("ENTRYPOINT")
    assert entry == ["gpuledger"] and "gpuledger" in scripts
    check_command(_args("CMD"), "Dockerfile CMD")


def test_the_exposed_port_is_the_one_the_worker_listens_on() -> None:
    exposed = {int(rest.split("/")[0]) for word, rest in instructions() if word == "EXPOSE"}
    assert exposed == {http_port(_args("CMD"))}


def test_it_runs_as_a_user_that_is_not_root() -> None:
    users = [rest for word, rest in instructions() if word == "USER"]
    assert users and users[-1] not in ("root", "0")


def test_the_build_context_leaves_out_local_environments() -> None:
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text(encoding="utf-8").split()
    assert "**/.venv" in ignored and ".git" in ignored
