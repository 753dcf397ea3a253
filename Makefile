VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: install run serve test test-fast lint imports typecheck format migrations-check benchmarks ci

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

install: $(STAMP)

## The service with demo data on the embedded default (SQLite, filesystem broker).
## Ends with the logins and a runtime token as its last lines; e-mails go to var/mail/.
run: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py load_demo --welcome
	$(PY) manage.py serve --welcome

## Web, Celery worker and beat together; Ctrl-C stops all three.
serve: install
	$(PY) manage.py serve

## The whole suite (PostgreSQL and Redis when DATABASE_URL and REDIS_URL are set).
test: install
	$(PY) -m pytest

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
