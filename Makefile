# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean fast pure

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/gpuledger demo --out out/demo --force

lint: $(STAMP)
	$(PY) -m ruff check ledger queries streams tests bench
	$(PY) -m mypy

test: $(STAMP) lint
	$(PY) -m pytest

bench: $(STAMP)
	$(PY) -m bench

# Opt-in: the decision core and the replay driver compiled with mypyc (the same decisions, faster;
# README "Decision core", "Replay").
fast: $(STAMP)
	$(PY) -m pip install --quiet 'setuptools>=68' wheel
	GPULEDGER_COMPILE=1 $(PY) -m pip install --quiet --no-build-isolation --no-deps -e .

pure:
	rm -f ledger/core/*.so ledger/core/*.pyd ledger/replay/*.so ledger/replay/*.pyd

clean:
	rm -rf $(VENV) out .pytest_cache .mypy_cache .hypothesis build ledger/core/*.so ledger/core/*.pyd ledger/replay/*.so ledger/replay/*.pyd
