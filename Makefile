# The two set-up commands of README.md. Each installs what it needs first.
PYTHON ?= python3
PIP = $(PYTHON) -m pip install --quiet

SYSTEM_PACKAGES = docker.io docker-registry debootstrap chromium

.PHONY: demo test install-test install-keras2 install-system bench

demo:
	$(PIP) -e ".[examples]"
	$(MAKE) --no-print-directory install-keras2
	vtrain notebook notebooks/01_multiworker_codelab.ipynb

install-test:
	$(PIP) -e ".[test]"
	$(MAKE) --no-print-directory install-keras2

# Keras 2 (tf-keras) of the installed TensorFlow's version, without its `tensorflow` requirement
# (pip would install the GPU build over tensorflow-cpu)
install-keras2:
	$(PIP) --no-deps "tf-keras==$$($(PYTHON) -c 'from importlib.metadata import version; print(".".join(version("tensorflow-cpu").split(".")[:2]))').*"

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
