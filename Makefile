# Two commands do everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint bench clean build fast pure kafka-jars

# The dependencies, and the package as pure Python; `build` then compiles the hot modules.
$(STAMP): pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	GPULEDGER_COMPILE=0 $(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Compiled by default (mypyc, the same sources; setup.py): rebuilt when a source differs from what
# was compiled, kept pure after `make pure` (until `make fast`); without a C compiler, pure with a
# one-line notice. ledger.buildcheck decides.
build: $(STAMP)
	@if test -f $(VENV)/.pure; then $(PY) -m ledger.buildcheck --pure; \
	elif ! $(PY) -m ledger.buildcheck; then $(MAKE) --no-print-directory fast; fi

demo: build
	$(VENV)/bin/gpuledger demo --out out/demo --force

lint: $(STAMP)
	$(PY) -m ruff check ledger queries streams tests bench  # queries/ and streams/ are linked under ledger/, which ruff does not follow
	$(PY) -m mypy
	$(VENV)/bin/lint-imports

# Two test processes: the Kafka tests (one group, sharing the session's brokers) mostly wait on
# brokers and workers, the rest mostly compute; TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
test: build lint kafka-jars
	$(PY) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadgroup)

# Apache Kafka for the tests and the streaming benchmark: the jars deploy/kafka/pom.xml pins, copied
# by Maven into .kafka/libs once (again only when the pom changes). The tests start KRaft nodes from
# them unless GPULEDGER_KAFKA_BOOTSTRAP names a cluster (docs/streaming.md).
KAFKA_LIBS := .kafka/libs
kafka-jars:
	@if ! cmp -s deploy/kafka/pom.xml $(KAFKA_LIBS)/.pom; then \
	  command -v java >/dev/null 2>&1 || { echo "make kafka-jars: java not found; the test broker is Apache Kafka and needs Java 17 (apt-get install openjdk-17-jre-headless)" >&2; exit 1; }; \
	  command -v mvn >/dev/null 2>&1 || { echo "make kafka-jars: mvn not found; Maven fetches the pinned Kafka jars (apt-get install maven)" >&2; exit 1; }; \
	  rm -rf $(KAFKA_LIBS) && echo "fetching the Kafka jars deploy/kafka/pom.xml pins into $(KAFKA_LIBS)" && \
	  mvn -q -B -f deploy/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS) && \
	  cp deploy/kafka/pom.xml $(KAFKA_LIBS)/.pom; \
	fi

# The whole month replayed with both builds, and a sweep of 8 settings pooled against one by one
# (docs/benchmarks.md); `python -m bench` runs every benchmark.
bench: build
	$(PY) -m bench month sweep

# Compile now (the decision core, the replay driver and its log writer, the log's encoders; docs/benchmarks.md).
fast: $(STAMP)
	rm -f $(VENV)/.pure
	GPULEDGER_COMPILE=1 $(PY) -m pip install --quiet --no-build-isolation --no-deps -e .
	@$(PY) -m ledger.buildcheck

# The pure Python build, kept until `make fast`.
pure:
	mkdir -p $(VENV) && touch $(VENV)/.pure
	rm -f ledger/*/*.so ledger/*/*.pyd ledger/*/_compiled.json

clean:
	rm -rf $(VENV) .kafka out .pytest_cache .mypy_cache .hypothesis build ledger/*/*.so ledger/*/*.pyd ledger/*/_compiled.json \
		ledger/log/avro_records.py
