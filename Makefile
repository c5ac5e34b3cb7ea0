# Two commands: `make lab` (JupyterLab on the tutorials) and `make test` (the whole suite).
# Both install everything they need into .venv; a second run reuses what is there. tapekit's pictures
# need no system package: graphviz-pure, a dependency of tapekit, draws them (tapekit/viz/render.py).
# `make test-versions` runs the unit tests on each Python of VERSIONS (not part of `make test`).
# `make docs` builds the documentation site into docs/_build/html, with no network and without running
# the tutorials (not part of `make test`, which tests the site it builds in tests/browser/test_site.py).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
ROOT   := $(shell [ "$$(id -u)" = 0 ] && echo yes)

.PHONY: lab test test-versions bench gpu-check chromium graphviz
.PHONY: docs

$(BIN)/python:
	$(PYTHON) -m venv $(VENV) || { [ -n "$(ROOT)" ] && apt-get update -qq && apt-get install -y -qq python3-venv && rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); } || { echo "python3 -m venv failed: install Debian's python3-venv (sudo apt-get install python3-venv)"; exit 1; }
	$(BIN)/python -m pip install -q --upgrade pip

# JupyterLab in .venv asks nothing about news and checks for no update: the tutorials open on their own.
QUIET_LAB := $(BIN)/jupyter labextension disable --level=sys_prefix @jupyterlab/apputils-extension:announcements >/dev/null 2>&1

# tapekit is installed editable in setuptools' strict mode: a tree of links to its modules under
# build/__editable__.*, put on sys.path, where import finds a regular package. The default mode's finder
# comes after the path's and is hidden wherever the current folder holds a folder named tapekit (a clone
# in ~, run from ~: import takes the clone for an empty namespace package); compat mode (the whole clone
# on sys.path) is deprecated. Strict mode sees edits at once, but a module added or removed needs a new
# install: .modules, the list of modules, changes only then and makes one.
EDITABLE := --config-settings editable_mode=strict

$(VENV)/.modules: $(BIN)/python FORCE
	@find tapekit -name '*.py' | sort > $@.new; if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

FORCE:

$(VENV)/.lab-installed: $(BIN)/python pyproject.toml $(VENV)/.modules
	$(BIN)/pip install -q $(EDITABLE) -e '.[lab]'
	$(QUIET_LAB)
	touch $@

$(VENV)/.test-installed: $(BIN)/python pyproject.toml $(VENV)/.modules
	$(BIN)/pip install -q $(EDITABLE) -e '.[test]'
	$(QUIET_LAB)
	touch $@

$(VENV)/.docs-installed: $(BIN)/python pyproject.toml $(VENV)/.modules
	$(BIN)/pip install -q $(EDITABLE) -e '.[docs]'
	touch $@

# The peers of the `bench` extra in pyproject.toml, installed one by one: one that cannot be installed
# here does not keep out the others, and the benchmarks report it as absent.
BENCH_PEERS := $(shell sed -n 's/^bench = \[\(.*\)\]/\1/p' pyproject.toml | tr -d ',')

$(VENV)/.bench-installed: $(VENV)/.test-installed pyproject.toml
	@for peer in $(BENCH_PEERS); do \
	  $(BIN)/pip install -q "$$peer" || echo "$$peer could not be installed: the benchmarks will report it as absent"; \
	done
	touch $@

# Test-only needs from Debian: Chromium, which the browser tests drive, and Graphviz's dot, the
# fallback renderer that tests/test_render.py checks against graphviz-pure; tapekit's pictures need
# neither.
graphviz:
	@command -v dot >/dev/null 2>&1 || { \
	  if [ -n "$(ROOT)" ]; then apt-get update -qq && apt-get install -y -qq graphviz; \
	  else echo "Graphviz's dot is missing (the tests check tapekit's fallback to it): install it with 'sudo apt-get install graphviz', then run make again."; exit 1; fi; }

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ -n "$(ROOT)" ]; then apt-get update -qq && apt-get install -y -qq chromium; \
	  else echo "Chromium is missing: install it with 'sudo apt-get install chromium', then run make again."; exit 1; fi; }

lab: $(VENV)/.lab-installed
	$(BIN)/jupyter lab --ip=127.0.0.1 --no-browser --notebook-dir=notebooks $(if $(ROOT),--allow-root)

test: $(VENV)/.test-installed chromium graphviz
	$(BIN)/python -m pytest -n 2 --dist loadgroup tests
	$(BIN)/python -m pytest -n 2 --dist loadfile --nbval notebooks --nbval-sanitize-with notebooks/sanitize.cfg

# The unit tests (all but tests/browser and the notebooks) on each Python of VERSIONS, found under
# pyenv's root or on PATH as pythonX.Y, each in its own venv under .venv/versions/. Every version
# runs; the summary says which passed.
VERSIONS   ?= 3.10 3.11 3.12 3.13
PYENV_ROOT ?= $(shell pyenv root 2>/dev/null || echo $$HOME/.pyenv)
UNIT_TESTS ?= tests --ignore=tests/browser

test-versions:
	@failed=""; for v in $(VERSIONS); do \
	  py=$$(ls -d $(PYENV_ROOT)/versions/$$v.*/bin/python 2>/dev/null | sort -V | tail -1); \
	  py=$${py:-$$(command -v python$$v)}; \
	  if [ -z "$$py" ]; then echo "Python $$v is missing: install it (pyenv install $$v) or set VERSIONS"; failed="$$failed $$v"; continue; fi; \
	  env=$(VENV)/versions/$$v; \
	  echo "== Python $$v ($$py)"; \
	  { [ -x $$env/bin/python ] || { $$py -m venv $$env && $$env/bin/python -m pip install -q --upgrade pip; }; } \
	  && { [ $$env/.installed -nt pyproject.toml ] || { $$env/bin/pip install -q $(EDITABLE) -e '.[unit]' && touch $$env/.installed; }; } \
	  && $$env/bin/python -m pytest -q -n 2 --dist loadgroup $(UNIT_TESTS) || failed="$$failed $$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "test-versions: failed on$$failed"; exit 1; else echo "test-versions: passed on $(VERSIONS)"; fi

# Warnings fail the build: a broken link or a docstring that does not render is an error.
docs: $(VENV)/.docs-installed
	$(BIN)/python -m sphinx -b html -W --keep-going -q docs docs/_build/html -d docs/_build/doctrees
	@echo "The site is in docs/_build/html: open docs/_build/html/index.html"

bench: $(VENV)/.bench-installed
	$(BIN)/python -m benchmarks

gpu-check: $(VENV)/.test-installed
	$(BIN)/pip install -q $(EDITABLE) -e '.[gpu]'
	$(BIN)/python -m pytest -q -n 4 tests --ignore=tests/browser
	$(BIN)/python -m benchmarks.gpu
