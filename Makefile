PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format clean docs docs-reference

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install torch==2.14.1 torchvision==0.29.1

$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/pip install -e .[dev]
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/hookbus train configs/simclr_digits.yaml

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest
	$(MAKE) --no-print-directory docs

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf runs site .pytest_cache .ruff_cache

# The docs site, into site/; --strict fails on a broken link, anchor or snippet.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# The reference pages generated from the code (config, events, hooks, run state).
docs-reference: $(STAMP)
	$(BIN)/python -m engine.reference
