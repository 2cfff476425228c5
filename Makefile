PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint format clean docs-reference

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

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf runs .pytest_cache .ruff_cache

docs-reference: $(STAMP)
	$(BIN)/python -c "from engine.reference import config_reference_markdown as m; open('docs/configuration.md', 'w').write(m())"
