# Cadence: set-up, demo and tests. Every target makes its own virtual environment (.venv)
# from python3.11 the first time, and reinstalls when pyproject.toml changes.
#
#   make demo        train DDPG on Pendulum-v1 with `cadence train ddpg` (a couple of minutes on 2 cores)
#   make test        the test suite, without the tests marked slow
#   make test-slow   only the tests marked slow (none collected counts as success)

PYTHON ?= python3.11
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PYTEST_ARGS ?=

STAMP := $(VENV)/.cadence-installed

.PHONY: demo test test-slow venv clean

venv: $(STAMP)

# torch goes first, pinned, so that installing the package cannot pull another build of it
$(STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet "$(TORCH)"
	$(VENV)/bin/python -m pip install --quiet -e ".[test,train]"
	touch $@

# --overwrite: `make demo` again replaces the previous demo run
demo: $(STAMP)
	$(VENV)/bin/cadence train ddpg --name demo --overwrite

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

# pytest exits with 5 when it collects nothing: no slow tests is not a failure
test-slow: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m slow $(PYTEST_ARGS); \
	status=$$?; \
	if [ $$status -eq 5 ]; then echo "no slow tests collected"; exit 0; fi; \
	exit $$status

clean:
	rm -rf $(VENV)
