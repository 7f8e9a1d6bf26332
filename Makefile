# The two set-up commands of README.md. Each installs what it needs first.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --quiet

.PHONY: demo test install-test

demo:
	$(PIP) -e ".[examples]"
	vtrain run jupyter_ext/examples/multiworker.yaml

install-test:
	$(PIP) -e ".[test]"

test: install-test
	$(PYTHON) -m pytest
