"""The bridge stays thin: a fresh interpreter that imports it and builds the server loads no
part of the indexing stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# Not watchfiles: the SDK's own import loads it (through uvicorn's reloader), in ~3 ms.
HEAVY = ("torch", "faiss", "whoosh", "sentence_transformers", "numpy", "transformers",
         "tokenizers", "pystray", "PIL")

PROBE = """
import json, sys
import ragd.mcp_bridge.server as s
after_import = sorted(sys.modules)
link = s.DaemonLink()
server = s.build_server(s.choose_tools(s.configured_toolsets()), link)
server.create_initialization_options()
import ragd.mcp_bridge.clients
print(json.dumps({"import": after_import, "built": sorted(sys.modules)}))
"""


def test_the_bridge_imports_nothing_heavy(ragd_home: object) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True, timeout=120, env={**os.environ, "PYTHONWARNINGS": ""})
    loaded = json.loads(out.stdout)
    for stage in ("import", "built"):
        heavy = sorted(m for m in loaded[stage] if m.split(".")[0] in HEAVY)
        assert heavy == [], f"after {stage}: {heavy}"
    # The indexing side of the daemon package is not loaded either.
    assert not [m for m in loaded["built"] if m.startswith(("ragd.daemon.runtime.app", "ragd.daemon.runtime.service",
                                                            "ragd.daemon.search", "ragd.daemon.stores.catalog"))]
