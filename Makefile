# Everything a fresh machine (python3 >= 3.11 and make) needs: `make demo`, `make test`.
# uv is bootstrapped into .tools/ with pip; the dev environment is .venv/, synced
# from uv.lock (frozen: the lock is never changed implicitly).
PY ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
BIN := $(VENV)/bin
# `make demo` has its own environment without the dev group (no mypy, ruff, pytest,
# hypothesis, kubernetes-validate...): the workspace's runtime packages and extras only.
DEMO_VENV := .demo-venv
UV_VERSION := 0.13.9
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(abspath $(VENV))
export UV_NO_PROGRESS := 1

.PHONY: setup native native-test demo test test-fast lint pytest bench reliability corpus lock dist clean otelcol otelcol-test

# The optional compiled evaluation core (evaluator/native: Rust, PyO3, built by maturin
# from the dev group). Built only where cargo is; cargo's registry cache and the build
# live under .tools/ and the crate's ignored target/, so an unchanged crate is not rebuilt.
NATIVE_DIR := evaluator/native
NATIVE_SRC := $(NATIVE_DIR)/Cargo.toml $(NATIVE_DIR)/Cargo.lock $(NATIVE_DIR)/pyproject.toml $(wildcard $(NATIVE_DIR)/src/*.rs)
CARGO := $(shell command -v cargo 2>/dev/null)
NATIVE_ENV := CARGO_HOME=$(abspath $(TOOLS))/cargo CARGO_TARGET_DIR=$(abspath $(NATIVE_DIR))/target
NATIVE_WHEELS := $(abspath $(TOOLS))/native-wheels

$(UV):
	$(PY) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.synced: $(UV) uv.lock pyproject.toml instrumentation/pyproject.toml evaluator/pyproject.toml collector/pyproject.toml
	$(UV) sync --frozen --all-packages --all-extras --python $(PY)
	touch $@

setup: $(VENV)/.synced native

## The compiled evaluation core, installed into .venv/ (skipped with a message without cargo;
## `tracepass --version` says which core is active).
native: $(VENV)/.synced
ifeq ($(CARGO),)
	@echo "native: cargo not found: the compiled evaluation core is not built (the pure-Python core runs)"
else
	@$(MAKE) --no-print-directory $(VENV)/.native
endif

$(VENV)/.native: $(VENV)/.synced $(NATIVE_SRC)
	rm -rf $(NATIVE_WHEELS)
	cd $(NATIVE_DIR) && $(NATIVE_ENV) $(abspath $(BIN))/maturin build --release --locked --quiet \
		--interpreter $(abspath $(BIN))/python --out $(NATIVE_WHEELS)
	$(UV) pip install --quiet --python $(BIN)/python --no-deps --reinstall $(NATIVE_WHEELS)/*.whl
	touch $@

## The crate's own tests (pure kernels, no Python): part of `make test` where cargo is.
native-test:
ifeq ($(CARGO),)
	@echo "native-test: cargo not found: skipped"
else
	cd $(NATIVE_DIR) && $(NATIVE_ENV) cargo test --locked --quiet --no-default-features
endif

$(DEMO_VENV)/.synced: $(UV) uv.lock pyproject.toml instrumentation/pyproject.toml evaluator/pyproject.toml collector/pyproject.toml
	UV_PROJECT_ENVIRONMENT=$(abspath $(DEMO_VENV)) $(UV) sync --frozen --no-dev --all-packages --python $(PY)
	touch $@

## The main job: a real collector, an instrumented example agent, metrics on /metrics.
demo: $(DEMO_VENV)/.synced
	$(DEMO_VENV)/bin/tracepass demo $(DEMO_ARGS)

## The whole suite: lint, types, the Rust core's and the Go component's tests, tests (CI runs exactly this).
test: setup lint native-test otelcol-test pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

PYTHON_CORE_TESTS := tests/evaluator/test_argmatch.py tests/evaluator/test_toolcorrectness.py \
	tests/evaluator/test_trajectory.py tests/evaluator/test_scoring.py \
	tests/evaluator/test_scoring_unchanged.py
# The suite runs on the active core (native where built); the scoring tests run once more
# on the pure-Python reference path (tests/evaluator/test_native_core.py compares the two
# paths in one process, on every run).
pytest: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)
	TRACEPASS_CORE=python $(BIN)/python -m pytest -n 2 -q $(PYTHON_CORE_TESTS)

## The unit layer only: no test that starts a process, a server or a system tool
## (markers `slow`/`system`, enforced by tests/test_layout.py). Run it while you work;
## `make test` before you hand a branch in. No lint here: run `make lint` on its own.
test-fast: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup -m "not slow and not system" $(PYTEST_ARGS)

bench: setup
	$(BIN)/python bench/run_all.py

## The attack of issue 13, long version (docs/reliability.md): 1,000,000 fuzzed inputs,
## 30 kill -9 during a replay, 10 minutes of overload under a memory cap, 2,000 fuzzed span-declared schemas. The fast
## version of the same tests runs in `make pytest` (tests/reliability/).
reliability: setup
	TRACEPASS_FUZZ_INPUTS=1000000 TRACEPASS_KILLS=30 TRACEPASS_OVERLOAD_S=600 \
		TRACEPASS_INFLIGHT_REQUESTS=48 TRACEPASS_IDLE_CONNECTIONS=1100 TRACEPASS_QUERY_RESULTS=100000 TRACEPASS_QUERY_FUZZ=20000 \
		TRACEPASS_FUZZ_SCHEMAS=2000 \
		$(BIN)/python -m pytest tests/reliability -p no:xdist -s -rA $(PYTEST_ARGS)

## The project's OpenTelemetry Collector distribution (deploy/otelcol/builder-config.yaml,
## with the conversationid processor) -> .tools/bin/otelcol-tracepass; cached, rebuilt
## only when the manifest or the Go component changes. Needs go and the Go module proxy.
otelcol:
	@deploy/otelcol/build.sh

## The Go tests of the project's Collector component (part of `make test`; skipped with
## a message when go is not installed). Same Go caches as `make otelcol` (.tools/go).
otelcol-test:
	@if command -v go >/dev/null 2>&1; then \
		. deploy/otelcol/go-env.sh && cd deploy/otelcol/conversationidprocessor && go test -count=1 ./...; \
	else \
		echo "go not found: skipping the conversationid processor's Go tests (make otelcol-test)"; \
	fi

## Regenerate the real-framework corpus (tests/frameworks/README.md): one venv per framework
## under .tools/frameworks, installed from PyPI; not part of `make test`.
## CORPUS_ARGS passes options, e.g. CORPUS_ARGS="--only langgraph" or "--out /tmp/corpus".
corpus:
	$(PY) tests/frameworks/regenerate.py $(CORPUS_ARGS)

## Wheels and sdists of the three distributions in dist/, checked with twine.
dist: setup
	rm -rf dist
	$(UV) build --all-packages --out-dir dist
ifneq ($(CARGO),)
	cd $(NATIVE_DIR) && $(NATIVE_ENV) $(abspath $(BIN))/maturin build --release --locked --quiet \
		--interpreter $(abspath $(BIN))/python --out $(abspath dist)
	cd $(NATIVE_DIR) && $(abspath $(BIN))/maturin sdist --out $(abspath dist)
endif
	$(BIN)/twine check --strict dist/*

lock: $(UV)
	$(UV) lock

clean:
	rm -rf $(VENV) $(DEMO_VENV) $(TOOLS) dist
