# The two set-up commands of README.md. Each installs what it needs first.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --quiet

.PHONY: demo test install-test bench

demo:
	$(PIP) -e ".[examples]"
	vtrain notebook notebooks/01_multiworker_codelab.ipynb

install-test:
	$(PIP) -e ".[test]"

test: install-test
	$(PYTHON) -m pytest

# Benchmarks (not part of the tests): ratios measured side by side in one run.
bench: install-test
	$(PYTHON) tests/benchmarks/bench_orchestration.py
	$(PYTHON) tests/benchmarks/bench_service.py
	$(PYTHON) tests/benchmarks/bench_logs.py
