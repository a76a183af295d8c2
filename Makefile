# The README's two commands: `make run` (the service on the embedded SQLite store) and `make test`.
# Both install what they need first: a .venv in the repo and Azurite from npm (pinned in package.json).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PORT ?= 7071

.PHONY: install run test lint bench clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.txt package.json package-lock.json
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	npm ci --no-audit --no-fund --loglevel=error
	touch $(STAMP)

run: install
	$(BIN)/oncegate serve --port $(PORT)

test: install
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Not part of `make test`: about 5 minutes on 2 cores. Prints the figures and writes them into
# docs/performance.md (between its markers) and docs/latency.png. `python -m bench --quick` checks it.
bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache
