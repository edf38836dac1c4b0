# Cadence: set-up, demo and tests. Every target makes its own virtual environment (.venv)
# from python3.11 the first time, and reinstalls when pyproject.toml changes.
#
#   make demo        train DDPG on Pendulum-v1 with `cadence train ddpg` (a couple of minutes on 2 cores);
#                    installs Cadence with the train extra only
#   make test        the test suite, without the tests marked slow; adds the test extras
#   make test-slow   only the tests marked slow (none collected counts as success)
#   make docs        the documentation site (docs/_build/html), offline; any warning fails it

PYTHON ?= python3.11
VENV   ?= .venv
TORCH  ?= torch==2.13.0
PYTEST_ARGS ?=

# the demo installs what `cadence train` needs; the tests add the extras they exercise
TRAIN_STAMP := $(VENV)/.cadence-train-installed
STAMP := $(VENV)/.cadence-installed
DOCS_STAMP := $(VENV)/.cadence-docs-installed

.PHONY: demo test test-slow docs venv clean

venv: $(STAMP)

# torch goes first, pinned, so that installing the package cannot pull another build of it
$(TRAIN_STAMP): pyproject.toml
	test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet "$(TORCH)"
	$(VENV)/bin/python -m pip install --quiet -e ".[train]"
	touch $@

$(STAMP): $(TRAIN_STAMP)
	$(VENV)/bin/python -m pip install --quiet -e ".[test,train]"
	touch $@

# --overwrite: `make demo` again replaces the previous demo run
demo: $(TRAIN_STAMP)
	$(VENV)/bin/cadence train ddpg --name demo --overwrite

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

# Sphinx on top of the test extras: the API pages import every module, the guides run
$(DOCS_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e ".[test,train,docs]"
	touch $@

# -E -W: read everything afresh; a broken reference, an undocumented public name, a failing
# docstring example or a failing guide block fails the build, naming it
docs: $(DOCS_STAMP)
	$(VENV)/bin/python -m sphinx -E -W --keep-going -q -b html docs docs/_build/html

# pytest exits with 5 when it collects nothing: no slow tests is not a failure
test-slow: $(STAMP)
	$(VENV)/bin/python -m pytest -q -m slow $(PYTEST_ARGS); \
	status=$$?; \
	if [ $$status -eq 5 ]; then echo "no slow tests collected"; exit 0; fi; \
	exit $$status

clean:
	rm -rf $(VENV) docs/_build docs/api docs/performance.md
