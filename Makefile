# Lexvoz: one command runs the stack (`make run`), one runs the tests (`make test`).
# Every target installs what it needs; nothing is installed by hand.

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
WEB_STAMP := web/node_modules/.installed
INTEROP_STAMP := tests/interop/node_modules/.installed
.PHONY: help venv web web-deps interop-deps livekit-server toxiproxy browser postgres redis nginx run test test-fast test-python test-multinode test-soak test-web evals lint format bench clean

help:
	@echo "make run        start livekit-server, the search server, the page service and the worker"
	@echo "make test       the whole test suite (installs what it needs)"
	@echo "make test-fast  the suite without the end-to-end, two-node, journey and soak tests"
	@echo "make test-soak  only the soak: three minutes of people talking while the stack breaks (bench/soak.py)"
	@echo "make test-python PY_VERSION=3.12  the suite without the end-to-end tests on another Python, in .venv-3.12"
	@echo "make evals      agent behaviour evals: the real model and an LLM judge with OPENAI_API_KEY, else offline"
	@echo "make lint       ruff and mypy (strict for agent/, panama_law/ and research/)"
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

# Shopify's toxiproxy for the soak's network faults, built once with `go install` into a cache outside the repo.
toxiproxy: $(STAMP)
	@$(PY) -c 'from bench.soak.toxiproxy import find_or_build; print("toxiproxy:", find_or_build())'

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

# Debian's nginx-light for the journey test behind the proxy (tests/journey/test_behind_proxy.py), which runs it
# as the test user on a free loopback port with deploy/nginx.conf (never the system service).
nginx:
	@if [ ! -x /usr/sbin/nginx ]; then \
	  if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq -o Dpkg::Options::=--force-confold nginx-light >/dev/null; \
	  else echo "install Debian's nginx-light package (apt-get install nginx-light) for the proxy journey test"; exit 1; fi; \
	fi

# The first run and the first test build side by side what they need: livekit-server's Go build takes minutes
# and the installs are mostly downloads, so one waiting on another only adds up. The system packages come one
# after another (apt holds one lock).
run:
	@$(MAKE) --no-print-directory -j3 web livekit-server
	$(PY) -m agent run

# The tests that need no running stack run on TEST_PROCESSES processes (pytest-xdist, each file whole on one of
# them, so module fixtures are built once); the end-to-end, two-node, journey and soak tests then run one at a
# time, since the stack they start shares the cores and its timings are part of what they check. Both parts
# always run; the target fails if either did.
STACK_MARKERS := e2e or multinode or journey or soak
TEST_PROCESSES ?= 2
test:
	@$(MAKE) --no-print-directory -j4 web interop-deps livekit-server toxiproxy
	@$(MAKE) --no-print-directory browser postgres redis nginx
	cd web && npm test
	fast=0; $(PY) -m pytest -m "not ($(STACK_MARKERS))" -n $(TEST_PROCESSES) --dist loadfile || fast=$$?; \
	$(PY) -m pytest -m "$(STACK_MARKERS)" && exit $$fast

test-soak: $(STAMP) livekit-server toxiproxy postgres
	$(PY) -m pytest -m soak tests/test_soak.py

test-multinode: $(STAMP) livekit-server redis
	$(PY) -m pytest -m multinode tests/multinode

test-fast: $(STAMP) interop-deps
	$(PY) -m pytest -m "not ($(STACK_MARKERS))" -n $(TEST_PROCESSES) --dist loadfile

# Another Python the project admits (requires-python), for the parts of the suite that need no running stack:
# `make test-python PY_VERSION=3.12`. The interpreter is found at run time: pyenv's newest 3.12.x when pyenv
# has one, else `python3.12` on PATH; the venv is `.venv-3.12`, made again when pyproject.toml changes.
# With MISSING_PYTHON=skip a machine without that Python says so and succeeds (CI); otherwise it fails.
PY_VERSION ?=
MISSING_PYTHON ?= fail
TEST_PYTHON_MARKERS := not ($(STACK_MARKERS))
test-python: interop-deps
	@[[ "$(PY_VERSION)" =~ ^3\.[0-9]+$$ ]] || { echo "usage: make test-python PY_VERSION=3.12"; exit 2; }
	@py=""; \
	if root=$$(pyenv root 2>/dev/null) || root="$${PYENV_ROOT:-}"; [ -n "$$root" ]; then \
	  for dir in $$(ls -d "$$root"/versions/$(PY_VERSION).[0-9]* 2>/dev/null | sort -V -r); do \
	    if [ -x "$$dir/bin/python" ]; then py="$$dir/bin/python"; break; fi; \
	  done; \
	fi; \
	if [ -z "$$py" ] && cand=$$(command -v python$(PY_VERSION)) \
	  && [ "$$("$$cand" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$(PY_VERSION)" ]; then \
	  py="$$cand"; \
	fi; \
	if [ -z "$$py" ]; then \
	  echo "Python $(PY_VERSION): not on this machine (neither pyenv nor python$(PY_VERSION) on PATH)"; \
	  [ "$(MISSING_PYTHON)" = skip ] && { echo "Python $(PY_VERSION): skipped"; exit 0; }; exit 1; \
	fi; \
	venv=.venv-$(PY_VERSION); \
	if [ ! -f $$venv/.installed ] || [ pyproject.toml -nt $$venv/.installed ]; then \
	  echo "Python $(PY_VERSION): $$("$$py" -c 'import sys; print(sys.version.split()[0])'), installing into $$venv"; \
	  rm -rf $$venv && "$$py" -m venv $$venv \
	    && $$venv/bin/python -m pip install --quiet --upgrade pip \
	    && $$venv/bin/python -m pip install --quiet -e '.[dev]' && touch $$venv/.installed || exit 1; \
	fi; \
	echo "Python $(PY_VERSION): $$($$venv/bin/python -c 'import sys; print(sys.version.split()[0])'), -m '$(TEST_PYTHON_MARKERS)'"; \
	$$venv/bin/python -m pytest -m "$(TEST_PYTHON_MARKERS)" -n $(TEST_PROCESSES) --dist loadfile

# Live against the real model and the LLM judge when OPENAI_API_KEY is set (environment or .env); otherwise
# the offline harness against the Realtime stand-in. Prints a table: scenario, pass/fail, reason.
evals: $(STAMP)
	LEXVOZ_EVALS_LIVE=auto $(PY) -m pytest -m evals tests/evals

test-web: $(WEB_STAMP)
	cd web && npm test

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check agent panama_law realtime_standin research tests bench
	$(PY) -m mypy

format: $(STAMP)
	$(PY) -m ruff format agent panama_law realtime_standin research tests bench

bench: $(STAMP) livekit-server
	$(PY) bench/load.py --sessions 10
	$(PY) bench/latency.py
	$(PY) bench/bargein.py
	$(PY) bench/gateway.py
	$(PY) bench/search.py
	$(PY) bench/evidence.py
	$(PY) bench/norm_reload.py
	$(PY) bench/search_stall.py
	$(PY) bench/citations.py

clean:
	rm -rf $(VENV) .venv-3.* web/node_modules web/dist tests/interop/node_modules bench/results
