# cdrhouse developer entry points. Every target installs what it needs first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DAGSTER_HOME_DIR := $(CURDIR)/.dagster_home
# The local instance file `make dev`/`make demo` copy into $(DAGSTER_HOME_DIR).
LOCAL_INSTANCE := dagster.yaml
# The UI's port: `make dev PORT=3111`.
PORT ?= 3000
# The key of the sandbox's caller tokens in `make dev`/`make demo` (pipelines.privacy_settings
# DEMO_PII_KEY): made-up data, not a secret; a real deployment sets its own CDRHOUSE_PII_KEY.
DEMO_PII_KEY := cdrhouse-demo-key-not-a-secret
export CDRHOUSE_DATA_DIR ?= $(CURDIR)/data

.PHONY: install demo test lint dev browser clean

install: $(STAMP)

# Re-install only when .venv is missing or pyproject.toml or requirements.lock changed.
# Exact versions from requirements.lock (pip-compile of pyproject.toml's runtime dependencies and
# its dev, sandbox and webserver extras; `make lock` regenerates it), then cdrhouse itself
# without resolving again. A production install is `pip install .`: no extra, no web stack.
# uv installs the same lock in parallel: a fresh .venv in ~21-24 s against pip's ~54 s, on the
# critical path of every `make test` on a fresh clone. It compiles the bytecode, as pip does:
# with PYTHONDONTWRITEBYTECODE set (as on these machines), an install without it left every
# process of the suite compiling what it imports (+221 s of the subprocesses' CPU). Where uv
# cannot be installed or cannot reach the index (it reads no pip.conf), pip installs the same
# lock as before.
UV_VERSION := 0.13.9
UV := $(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -q
$(STAMP): pyproject.toml requirements.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip uv==$(UV_VERSION) || $(BIN)/python -m pip install -q --upgrade pip
	$(UV) -r requirements.lock || $(BIN)/python -m pip install -q -r requirements.lock
	$(UV) --no-deps -e . || $(BIN)/python -m pip install -q --no-deps -e .
	@touch $(STAMP)

.PHONY: lock
lock: install
	$(BIN)/pip-compile -q --extra dev --extra sandbox --extra webserver --strip-extras \
	  --no-emit-index-url --no-emit-find-links --output-file=requirements.lock pyproject.toml

$(DAGSTER_HOME_DIR)/dagster.yaml: $(LOCAL_INSTANCE)
	@mkdir -p $(DAGSTER_HOME_DIR)
	cp $(LOCAL_INSTANCE) $(DAGSTER_HOME_DIR)/dagster.yaml

# Debian's Chromium (the UI browser test; Playwright drives it, no browser download) and
# PostgreSQL (tests/deploy/ start their own cluster on a loopback port; no service is enabled),
# installed when missing, in one apt-get: two would update the package lists twice and could not
# run side by side (dpkg's lock). The S3 server (moto) comes with the dev extra.
.PHONY: system-packages services
system-packages:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    echo "apt-get install$$missing"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null) \
	      || echo "warning: could not install$$missing; the browser test / the tests/deploy/ PostgreSQL tests will be skipped"; \
	  else echo "warning: no root/apt-get; install$$missing to run the browser test / the tests/deploy/ PostgreSQL tests"; fi; \
	fi
browser services: system-packages

demo: install $(DAGSTER_HOME_DIR)/dagster.yaml
	DAGSTER_HOME=$(DAGSTER_HOME_DIR) CDRHOUSE_PHONE_NUMBERS=token CDRHOUSE_PII_KEY=$(DEMO_PII_KEY) \
	  $(BIN)/cdrhouse demo

# The two mypy runs (one core each, ~15-20 s) side by side, each with its own cache (two
# processes writing one cache could clobber each other's files).
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/ruff format --check connectors models warehouse pipelines tests bench
	@$(MAKE) --no-print-directory -j2 mypy-packages mypy-tests
	$(BIN)/dg check defs

.PHONY: mypy-packages mypy-tests
mypy-packages: install
	$(BIN)/mypy
mypy-tests: install
	$(BIN)/mypy --cache-dir .mypy_cache/tests tests bench

