# ragd: the two commands a fresh clone needs are `make run` and `make test`.
VENV    ?= .venv
PY      := $(VENV)/bin/python
PIP     := $(PY) -m pip install --quiet --disable-pip-version-check
VAULT   ?=
# The Python the venv is made with: any 3.11 or newer (`make PYTHON=python3.12`). It is checked
# before anything is installed: Ubuntu 22.04's python3 is 3.10, macOS's own is 3.9.
PYTHON  ?= python3
PYTHON_MIN ?= 3.11
export HF_HUB_OFFLINE := 1

# mypy checks the packages under their installed names (ragd.daemon, ...: decision 0034), which
# the editable install serves through an import hook that mypy cannot follow: a view of symlinks.
MYPY := mkdir -p build/typecheck/ragd && for p in daemon tray mcp_bridge; do \
	  ln -sfn ../../../$$p build/typecheck/ragd/$$p; done && \
	MYPYPATH=build/typecheck $(VENV)/bin/mypy -p ragd.daemon -p ragd.tray -p ragd.mcp_bridge

.PHONY: setup check-python tray-menus run test test-busy test-fast lint bench bench-full clean model wheel mcpb \
	inspector

setup: $(VENV)/.installed

# Exits with what to do when the interpreter is missing or older than PYTHON_MIN.
NO_PYTHON := ragd needs Python $(PYTHON_MIN) or newer, and there is no $(PYTHON) here: install one, or name it with make PYTHON=/path/to/python3.12
PYTHON_OK := import sys; need = tuple(int(x) for x in sys.argv[1].split(".")); v = sys.version_info; \
	sys.exit(0 if v[:2] >= need else "ragd needs Python %s or newer, and %s is %d.%d. Name a newer one: make PYTHON=python3.12 (install it from python.org or your package manager; with uv: uv python install 3.12, then make PYTHON=\"$$(uv python find 3.12)\")" % (sys.argv[1], sys.executable, v[0], v[1]))
check-python:  ## is PYTHON (default python3) new enough for ragd? (make setup asks first)
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(NO_PYTHON)" >&2; exit 1; }
	@$(PYTHON) -c '$(PYTHON_OK)' $(PYTHON_MIN)

# torch first, CPU-only. PyPI's Linux torch is the CUDA build (gigabytes of nvidia-* and
# triton). PyTorch's CPU index serves torch 2.13.0+cpu, which pip prefers over the plain
# version (a local version sorts higher). It is probed first (5 s at most) and then given as
# an *extra* index: a machine that cannot reach it installs from its own index (a mirror that
# serves the CPU wheel) instead of retrying it for every package. TORCH_INDEX= skips it.
TORCH_INDEX ?= https://download.pytorch.org/whl/cpu
# The `reference` extra's torch pins, markers included (Intel Macs stop at 2.2.2).
TORCH := "torch==2.13.0; sys_platform != 'darwin' or platform_machine != 'x86_64'" \
	"torch==2.2.2; sys_platform == 'darwin' and platform_machine == 'x86_64' and python_version < '3.13'"
PROBE_INDEX := import sys, urllib.request as u; u.urlopen(u.Request(sys.argv[1] + "/torch/", method="HEAD"), timeout=5); print("--extra-index-url", sys.argv[1])
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || command -v $(PYTHON) >/dev/null 2>&1 || { echo "$(NO_PYTHON)" >&2; exit 1; }
	test -x $(PY) || { $(PYTHON) -c '$(PYTHON_OK)' $(PYTHON_MIN) && $(PYTHON) -m venv $(VENV); }
	@$(PY) -c '$(PYTHON_OK)' $(PYTHON_MIN) || { echo "($(VENV) was made with that Python: remove it, then make setup PYTHON=...)" >&2; exit 1; }
	index=$$($(if $(TORCH_INDEX),$(PY) -c '$(PROBE_INDEX)' "$(TORCH_INDEX)" 2>/dev/null)) || \
	  echo "note: $(TORCH_INDEX) not reachable: torch comes from your default index"; \
	  $(PIP) $$index $(TORCH)
	$(PIP) -e ".[dev]"
	$(PY) -m ragd.daemon.embed.model_pack build --if-stale  # the shipped graph (decision 0034)
	$(if $(filter Linux,$(shell uname -s)),$(MENUS_IF_POSSIBLE))
	$(PY) tests/test_install.py  # no CUDA packages came along
	touch $@

# The tray's menu on Linux: PyGObject, built against GTK's system libraries (docs/tray.md).
# Installed where pkg-config finds them; elsewhere a note, and ragd works without a menu.
MENU_LIBS := gobject-introspection-1.0 cairo
MENUS_IF_POSSIBLE := if pkg-config --exists $(MENU_LIBS) 2>/dev/null; then \
	  $(PIP) -e ".[tray-menus]" || \
	  echo "warning: PyGObject did not build: the tray will have no menu (ragd doctor)"; \
	else echo "note: no PyGObject, so no tray menu: \`ragd doctor\` names the system packages"; fi

