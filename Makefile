# Convites task runner. `make test` is what CI runs; `make run` starts the app for one person.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.DEFAULT_GOAL := test
.PHONY: run test lint check setup system-deps system-deps-browser bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

system-deps:
	./scripts/install-system-deps.sh

system-deps-browser:
	./scripts/install-system-deps.sh --with-browser

run: system-deps setup  ## everything for one person: Redis, migrations, web, worker, mailbox
	$(PY) -m app dev

lint: setup
	$(PY) -m ruff check app tests e2e bench
	$(PY) -m ruff format --check app tests e2e bench
	$(PY) -m mypy

test: system-deps-browser setup lint  ## every test: unit, real processes, browser
	$(PY) -m pytest

bench: system-deps setup
	$(PY) -m bench

clean:
	rm -rf $(VENV) var .mypy_cache .ruff_cache .pytest_cache
