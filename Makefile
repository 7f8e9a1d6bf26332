# The two set-up commands of README.md. Each installs what it needs first.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --quiet

SYSTEM_PACKAGES = docker.io docker-registry debootstrap chromium

.PHONY: demo test install-test install-system bench

demo:
	$(PIP) -e ".[examples]"
	vtrain notebook notebooks/01_multiworker_codelab.ipynb

install-test:
	$(PIP) -e ".[test]"

# the Docker engine, a registry and debootstrap for the container tests (root; apt)
install-system:
	@dpkg -s $(SYSTEM_PACKAGES) >/dev/null 2>&1 || (apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SYSTEM_PACKAGES))

test: install-system install-test
	$(PYTHON) -m pytest

# Benchmarks (not part of the tests): ratios measured side by side in one run.
bench: install-test
	$(PYTHON) tests/benchmarks/bench_cli.py
	$(PYTHON) tests/benchmarks/bench_orchestration.py
	$(PYTHON) tests/benchmarks/bench_service.py
	$(PYTHON) tests/benchmarks/bench_logs.py
	$(PYTHON) tests/benchmarks/bench_edit_to_running.py
	$(PYTHON) tests/benchmarks/bench_monitor.py
	$(PYTHON) tests/benchmarks/bench_cloud_path.py
