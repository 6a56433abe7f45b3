# ragd: the two commands a fresh clone needs are `make run` and `make test`.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip install --quiet --disable-pip-version-check
VAULT   ?=
export HF_HUB_OFFLINE := 1

.PHONY: setup run test test-fast lint bench bench-full clean

setup: $(VENV)/.installed

# torch first, CPU-only. PyPI's Linux torch is the CUDA build (gigabytes of nvidia-* and
# triton). PyTorch's CPU index serves torch 2.13.0+cpu, which pip prefers over the plain
# version (a local version sorts higher). Given as an *extra* index, a machine that cannot
# reach it still installs from its own index (a mirror that serves the CPU wheel); the short
# timeout keeps an unreachable index from stalling the install for minutes.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PIP) --timeout 10 --retries 1 $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch==2.13.0
	$(PIP) -e ".[dev]" --config-settings editable_mode=compat
	$(PY) tests/test_install.py  # no CUDA packages came along
	touch $@

run: setup  ## index your vault (found from Obsidian, or VAULT=path) and serve searches
	$(VENV)/bin/ragd index $(VAULT)
	$(VENV)/bin/ragd daemon $(if $(VAULT),--vault "$(VAULT)")

test: setup  ## lint, type check and the whole suite, as CI runs it
	$(VENV)/bin/ruff check daemon mcp_bridge tray tests bench
	$(VENV)/bin/mypy daemon mcp_bridge tray
	$(VENV)/bin/pytest -q

test-fast: setup  ## unit tests only (no model, no processes)
	$(VENV)/bin/pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check daemon mcp_bridge tray tests bench
	$(VENV)/bin/mypy daemon mcp_bridge tray

bench: setup  ## the quick benchmark set (a few minutes; needs ../shared/corpus or RAGD_CORPUS)
	$(PIP) -e ".[bench]" --config-settings editable_mode=compat
	$(PY) bench/freshness.py --edits 30 --burst 200 --idle-seconds 10
	$(PY) bench/mcp_bridge.py
	$(PY) bench/quality.py --quick
	$(PY) bench/query_latency.py --quick

bench-full: setup  ## every benchmark at full size (hours the first time: see docs/benchmarks.md)
	$(PIP) -e ".[bench]" --config-settings editable_mode=compat
	$(PY) bench/ingest.py
	$(PY) bench/freshness.py
	$(PY) bench/mcp_bridge.py
	$(PY) bench/quality.py
	$(PY) bench/peer.py --full
	$(PY) bench/query_latency.py
	$(PY) bench/tray.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
