# Everything a fresh machine (python3 >= 3.11 and make) needs: `make demo`, `make test`.
# uv is bootstrapped into .tools/ with pip; the dev environment is .venv/, synced
# from uv.lock (frozen: the lock is never changed implicitly).
PY ?= python3
TOOLS := .tools
UV := $(TOOLS)/bin/uv
VENV := .venv
BIN := $(VENV)/bin
UV_VERSION := 0.13.9
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(abspath $(VENV))
export UV_NO_PROGRESS := 1

.PHONY: setup demo test test-fast lint pytest bench reliability corpus lock dist clean

$(UV):
	$(PY) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(VENV)/.synced: $(UV) uv.lock pyproject.toml instrumentation/pyproject.toml evaluator/pyproject.toml collector/pyproject.toml
	$(UV) sync --frozen --all-packages --all-extras --python $(PY)
	touch $@

setup: $(VENV)/.synced

## The main job: a real collector, an instrumented example agent, metrics on /metrics.
demo: setup
	$(BIN)/tracepass demo $(DEMO_ARGS)

## The whole suite: lint, types, tests (CI runs exactly this).
test: setup lint pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

pytest: setup
	$(BIN)/python -m pytest -n 2 --dist loadgroup $(PYTEST_ARGS)

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

## Regenerate the real-framework corpus (tests/frameworks/README.md): one venv per framework
## under .tools/frameworks, installed from PyPI; not part of `make test`.
## CORPUS_ARGS passes options, e.g. CORPUS_ARGS="--only langgraph" or "--out /tmp/corpus".
corpus:
	$(PY) tests/frameworks/regenerate.py $(CORPUS_ARGS)

## Wheels and sdists of the three distributions in dist/, checked with twine.
dist: setup
	rm -rf dist
	$(UV) build --all-packages --out-dir dist
	$(BIN)/twine check --strict dist/*

lock: $(UV)
	$(UV) lock

clean:
	rm -rf $(VENV) $(TOOLS) dist