tray-menus: setup  ## the tray's menu on Linux, once the system packages ragd doctor names are in
	$(PIP) -e ".[tray-menus]"

run: setup  ## index your vault (found from Obsidian, or VAULT=path; else a sample vault) and serve searches
	$(VENV)/bin/ragd index $(VAULT)
	$(VENV)/bin/ragd daemon $(if $(VAULT),--vault "$(VAULT)")

test: setup  ## lint, type check and the whole suite, as CI runs it
	$(VENV)/bin/ruff check daemon mcp_bridge tray tests bench
	$(MYPY)
	$(VENV)/bin/pytest -q

# The suite on a busy machine (issue 40): BURNERS processes that spin a core each run beside
# it, and every test must pass within its timeout. Tests bound no wall time (they compare
# ratios, or wait with deadlines made for a loaded machine); this is the check that they do.
BURNERS ?= 2
test-busy: setup  ## the whole suite with BURNERS (2) CPU-burning processes beside it
	@pids=""; for i in $$(seq $(BURNERS)); do $(PY) -c 'while True: pass' & pids="$$pids $$!"; done; \
	trap 'kill $$pids' EXIT; echo "$(BURNERS) CPU burners:$$pids"; \
	started=$$(date +%s); $(VENV)/bin/pytest -q --durations=15 $(PYTEST_ARGS); rc=$$?; \
	echo "suite with $(BURNERS) burners: exit $$rc in $$(( $$(date +%s) - started )) s"; exit $$rc

test-fast: setup  ## unit tests only (no model, no processes)
	$(VENV)/bin/pytest -q -m "not slow"

lint: setup
	$(VENV)/bin/ruff check daemon mcp_bridge tray tests bench
	$(MYPY)

# The official MCP Inspector CLI, which tests/mcp_bridge/test_inspector_cli.py drives against
# ragd-mcp (issue 37). 0.15.0 is the newest that runs on Node below 22.7.5 (Debian 12 ships 18);
# 1.0.3 the newest for Node 22.7.5 and later that 2.x (Node 22.19 and later) does not exclude.
# The two send --tool-arg values differently (mcp_bridge/coerce.py says how); both are tested.
INSPECTOR_DIR := build/inspector
INSPECTOR_PICK := const [a, b, c] = process.versions.node.split(".").map(Number); \
	console.log(a > 22 || (a === 22 && (b > 7 || (b === 7 && c >= 5))) ? "1.0.3" : "0.15.0")
INSPECTOR_PACKAGE := $(INSPECTOR_DIR)/node_modules/@modelcontextprotocol/inspector/package.json
# Another version: make inspector INSPECTOR_VERSION=0.15.0
INSPECTOR_VERSION ?=

inspector:  ## the MCP Inspector CLI in build/inspector, for its test (needs node and npm)
	@if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then \
	  echo "note: no node/npm, so no MCP Inspector: its test is skipped (install nodejs npm)"; \
	  exit 0; fi; \
	version=$(or $(INSPECTOR_VERSION),$$(node -e '$(INSPECTOR_PICK)')); \
	have=$$(node -p 'require("./$(INSPECTOR_PACKAGE)").version' 2>/dev/null || true); \
	if [ "$$have" = "$$version" ]; then \
	  echo "MCP Inspector $$version is in $(INSPECTOR_DIR)"; exit 0; fi; \
	echo "installing MCP Inspector $$version (node $$(node --version)) into $(INSPECTOR_DIR)"; \
	npm install --prefix $(INSPECTOR_DIR) --no-audit --no-fund --loglevel=error \
	  --save-exact "@modelcontextprotocol/inspector@$$version"

bench: setup  ## the quick benchmark set (a few minutes; needs ../shared/corpus or RAGD_CORPUS)
	$(PIP) -e ".[bench]"
	$(PY) bench/freshness.py --edits 30 --burst 200 --idle-seconds 10
	$(PY) bench/mcp_bridge.py
	$(PY) bench/quality.py --quick
	$(PY) bench/query_latency.py --quick
	$(PY) bench/extract.py --quick

bench-full: setup  ## every benchmark at full size (hours the first time: see docs/benchmarks.md)
	$(PIP) -e ".[bench]"
	$(PY) bench/ingest.py
	$(PY) bench/freshness.py
	$(PY) bench/mcp_bridge.py
	$(PY) bench/quality.py
	$(PY) bench/peer.py --full
	$(PY) bench/query_latency.py
	$(PY) bench/tray.py

model: setup  ## export the default model into the package again (the wheel ships it)
	$(PY) -m ragd.daemon.embed.model_pack build

wheel: setup  ## dist/ragd-<version>-py3-none-any.whl, the shipped graph included
	$(PY) -m ragd.daemon.embed.model_pack build --if-stale
	rm -rf build/lib build/bdist.* dist/ragd-*.whl
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .

mcpb: wheel  ## dist/ragd-<version>.mcpb, the MCP bundle a desktop client installs (uv runtime)
	$(PY) packaging/mcpb/build.py $$(ls -t dist/ragd-*.whl | head -1) --out dist

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache build dist
