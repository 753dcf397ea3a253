VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
# The port `make run` and `make serve` listen on, on 127.0.0.1: `make run PORT=8001`.
PORT ?= 8000

.PHONY: install mcp-servers run serve test test-slow lint imports typecheck format migrations-check benchmarks ci

# pip prints each package as it comes: the first install takes minutes.
$(STAMP): pyproject.toml
	@echo "== installing into $(VENV) (minutes the first time; again only when pyproject.toml changes)"
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --progress-bar on -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

## The service with demo data on the embedded default (SQLite, filesystem broker).
## Ends with the logins and a runtime token as its last lines; e-mails go to var/mail/.
## Stops at once, before any of that, when PORT is taken.
run: install
	$(PY) manage.py serve --check --addr 127.0.0.1:$(PORT)
	@echo "== migrating the database"
	$(PY) manage.py migrate --noinput
	@echo "== loading the demo registry and traces"
	$(PY) manage.py load_demo --welcome
	@echo "== starting the web server, the worker and beat"
	$(PY) manage.py serve --welcome --addr 127.0.0.1:$(PORT)

## Web, Celery worker and beat together; Ctrl-C stops all three.
serve: install
	$(PY) manage.py serve --addr 127.0.0.1:$(PORT)

## Real MCP servers the sources tests sync against (npm, locked; installed again only when the
## lock changes). Without npm the tests that need them skip and say why.
MCP_SERVERS := tests/mcp_servers/node_modules/.package-lock.json

$(MCP_SERVERS): tests/mcp_servers/package-lock.json
	npm ci --prefix tests/mcp_servers --no-audit --no-fund --silent
	touch $@

mcp-servers:
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory $(MCP_SERVERS); \
	else echo "npm is missing: the tests against the npm servers of tests/mcp_servers skip"; fi

## The suite but the tests marked slow (PostgreSQL and Redis when DATABASE_URL and REDIS_URL
## are set): minutes, see docs/operations.md.
test: install mcp-servers
	$(PY) -m pytest

## The tests marked slow (load, faults, hostile requests, the browser and end-to-end runs that
## take minutes each); CI runs them after `make test`.
test-slow: install mcp-servers
	$(PY) -m pytest -m slow

## Everything CI checks, on PostgreSQL and Redis (started if they are not running).
ci:
	bash .ci/run

## ruff, the layers between apps, and the types of services, selectors and pure modules.
lint: install imports typecheck
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

## import-linter's contracts in pyproject.toml: apps import only the layers below them, pure
## modules import no framework.
imports: install
	$(VENV)/bin/lint-imports

## mypy with django-stubs over all application code (pyproject.toml).
typecheck: install
	$(VENV)/bin/mypy

format: install
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

migrations-check: install
	$(PY) manage.py makemigrations --check --dry-run

benchmarks: install
	$(PY) benchmarks/contract2tool.py
