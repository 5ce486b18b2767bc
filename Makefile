# Lexvoz: one command runs the stack (`make run`), one runs the tests (`make test`).
# Every target installs what it needs; nothing is installed by hand.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
WEB_STAMP := web/node_modules/.installed
INTEROP_STAMP := tests/interop/node_modules/.installed
.PHONY: help venv web web-deps interop-deps livekit-server browser postgres redis run test test-fast test-multinode test-web evals lint format bench clean

help:
	@echo "make run        start livekit-server, the search server, the page service and the worker"
	@echo "make test       the whole test suite (installs what it needs)"
	@echo "make test-fast  the suite without the end-to-end tests"
	@echo "make evals      agent behaviour evals: the real model and an LLM judge with OPENAI_API_KEY, else offline"
	@echo "make lint       ruff and mypy (strict for agent/ and panama_law/)"
	@echo "make bench      the benchmarks (figures in bench/results/)"

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

venv: $(STAMP)

$(WEB_STAMP): web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund
	@touch $@

web-deps: $(WEB_STAMP)

# The official TypeScript MCP SDK for the interop tests (tests/interop), from its lockfile.
$(INTEROP_STAMP): tests/interop/package.json tests/interop/package-lock.json
	cd tests/interop && npm ci --no-audit --no-fund
	@touch $@

interop-deps: $(INTEROP_STAMP)

web: $(WEB_STAMP)
	cd web && npm run build

livekit-server: $(STAMP)
	@$(PY) -m agent livekit-server

# Debian's Chromium for the browser tests (never a downloaded browser build).
browser:
	@if [ ! -x /usr/bin/chromium ]; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "install Debian's chromium package (apt-get install chromium) for the browser tests"; exit 1; fi; \
	fi

# Debian's PostgreSQL server binaries for the ledger tests (marker `postgres`): the tests run their own
# throwaway cluster in a temporary folder, so the package is told not to create a system cluster.
postgres:
	@if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    mkdir -p /etc/postgresql-common; \
	    [ -e /etc/postgresql-common/createcluster.conf ] || echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-confold postgresql >/dev/null; \
	  else echo "install Debian's postgresql package (apt-get install postgresql) for the ledger tests"; exit 1; fi; \
	fi

# Debian's redis-server for the multinode tests, which start their own on a free loopback port (never a service).
redis:
	@if ! command -v redis-server >/dev/null; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else echo "install Debian's redis-server package (apt-get install redis-server) for the multinode tests"; exit 1; fi; \
	fi

run: $(STAMP) web livekit-server
	$(PY) -m agent run

test: $(STAMP) web interop-deps livekit-server browser postgres redis
	cd web && npm test
	$(PY) -m pytest

test-multinode: $(STAMP) livekit-server redis
	$(PY) -m pytest -m multinode tests/multinode

test-fast: $(STAMP) interop-deps
	$(PY) -m pytest -m "not e2e and not multinode"

# Live against the real model and the LLM judge when OPENAI_API_KEY is set (environment or .env); otherwise
# the offline harness against the Realtime stand-in. Prints a table: scenario, pass/fail, reason.
evals: $(STAMP)
	LEXVOZ_EVALS_LIVE=auto $(PY) -m pytest -m evals tests/evals

test-web: $(WEB_STAMP)
	cd web && npm test

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check agent panama_law realtime_standin tests bench
	$(PY) -m mypy

format: $(STAMP)
	$(PY) -m ruff format agent panama_law realtime_standin tests bench

bench: $(STAMP) livekit-server
	$(PY) bench/load.py --sessions 10
	$(PY) bench/bargein.py
	$(PY) bench/gateway.py
	$(PY) bench/search.py
	$(PY) bench/evidence.py

clean:
	rm -rf $(VENV) web/node_modules web/dist tests/interop/node_modules bench/results