# Branch coverage of the pytest processes (`--cov`, combined over the xdist workers; code that
# runs only in a subprocess, e.g. a `cdrhouse` command or `dagster dev`, is not counted). The
# figure is checked by `coverage-report`, not by pytest-cov, which would check both groups together.
COV := --cov --cov-branch --cov-report= --cov-fail-under=0
EMULATOR := connectors/sandbox/*

# Two workers, each module whole on one (`--dist loadscope`), so a module's fixtures (a
# `dagster dev`, a served sandbox, a lake) are built once: `loadgroup` with a group per module,
# used before, spread the tests of a module over both workers in pytest-xdist 3.8 (each built
# the fixtures again): 553 -> 494 s of pytest, one run each. Modules in file order, not
# reordered by test count: the long deployment modules (one or three tests each) start early
# instead of ending the run on one worker.
# `make test WORKERS=3` to measure another count. The pip install and the system packages
# (mostly waits on the network and the disk) run side by side.
# `make test` runs without coverage's tracer (on Python 3.11, a C trace function on every
# Python call of the pytest processes): with it, the pytest processes took +36 % CPU (414 s
# against 305 s) and lint + pytest 639 s against 566 s, back to back on this 2-core machine.
# `make coverage` is the same suite with it, and the floor of pyproject.toml.
WORKERS ?= 2
DIST := --dist loadscope --no-loadscope-reorder
PYTEST := $(BIN)/python -m pytest -n $(WORKERS) $(DIST) --durations=15
test:
	@$(MAKE) --no-print-directory -j2 install system-packages
	@$(MAKE) --no-print-directory bytecode
	@$(MAKE) --no-print-directory lint
	$(PYTEST)

# The packages' bytecode, written once (incremental: only what changed). With
# PYTHONDONTWRITEBYTECODE set, as on these machines, no import writes it, so each of the
# suite's hundreds of Python processes (each `cdrhouse` command, Dagster's processes and run
# workers) compiled the packages it imports again: ~0.2 s CPU each (importing the code location
# and the emulator: 1.30 -> 1.07 s user, 3 runs each).
.PHONY: bytecode
bytecode: install
	$(BIN)/python -m compileall -q -j 2 connectors models warehouse pipelines tests

.PHONY: coverage
coverage:
	@$(MAKE) --no-print-directory -j2 install system-packages
	@$(MAKE) --no-print-directory bytecode
	$(PYTEST) $(COV)
	@$(MAKE) --no-print-directory coverage-report

# The fast tier: models, connectors (client and sandbox) and warehouse, no Dagster run, no
# subprocess server, no browser. The schemathesis run (a served sandbox, ~40-60 s) stays in
# `make test`. It prints the same two coverage figures, without the floor: its tests leave most
# of `pipelines` to `make test`.
.PHONY: test-fast
test-fast: install bytecode
	$(BIN)/python -m pytest -n 2 $(DIST) -q tests/models tests/connectors tests/warehouse \
	  --ignore=tests/connectors/sandbox/test_schemathesis.py $(COV)
	@$(MAKE) --no-print-directory coverage-report COVERAGE_FLOOR=no

# The last run's coverage in two groups: the product packages (a table of the files not fully
# covered, the total, then the floor of pyproject.toml) and the emulator (the total, no floor).
.PHONY: coverage-report
COVERAGE_FLOOR ?= yes
coverage-report:
	@$(BIN)/coverage report --omit='$(EMULATOR)' --skip-covered --fail-under=0
	@echo "branch coverage, product packages (connectors/contact_center, models, warehouse, pipelines):" \
	  "$$($(BIN)/coverage report --omit='$(EMULATOR)' --format=total --fail-under=0)%"
	@echo "branch coverage, emulator (connectors/sandbox):" \
	  "$$($(BIN)/coverage report --include='$(EMULATOR)' --format=total --fail-under=0)%"
	@if [ "$(COVERAGE_FLOOR)" = yes ]; then \
	  $(BIN)/coverage report --omit='$(EMULATOR)' --format=total >/dev/null \
	    || { echo "product packages' coverage is below fail_under (pyproject.toml)"; exit 2; }; \
	fi

# `dg dev`, Dagster 1.13's command (`dagster dev` says it is superseded by it): webserver and
# daemon on 127.0.0.1:$(PORT), the code location `pipelines.definitions` (as [tool.dg] names
# it), the bundled sandbox unless CC_API_BASE_URL is set, callers' numbers as tokens under the
# demo key unless CDRHOUSE_PHONE_NUMBERS / CDRHOUSE_PII_KEY are set (`cdrhouse demo` sets both). `pipelines.dev_home` first records the daemon's event-log
# cursors, which the daemon would record on its first tick with a warning. It starts in
# DAGSTER_HOME, naming the code location (-m, -d): Dagster warns when started from a folder
# holding another dagster.yaml (the root's), and `dg dev` without a target moves to the root.
dev: install $(DAGSTER_HOME_DIR)/dagster.yaml
	$(BIN)/python -m pipelines.dev_home $(DAGSTER_HOME_DIR)
	cd $(DAGSTER_HOME_DIR) && CC_API_BASE_URL=$${CC_API_BASE_URL:-sandbox} DAGSTER_HOME=$(DAGSTER_HOME_DIR) \
	  CDRHOUSE_PHONE_NUMBERS=$${CDRHOUSE_PHONE_NUMBERS:-token} CDRHOUSE_PII_KEY=$${CDRHOUSE_PII_KEY:-$(DEMO_PII_KEY)} \
	  $(abspath $(BIN))/dg dev -m pipelines.definitions -d $(CURDIR) -h 127.0.0.1 -p $(PORT)

# The side-by-side bench with dlt (bench/peers.py); dlt comes only with the bench extra, and
# the lock constrains what it shares with cdrhouse, so the bench measures the locked versions.
.PHONY: bench
bench: install
	$(BIN)/python -m pip install -q -c requirements.lock -e '.[dev,sandbox,webserver,bench]'
	$(BIN)/python -m bench.peers

clean:
	rm -rf $(VENV) $(DAGSTER_HOME_DIR) .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.*
