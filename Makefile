# Convites task runner. `make test` is what CI runs; `make run` starts the app for one person.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# Exact versions with hashes, for the tests and for `make run`; regenerate with `make lock`.
LOCK := requirements.lock
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml $(LOCK) | cksum | cut -d' ' -f1)
LOCK_VENV ?= .venv-lock

.DEFAULT_GOAL := test
.PHONY: run test test-sqlite test-postgresql lint setup lock system-deps system-deps-tests bench chaos clean

# uv installs the same hashed lock as pip would, its downloads side by side: seconds where pip
# takes most of a minute, on every fresh clone and every CI run (docs/testing.md).
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv

$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -x $(UV) || $(PY) -m pip install -q uv==$(UV_VERSION)
	$(UV) pip install -q --python $(PY) --require-hashes -r $(LOCK)
	$(UV) pip install -q --python $(PY) --no-deps --no-build-isolation -e .
	rm -f $(VENV)/.installed-* && touch $(STAMP)

setup: $(STAMP)

# The one command that regenerates the lock (Python 3.11, Linux x86_64, with the dev extras).
# Pins already in the lock are kept; `make lock UPGRADE=--upgrade` moves them to the newest.
lock:
	test -x $(LOCK_VENV)/bin/pip-compile || \
		($(PYTHON) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install -q pip-tools)
	$(LOCK_VENV)/bin/pip-compile -q $(UPGRADE) --generate-hashes --allow-unsafe --strip-extras \
		--extra dev --no-emit-index-url --no-emit-find-links -o $(LOCK) pyproject.toml

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

# The two passes run one after the other, each in three pytest processes (pytest-xdist; work
# stealing, as test times vary from milliseconds to a minute): the tests mostly wait on the
# processes they start, while side by side the browsers of one pass slowed the other more than
# they overlapped (docs/benchmarks.md, "How long the test suite takes"). Both passes run even if
# the first fails. A pass that hangs past 20 minutes (at exit, where pytest-timeout does not
# reach) is stopped with SIGINT, and what it printed is still shown. TEST_PROCESSES=N.
test: system-deps-tests setup lint  ## every check and test (CI)
	@failed=0; \
	$(MAKE) --no-print-directory test-sqlite PASS_LIMIT="$(PASS_TIMEOUT)" || failed=1; \
	$(MAKE) --no-print-directory test-postgresql PASS_LIMIT="$(PASS_TIMEOUT)" || failed=1; \
	exit $$failed

PASS_TIMEOUT := timeout -s INT -k 30 1200
PYTEST := $(PY) -m pytest -n $${TEST_PROCESSES:-3} --dist worksteal

test-sqlite: setup  ## the whole suite on SQLite (the default database), browser tests included
	$(PASS_LIMIT) $(PYTEST)

# The browser tests (e2e/) run in the SQLite pass only: they check what a person sees and hears;
# the database behaviour under them has its own tests in tests/, which both passes run.
test-postgresql: setup  ## tests/ again on a private PostgreSQL
	TEST_DATABASE=postgresql $(PASS_LIMIT) $(PYTEST) tests

chaos: system-deps setup  ## the long chaos run: thousands of invites, minutes of killed workers and Redis restarts
	CHAOS_INVITES=$${CHAOS_INVITES:-3000} CHAOS_SECONDS=$${CHAOS_SECONDS:-180} \
		$(PY) -m pytest tests/test_chaos.py -s --timeout=1800

bench: system-deps setup  ## DB=postgresql: accept, end to end and live on a private PostgreSQL
	$(if $(filter postgresql,$(DB)),./scripts/install-system-deps.sh --postgresql)
	$(PY) -m bench $(if $(DB),--db $(DB))

clean:
	rm -rf $(VENV) $(LOCK_VENV) var .mypy_cache .ruff_cache .pytest_cache
