# Flarebot: `make run` runs it, `make test` runs the whole test suite. Both install what
# they need into .venv first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: run test install install-dev lint typecheck migrate

$(PY):
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Flarebot needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: requirements.txt | $(PY)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	@touch $@

$(VENV)/.installed-dev: requirements-dev.txt $(VENV)/.installed
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-dev.txt
	@touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

migrate: install
	@$(PY) manage.py migrate --noinput -v 0

run: migrate
	@$(PY) -m flarebot.supervisor

test: install-dev
	bash scripts/test.sh

lint: install-dev
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

typecheck: install-dev
	$(PY) -m mypy .
