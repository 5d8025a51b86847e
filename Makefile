# Arena developer commands. Every target creates the virtual environment if needed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed


.PHONY: run test test-slow test-browser soak check lint typecheck imports proto proto-check bench native clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,ray,browser]'
	touch $(STAMP)

# The move path compiled with mypyc (docs/performance.md): rebuilt when one of its sources changes. A failed
# build is not fatal: Arena then runs the same code as pure Python, slower (`arena serve` says which).
NATIVE := clients/python/arena_client/_native.json
NATIVE_SOURCES := $(shell $(PYTHON) scripts/build_native.py --list 2>/dev/null)

$(NATIVE): $(STAMP) $(NATIVE_SOURCES) scripts/build_native.py clients/python/arena_client/_native.py
	$(BIN)/python scripts/build_native.py || echo "make: the move path stays pure Python (same behaviour, slower)"

# Bytecode for Arena's own packages, written ahead: every test, bot and CLI process imports them, and where
# PYTHONDONTWRITEBYTECODE is set (as on CI) Python would otherwise compile them again in each process.
BYTECODE := $(BIN)/python -m compileall -q -j 0 server reference_bots clients/python

## native: compile the move path with mypyc now (`make run` and `make test` do it when a source changed)
native: $(STAMP)
	$(BIN)/python scripts/build_native.py

PORT ?= 50051
DB ?= arena.db
ARGS ?=

## run: set up and start the server (hosted bots); `make run PORT=50052 DB=my.db ARGS=--no-ladder` to choose
run: $(STAMP) $(NATIVE)
	$(BYTECODE)
	$(BIN)/arena serve --port $(PORT) --db $(DB) $(ARGS)

JS_DEPS := clients/javascript/node_modules/.installed

# The JavaScript client's test needs its npm packages (skipped, with a message, where npm is missing).
$(JS_DEPS): clients/javascript/package.json clients/javascript/package-lock.json
	if command -v npm >/dev/null; then cd clients/javascript && npm ci --no-audit --no-fund --silent && touch node_modules/.installed; fi

## test: set up and run the quick test suite
test: $(STAMP) $(JS_DEPS) $(NATIVE)
	$(BYTECODE)
	$(BIN)/python -m pytest

## test-slow: the heavy experiments and exhaustive solvers only
test-slow: $(STAMP) $(JS_DEPS) $(NATIVE)
	$(BYTECODE)
	$(BIN)/python -m pytest -m slow

## test-browser: the web interface in a real browser (installs Debian's chromium and the playwright package
## when missing; never downloads Playwright's own browsers)
test-browser: $(STAMP)
	test -x /usr/bin/chromium || apt-get install -y chromium
	$(BIN)/python -m pytest -m browser -p no:randomly tests/web/test_browser.py

## soak: the restart soaks only (ladder + remote SDK bots, 20 server kills/restarts), figures printed
soak: $(STAMP) $(NATIVE)
	$(BYTECODE)
	$(BIN)/python -m pytest -m slow -s tests/ladder/test_soak.py tests/client/test_sdk_reconnect.py

## check: lint (ruff, import contracts), type check, generated code up to date, tests
check: lint typecheck proto-check test

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

## imports: the layer contracts of pyproject.toml (see docs/architecture.md)
imports: $(STAMP)
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy server/arena_games server/arena_server clients/python/arena_client reference_bots/arena_bots

## proto: regenerate the Python code from proto/arena/v1/*.proto
proto: $(STAMP)
	$(BIN)/python scripts/gen_proto.py

proto-check: $(STAMP)
	$(BIN)/python scripts/gen_proto.py --check

## bench: run every benchmark in bench/
bench: $(STAMP) $(NATIVE)
	for f in bench/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

clean:
	$(PYTHON) scripts/build_native.py --clean
	rm -rf $(VENV) build *.egg-info .mypy_cache .ruff_cache .pytest_cache
