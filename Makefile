# The two commands that do all set-up on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing steelframe (first run takes a minute)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --progress-bar on -e '.[dev]'
	@touch $(STAMP)

# `make run PORT=9000` listens there (the PORT variable works for `steelframe dev` too).
run: $(STAMP)
	$(BIN)/steelframe dev $(if $(PORT),--port $(PORT))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo

# Three test processes (pytest-xdist): most tests wait on real processes, not the CPU.
# `make test PYTEST_ARGS="-n 0 tests/test_x.py"` runs one file in this process.
PYTEST_ARGS ?= -n 3
test: $(STAMP) lint
	$(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
