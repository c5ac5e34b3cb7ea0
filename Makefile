# Two commands: `make lab` (JupyterLab on the tutorials) and `make test` (the whole suite).
# Both install everything they need into .venv; a second run reuses what is there.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ROOT   := $(shell [ "$$(id -u)" = 0 ] && echo yes)

.PHONY: lab test bench gpu-check graphviz chromium

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || { [ -n "$(ROOT)" ] && apt-get update -qq && apt-get install -y -qq python3-venv && rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); } || { echo "python3 -m venv failed: install Debian's python3-venv (sudo apt-get install python3-venv)"; exit 1; }
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.lab-installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[lab]'
	touch $@

$(VENV)/.test-installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# The peers of the `bench` extra in pyproject.toml, installed one by one: one that cannot be installed
# here does not keep out the others, and the benchmarks report it as absent.
BENCH_PEERS := $(shell sed -n 's/^bench = \[\(.*\)\]/\1/p' pyproject.toml | tr -d ',')

$(VENV)/.bench-installed: $(VENV)/.test-installed pyproject.toml
	@for peer in $(BENCH_PEERS); do \
	  $(BIN)/pip install -q "$$peer" || echo "$$peer could not be installed: the benchmarks will report it as absent"; \
	done
	touch $@

graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ -n "$(ROOT)" ]; then apt-get update -qq && apt-get install -y -qq graphviz; \
	  else echo "Graphviz's dot is missing: install it with 'sudo apt-get install graphviz', then run make again."; exit 1; fi; }

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ -n "$(ROOT)" ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else echo "Chromium is missing: install it with 'sudo apt-get install chromium', then run make again."; exit 1; fi; }

lab: $(VENV)/.lab-installed graphviz
	$(BIN)/jupyter lab --ip=127.0.0.1 --no-browser --notebook-dir=notebooks $(if $(ROOT),--allow-root)

test: $(VENV)/.test-installed graphviz chromium
	$(BIN)/python -m pytest -n 2 --dist loadgroup tests
	$(BIN)/python -m pytest -n 2 --dist loadfile --nbval notebooks --nbval-sanitize-with notebooks/sanitize.cfg

bench: $(VENV)/.bench-installed
	$(BIN)/python -m benchmarks

gpu-check: $(VENV)/.test-installed
	$(BIN)/pip install -q -e '.[gpu]'
	$(BIN)/python -m pytest -q -n 4 tests --ignore=tests/browser
	$(BIN)/python -m benchmarks.gpu
