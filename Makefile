# The README's two commands: `make run` (the service on the embedded SQLite store) and `make test`.
# Each installs what it needs first, into the same .venv in the repo: `make run` what the service runs
# on and the oncegate command's [cli] extra (rich, which Azure never installs); `make test` (and lint, bench) the development tools too, Azurite and Microsoft's Kusto parser
# from npm (pinned in package.json), and Checkov in a virtual environment of its own (.venv/checkov: it
# pins libraries older than the project's tools need). A stamp per layer: after `make test`, `make run` installs nothing; after `make run`,
# `make test` adds the rest.
# The layers that do not need each other install at once (make's -j, which GNU make 4 takes from here): on a
# clean clone, Checkov's environment, the project's and npm's packages; make 3.81 (macOS) installs them in turn.
# The project installs once: its [dev] extras hold the [cli] one, so `make test` stamps `make run`'s layer too.
# `make test`'s layers install with uv (itself one of the [dev] extras, installed first by pip): on a clean clone
# pip took 25 s for the [dev] extras and 29 s for Checkov, resolving, unpacking and compiling one package at a
# time, where uv takes about 8 s and 3 s. `make run` installs with pip alone, and brings no uv.
MAKEFLAGS += -j3

# The Python that makes .venv: 3.11 or later (Azure Functions runs 3.11). Another: make run PYTHON=python3.11
PYTHON ?= python3
NEEDED := 3.11
# True (status 0) for an interpreter OnceGate runs on.
SUPPORTED := -c 'import sys; sys.exit(sys.version_info < (3, 11))'
VENV := .venv
BIN := $(VENV)/bin
RUNTIME := $(VENV)/.installed-runtime
DEV := $(VENV)/.installed-dev
# npm ci empties node_modules first, this stamp with it.
NODE := node_modules/.installed
CHECKOV := $(VENV)/checkov/bin/checkov
JSONPATH_TABLES := $(VENV)/checkov/.jsonpath-tables
UV := $(BIN)/uv
CHECKOV_VERSION := 3.3.30
UV_VERSION := 0.13.9
PORT ?= 7071
# make test's processes (pytest-xdist); JOBS=1 runs the suite in one, as pytest alone does.
JOBS ?= 2
WORKERS ?= 1
# Handler threads per worker: empty leaves it to ONCEGATE_SERVE_THREADS, else oncegate serve's default.
THREADS ?=

.PHONY: install run test lint bench clean lock FORCE

install: $(DEV) $(NODE) $(CHECKOV) $(JSONPATH_TABLES)

# A .venv made by a Python OnceGate does not run on (an earlier make run PYTHON=python3.10) is made again;
# PYTHON is checked before it makes one, so that pip never stops with "requires a different Python".
STALE := $(shell [ -x $(BIN)/python ] && ! $(BIN)/python $(SUPPORTED) && echo stale)

$(BIN)/python: $(if $(STALE),FORCE)
	@$(PYTHON) $(SUPPORTED) 2>/dev/null || { \
	  echo "make: OnceGate needs Python $(NEEDED) or later; PYTHON=$(PYTHON) is $$(command -v $(PYTHON) >/dev/null && $(PYTHON) --version 2>&1 || echo 'not found')." >&2; \
	  echo "      Install Python $(NEEDED), then point make at it: make run PYTHON=python$(NEEDED) (or its full path)." >&2; \
	  exit 2; }
	$(if $(STALE),rm -rf $(VENV)  # made by $(shell $(BIN)/python --version 2>&1))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

FORCE:

# The package, its dependencies and the command line's [cli] extra, without the [dev] extras; requirements.txt,
# what Azure installs, has no [cli] extra (oncegate serve runs without it).
# PYTHONWARNINGS: setuptools' boxed note on editable installs, which asks nothing of the reader.
$(RUNTIME): pyproject.toml requirements.txt $(if $(STALE),FORCE) | $(BIN)/python
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e '.[cli]'
	touch $@

# The package, its dependencies and every extra the suite and the tools need, [cli] among them: installed beside
# Checkov's environment and npm's packages rather than after them, and in one install rather than two.
$(DEV): pyproject.toml requirements.txt $(if $(STALE),FORCE) | $(UV)
	$(UV) pip install --quiet --python $(BIN)/python -e '.[dev]'
	touch $(RUNTIME) $@

# The installer of make test's layers, pinned as Checkov is: a new release of it cannot change how a clean clone
# installs (the [dev] extras' uv>=0.9 keeps it).
$(UV): $(if $(STALE),FORCE) | $(BIN)/python
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)

# --prefer-offline: a package already in npm's cache is taken from it without asking the registry whether it
# changed (the lock pins each one's version and checksum); a clean machine downloads them all the same.
$(NODE): package.json package-lock.json
	npm ci --prefer-offline --no-audit --no-fund --loglevel=error
	touch $@

# tests/infra/test_checkov.py runs it over infra/.
$(CHECKOV): | $(UV)
	$(UV) venv --quiet --clear --python $(BIN)/python $(VENV)/checkov
	$(UV) pip install --quiet --python $(VENV)/checkov/bin/python checkov==$(CHECKOV_VERSION)

# Checkov's JSONPath parsers build their parse tables again for every path they read unless the tables are beside
# them (tests/infra/jsonpath_tables.py): written once, a scan of infra/ takes about 3 s of CPU instead of 8.
$(JSONPATH_TABLES): | $(CHECKOV)
	$(VENV)/checkov/bin/python tests/infra/jsonpath_tables.py
	touch $@

# requirements.txt, what Azure installs, is a lock with hashes generated from pyproject.toml's dependencies
# (no extra: not the [cli] one either) for the platform's Python (Linux, 3.11); tests/test_lock.py checks it against pyproject.toml.
lock: $(DEV)
	$(BIN)/uv pip compile pyproject.toml --generate-hashes --python-version 3.11 \
		--python-platform x86_64-manylinux_2_28 -o requirements.txt

# PORT=8080 (or `make run PORT=8080`) serves on another port; WORKERS=2 serves from two processes;
# THREADS=4 answers with four handler threads in each.
run: $(RUNTIME)
	$(BIN)/oncegate serve --port $(PORT) --workers $(WORKERS)$(if $(THREADS), --threads $(THREADS))

# Two processes on two cores: the suite waits on Azurite, servers and subprocesses as much as it computes.
# --dist loadgroup hands each test (none is grouped) to whichever process is free next, in the order collected,
# slow tests first (tests/conftest.py); --dist load would give each process a quarter of its share at once, and
# the first one every slow test. Checkov and the Kusto parser run once per run (tests/support/once.py).
test: install
	$(BIN)/pytest -n $(JOBS) --dist loadgroup

# The package runs on Windows and macOS too: its types are checked as each platform's stdlib has them (the
# tests and the benchmark, which run on Linux, as Linux has them).
lint: $(DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --platform linux
	$(BIN)/mypy --platform win32 oncegate function_app.py tools
	$(BIN)/mypy --platform darwin oncegate function_app.py tools

# Not part of `make test`: about 5 minutes on 2 cores. Prints the figures and writes them into
# docs/performance.md (between its markers) and docs/latency.png. `python -m bench --quick` checks it.
bench: $(DEV) $(NODE)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache
