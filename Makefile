PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
TORCH_STAMP := $(VENV)/.torch-installed
STAMP := $(VENV)/.installed
# .venv takes about 6 GB: the pinned torch is a CUDA build (it runs on the CPU too).
VENV_KB := 6500000

.PHONY: demo test test-fast lint typecheck format clean docs docs-reference doc-blocks FORCE

# Each step leaves its stamp only when it succeeded, so a failed install (a full disk,
# say) is retried by the next make instead of leaving a venv without torch.
$(TORCH_STAMP):
	@free=$$(df -Pk . | awk 'NR == 2 {print $$4}'); \
	if [ "$$free" -lt $(VENV_KB) ]; then \
		echo "make: warning: .venv needs about 6 GB of disk; $$((free / 1024)) MB free here" >&2; \
	fi
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install torch==2.14.1 torchvision==0.29.1
	touch $(TORCH_STAMP)

# The editable install is setuptools' strict mode: build/__editable__.*/hookbus is a tree
# of links to the checkout's files, which type checkers and editors read as a plain
# package (the default mode maps the folders at run time only, through an import hook no
# static tool follows). It links the files there at install time, so the list of the
# package's files is an input: adding or removing a module re-links at the next make.
PACKAGE_FILES := $(VENV)/.package-files
$(PACKAGE_FILES): FORCE
	@mkdir -p $(VENV)
	@find engine parts hooks steps hookbus configs examples \
		\( -name '*.py' -o -name '*.yaml' -o -name py.typed \) -print | LC_ALL=C sort > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

$(STAMP): $(TORCH_STAMP) setup.cfg pyproject.toml $(PACKAGE_FILES)
	$(BIN)/pip install -e .[dev,wandb,mlflow,shards,timm] --config-settings editable_mode=strict
	touch $(STAMP)

FORCE:

demo: $(STAMP)
	$(BIN)/hookbus train configs/simclr_digits.yaml

# The whole suite, as CI runs it (.ci/run), on two pytest-xdist workers (each test file on
# one, the heaviest first: tests/file_schedule.py); docs/guides/testing.md.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup
	$(MAKE) --no-print-directory docs

# The kernel, parts, hooks and steps tests not marked slow (no training past a few steps,
# no subprocess or torchrun): the loop to run while changing code, under a minute on 2 cores.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow" tests/kernel tests/parts tests/hooks tests/steps

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# mypy on the package (pyproject.toml's [tool.mypy]: packages = hookbus); 0 errors.
typecheck: $(STAMP)
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf runs site .pytest_cache .ruff_cache

# The docs site, into site/; --strict fails on a broken link, anchor or snippet.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Every code block of README.md and docs/, run as written in a fresh copy of the tree
# (trainings included: about 20 minutes on 2 idle cores); see tests/doc_blocks.py.
doc-blocks: $(STAMP)
	$(BIN)/python -m tests.doc_blocks

# The reference pages generated from the code (config, events, hooks, run state).
docs-reference: $(STAMP)
	$(BIN)/python -m hookbus.reference
