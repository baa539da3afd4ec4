# Every target sets itself up: a venv in .venv with the pinned versions of
# requirements.txt, and the package installed in editable mode.
#   make impala      the main job: IMPALA on CartPole (ARGS="--flag=..." to change)
#   make test        the style gate, then the test suite (what CI runs)
#   make lint        the style gate alone: ruff (lint, format) and mypy
#   make test-all    including tests marked slow
#   make bench-build the build-overhead benchmark (full run)
#   make bench-memory the memory benchmark (full run: ~10 min, ~9 GiB RAM)
#   make bench-export the export benchmark (full run: ~8 min, ~12 GiB RAM)
#   make bench-impala the IMPALA throughput benchmark (full run: ~10 min)
#   make bench-ppo   the PPO throughput benchmark against a CleanRL-style
#                    PyTorch PPO (full run: ~10 min)
#   make fuzz        the long fuzz campaign of every root API (~20 min)
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export OMP_WAIT_POLICY ?= PASSIVE
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: venv impala lint test test-all bench-build bench-memory \
    bench-export bench-impala bench-ppo bench-quick fuzz clean

# No byte-compiling at install (pip's is serial, of every file): Python
# compiles the modules a run imports, once, on first import. Of the venv's
# ~17,000 files, TF's 1,850 alone take ~12 CPU s to compile here.
$(STAMP): requirements.txt requirements-nodeps.txt setup.py pyproject.toml \
    $(wildcard ingraph_rl/ops/*.cc)
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --no-compile -r requirements.txt
	$(PY) -m pip install -q --no-compile --no-deps -r requirements-nodeps.txt
	INGRAPH_RL_BUILD_OPS=1 $(PY) -m pip install -q --no-deps \
	    --no-build-isolation -e .
	touch $(STAMP)

venv: $(STAMP)

impala: $(STAMP)
	$(PY) -m experiments.impala $(ARGS)

# Seconds: ruff on the whole tree, mypy on the files pyproject.toml names.
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy

# Two pytest-xdist workers, a test module each (module fixtures built once):
# the suite is mostly single-threaded tracing, so 2 cores halve its time.
TEST_WORKERS ?= 2

# Beside the suite, niced, in the background: tests/test_install.py builds
# the package as users do (`python -m build --wheel` of a clean copy, with
# this venv's pinned TF instead of an isolated build env, installed into a
# fresh venv: a minute or two of pip and g++, mostly disk; the isolated
# build's requirements are checked on their own, and `make test-all` adds
# an isolated `pip install .`). It starts before the style gate; its
# failure fails `test`; its output is in build/.
test: $(STAMP)
	@mkdir -p build
	nice -n 10 $(PY) -m pytest -q -m "install and not slow" tests/test_install.py \
	    > build/test_install.log 2>&1 & install=$$!; \
	$(MAKE) --no-print-directory lint && \
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadscope; status=$$?; \
	if wait $$install; then grep -E "passed|failed" build/test_install.log \
	    | tail -n 1; else cat build/test_install.log; status=1; fi; \
	exit $$status

test-all: $(STAMP)
	$(PY) -m pytest -q -m ""

# >= 100,000 calls over every root API of every shipped component and
# agent; prints the counts per target, backend and API (JSON in build/).
fuzz: $(STAMP)
	$(PY) -m pytest -q -m "" tests/fuzz --fuzz-long --timeout=3600 \
	    --fuzz-report=build/fuzz_report.json

bench-build: $(STAMP)
	$(PY) -m benchmarks.build_overhead

bench-memory: $(STAMP)
	$(PY) -m benchmarks.memory

bench-export: $(STAMP)
	$(PY) -m benchmarks.export

bench-impala: $(STAMP)
	$(PY) -m benchmarks.impala_throughput

bench-ppo: $(STAMP)
	$(PY) -m benchmarks.ppo_throughput

bench-quick: $(STAMP)
	$(PY) -m benchmarks.build_overhead --quick
	$(PY) -m benchmarks.memory --quick
	$(PY) -m benchmarks.export --quick
	$(PY) -m benchmarks.impala_throughput --quick

clean:
	rm -rf $(VENV) build *.egg-info
