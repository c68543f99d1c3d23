# Bolide: `make run` starts the broker on the embedded default store, `make test` runs every test.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/bolide store demo --store ./store

lint: $(STAMP)
	$(BIN)/ruff check src tests bench

test: lint
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/bolide bench store

clean:
	rm -rf $(VENV) build dist .pytest_cache .ruff_cache
