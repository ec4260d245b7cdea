# splitstate: the two commands a new user runs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Resolved jars and other rebuildable files stay inside the clone (ignored by git).
export SPLITSTATE_CACHE_DIR ?= $(CURDIR)/.cache

.PHONY: setup test check docs pytest demo lock clean

$(BIN)/.installed: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "splitstate needs Python 3.11+: run make with PYTHON=python3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c constraints.txt -e '.[dev]'
	touch $@

$(SPLITSTATE_CACHE_DIR)/.jvm-ready: $(BIN)/.installed framework/resources/*.xml
	$(BIN)/splitstate jvm
	touch $@

## setup: virtualenv, Python packages (pinned by constraints.txt), Kafka and Spark jars
setup: $(BIN)/.installed $(SPLITSTATE_CACHE_DIR)/.jvm-ready

## test: everything CI runs: lint, format check, type check, the docs site, the whole pytest suite
test: setup check pytest

check: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# two workers (pytest-xdist), each test file whole on one of them; the slowest tests listed
PYTEST_WORKERS ?= 2
pytest: setup
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadfile --durations=15

## demo: a local broker, a produce/consume round trip, results shown; stops what it started
demo: setup
	$(BIN)/python examples/demo.py

## lock: rewrite constraints.txt from a fresh resolution of pyproject.toml
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install -q -e '.[dev]'
	{ echo "# Exact versions for a fresh machine: pip install -c constraints.txt -e '.[dev]'."; \
	  echo "# Regenerate after changing pyproject.toml: make lock"; \
	  .lock-venv/bin/pip freeze --exclude-editable | grep -v '^-e'; } > constraints.txt
	rm -rf .lock-venv

## docs: serve the docs site at http://127.0.0.1:8000, rebuilt as pages change
docs: setup
	$(BIN)/mkdocs serve

clean:
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache .splitstate
