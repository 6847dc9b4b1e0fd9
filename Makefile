# Convites task runner. `make test` is what CI runs; `make run` starts the app for one person.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.DEFAULT_GOAL := test
.PHONY: run test test-sqlite test-postgresql lint setup system-deps system-deps-tests bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

system-deps:
	./scripts/install-system-deps.sh

system-deps-tests:
	./scripts/install-system-deps.sh --for-tests

run: system-deps setup  ## everything for one person: Redis, migrations, web, worker, mailbox
	$(PY) -m app dev

lint: setup
	$(PY) -m ruff check app tests e2e bench
	$(PY) -m ruff format --check app tests e2e bench
	$(PY) -m mypy

test: system-deps-tests setup lint test-sqlite test-postgresql  ## every check and test (CI)

test-sqlite: setup  ## the whole suite on SQLite (the default database)
	$(PY) -m pytest

test-postgresql: setup  ## the whole suite again on a private PostgreSQL
	TEST_DATABASE=postgresql $(PY) -m pytest

bench: system-deps setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
