# The two commands that do all set-up on a fresh machine: `make run` and `make test`.
# Every command lives in .venv/bin: `source .venv/bin/activate` (or
# `export PATH="$PWD/.venv/bin:$PATH"`) puts them on PATH; the targets below run them as is.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# The runtime install (what `make run` needs) and the dev extras (tests, lint, benchmarks);
# the dev install includes the runtime one, so it marks both.
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed

# A .venv whose Python no longer runs (the interpreter it was made from was upgraded or
# removed: a Homebrew or pyenv upgrade) is made again: its stamps alone kept it, and every
# command in it failed with "make: .venv/bin/steelframe: No such file or directory".
# Not for `make clean` alone: it removes the .venv, and announced a rebuild it never did.
ifneq ($(wildcard $(VENV)),)
ifneq ($(if $(MAKECMDGOALS),$(filter-out clean,$(MAKECMDGOALS)),default),)
ifneq ($(shell $(BIN)/python -c 'print("runs")' 2>/dev/null),runs)
$(info ==> $(VENV)'s Python no longer runs: making $(VENV) again)
$(shell rm -f $(RUNTIME_STAMP) $(STAMP))
endif
endif
endif

.PHONY: run tui doctor desktop test lint bench clean wire

# uv installs what pip would (the same resolution from PyPI, bytecode compiled too), in
# parallel and from its cache: the dev install of a clean checkout took 12 s against pip's
# 37 s here (2026-12-06), most of `make test`'s set-up. Where uv cannot install (an index
# only pip is configured for, say), pip does, as before.
define install
	@$(BIN)/python -m pip install --quiet uv || true
	@if [ -x $(BIN)/uv ]; then echo "==> uv installs the packages, then compiles them: \
	10 to 20 s without a line after 'Installed N packages'"; fi
	@if [ -x $(BIN)/uv ] && $(BIN)/uv pip install --python $(BIN)/python --compile-bytecode -e '$(1)'; \
	then :; else echo "==> uv could not install: pip installs instead"; \
	$(BIN)/python -m pip install --quiet --upgrade pip && \
	$(BIN)/python -m pip install --progress-bar on -e '$(1)'; fi
endef

$(RUNTIME_STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing steelframe (first run takes a minute)"
	@$(BIN)/python -c '' 2>/dev/null || $(PYTHON) -m venv --clear $(VENV)
	$(call install,.)
	@touch $(RUNTIME_STAMP)

$(STAMP): pyproject.toml
	@echo "==> creating $(VENV) and installing steelframe with its dev extras"
	@$(BIN)/python -c '' 2>/dev/null || $(PYTHON) -m venv --clear $(VENV)
	$(call install,.[dev])
	@touch $(STAMP) $(RUNTIME_STAMP)

# `make run PORT=9000` listens there (the PORT variable works for `steelframe dev` too).
# `make run DATA_DIR=DIR` keeps this dev's database, Redis and sandbox in DIR (a second dev
# beside the first needs both: `make run DATA_DIR=../var2 PORT=9000`); `make tui` and
# `make desktop` take the same DATA_DIR to find it.
run: $(RUNTIME_STAMP)
	$(BIN)/steelframe dev$(if $(PORT), --port $(PORT))$(if $(DATA_DIR), --data-dir '$(DATA_DIR)')

# The clients and checks `make run` mentions, runnable as printed.
# `make tui` alone uses the `make run` running here (its URL and kept token: docs/tui.md);
# against anything else `STEELFRAME_TOKEN=... make tui URL=...` (or STEELFRAME_URL in the
# environment too). The token reaches the client through its environment, never its command
# line, which any user of the machine can read in `ps` for as long as the TUI runs; TOKEN=...
# still works.
tui: export STEELFRAME_TOKEN := $(or $(TOKEN),$(STEELFRAME_TOKEN))
tui: $(RUNTIME_STAMP)
	$(BIN)/steelframe tui$(if $(URL), --url $(URL))$(if $(DATA_DIR), --data-dir '$(DATA_DIR)')

doctor: $(RUNTIME_STAMP)
	$(BIN)/steelframe doctor

# `make desktop` alone opens the `make run` running here, signed in (docs/gui.md).
# `make desktop ARGS="--browser-arg=--no-sandbox"` passes ARGS on to `steelframe desktop`
# (as root, Chromium starts only without its sandbox: that choice is the operator's, docs/gui.md).
desktop: $(RUNTIME_STAMP)
	$(BIN)/steelframe desktop$(if $(URL), --url $(URL))$(if $(DATA_DIR), --data-dir '$(DATA_DIR)')$(if $(ARGS), $(ARGS))

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo

# The chat wire's names for the GUI and the TUI, from bot/contracts/chat.py, the chat
# sessions, messages, a turn's frames (a tagged union) and the stop, publish and file answers
# the TUI reads, from the chat contracts, the events stream's frames for the TUI, from
# bot/contracts/events.py, and the task JSON the TUI reads (board, task detail, run log),
# from bot/contracts/tasks.py, and an error answer's detail, from bot/contracts/errors.py
# (tests/test_chat_wire.py, test_tui_sessions_wire.py, test_events_wire.py,
# test_tui_tasks_wire.py and test_tui_errors_wire.py fail while they are stale).
wire: $(RUNTIME_STAMP)
	$(BIN)/python -m bot.contracts.chat_wire
	$(BIN)/python -m bot.contracts.chat_sessions_wire
	$(BIN)/python -m bot.contracts.events_wire
	$(BIN)/python -m bot.contracts.tasks_wire
	$(BIN)/python -m bot.contracts.errors_wire

# Four test processes (pytest-xdist) on two cores: many tests wait on real processes (a
# quiet run keeps ~1.6 cores busy in the suite's own processes; PostgreSQL and Redis, which
# run beside it, are not counted in that). Work stealing: a process that runs out of tests takes
# queued ones from a busy one, so the long tests at the end do not run one after another on
# one process (13 min 44 s with three processes and plain load distribution, 9 min with
# this; six processes were no faster on 2026-12-06: 11 min 37 s against four's 11 min 19 s,
# the CPU the same, ~1.6 cores busy; nor three, on 2026-12-06 again: 11 min 15 s against
# four's 11 min 0 s, 9 % less CPU but the machine 92 % busy against 97 %). Tests marked
# `slow` go out first (tests/conftest.py); the 20 slowest are listed.
# `make test PYTEST_ARGS="-n 0 tests/test_x.py"` runs one file in this process.
# Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE): the
# suite starts a few hundred Python processes (serve, worker, CLI), and each compiled every
# module of the project again (a CPU-minute of a 14-minute, CPU-bound run).
PYTEST_ARGS ?= -n 4 --dist worksteal --durations=20
test: $(STAMP) lint
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS)

# `make bench ARGS="dev_loop"` runs one benchmark (python -m bench --help lists them).
bench: $(STAMP)
	$(BIN)/python -m bench $(ARGS)

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache
