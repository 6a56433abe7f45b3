"""The official MCP Inspector CLI against the real `ragd-mcp` and one real daemon (issue 37
item 7): it lists every tool of the five references and calls one of each with the object,
array or number parameter that the CLI sends as it does (``--tool-arg key=value`` text, which
``ragd.mcp_bridge.coerce`` puts right).

`make inspector` installs the CLI into build/inspector (0.15.0 on Node below 22.7.5, 1.0.3
after). Without it the test is skipped, unless RAGD_REQUIRE_INSPECTOR is set (CI sets it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import daemon_proc
import pytest
from code_fixtures import build_repo
from concept_fixtures import write_library
from daemon_proc import DaemonProc, wait_for

from ragd.daemon.settings.paths import resolve_paths
from ragd.mcp_bridge.tools import RESULT_FIELDS, select_tools

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="the Inspector's .bin link")]

REPO = Path(__file__).resolve().parents[2]
INSPECTOR = REPO / "build" / "inspector" / "node_modules" / ".bin" / "mcp-inspector"
INSPECTOR_PACKAGE = (REPO / "build" / "inspector" / "node_modules" / "@modelcontextprotocol" /
                     "inspector" / "package.json")
# Read at import: conftest clears every other RAGD_ variable before each test runs.
REQUIRE_INSPECTOR = bool(os.environ.get("RAGD_REQUIRE_INSPECTOR"))
BRIDGE = Path(sys.executable).parent / "ragd-mcp"
TOOLSETS = ["search", "index", "notes", "omni", "vault", "code", "concepts"]
CALL_TIMEOUT_S = 120  # node, the bridge and the call; the first search may load the model

NOTES = {
    "Running/Pacing.md": "---\ntags: [pacing, running]\n---\n# Pacing\n\nRun the first 42 "
                         "minutes slowly: even pacing wins the long run.\n",
    "Running/Gear.md": "---\ntags: [gear]\n---\n# Gear\n\nShoes for the 42 kilometre race and "
                       "a light rain jacket.\n",
}
# The fields each reference documents for the tool called.
FIELDS_001 = {"id", "content", "similarity", "file_path", "note_title", "header_context",
              "folder", "tags", "chunk_index", "token_count"}
FIELDS_002_BACKLOG = {"id", "externalId", "title", "type", "state", "tags"}
FIELDS_002_SEARCH = {"file_path", "chunk_type", "name", "content", "nl_summary", "score"}
FIELDS_004 = {"path", "title", "folder", "content", "score", "frontmatter"}


@dataclass
class Env:
    home: Path
    vault: Path
    daemon: DaemonProc
    version: str  # the Inspector's


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    if not INSPECTOR.exists():
        reason = f"the MCP Inspector CLI is not installed ({INSPECTOR}): run `make inspector`"
        if REQUIRE_INSPECTOR:
            pytest.fail(f"RAGD_REQUIRE_INSPECTOR is set but {reason}")
        pytest.skip(reason)
    version = json.loads(INSPECTOR_PACKAGE.read_text(encoding="utf-8"))["version"]
    root = tmp_path_factory.mktemp("inspector")
    vault = root / "vault"
    write_library(vault, per_topic=1)  # three long notes for the concept tools
    for rel, text in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(text, encoding="utf-8")
    repo = root / "uploader"
    build_repo(repo)
    backlog = root / "backlog"
    backlog.mkdir()
    (backlog / "retry.md").write_text("---\nid: T-7\ntype: story\nstate: Active\ntags: "
                                      "[uploads]\n---\n# Retry uploads\n", encoding="utf-8")
    (backlog / "leak.md").write_text("---\nid: B-2\ntype: bug\nstate: Resolved\n---\n"
                                     "# Session cache leaks\n", encoding="utf-8")
    (backlog / "epic.md").write_text("---\nid: E-1\ntype: epic\nstate: New\n---\n# Storage\n",
                                     encoding="utf-8")
    home = root / "home"
    config = resolve_paths({"RAGD_HOME": str(home)}).config_file
    config.parent.mkdir(parents=True)
    config.write_text(f"[mcp]\ntoolsets = {json.dumps(TOOLSETS)}\n\n"
                      "[concepts]\nmin_note_chars = 1000\n\n"
                      f"[code]\ngroups = {{ work = [{json.dumps(str(repo))}] }}\n"
                      f"backlog = {json.dumps(str(backlog))}\n", encoding="utf-8")
    daemon = DaemonProc(home, vault, root / "daemon.log").start()
    daemon_proc.STARTED.remove(daemon)  # stopped at the end of the module
    try:
        daemon.wait_idle()
        wait_for(lambda: daemon.call("concepts_status")["documents"] == 3, 120,
                 "the concepts of the three long notes")
        yield Env(home, vault, daemon, version)
    finally:
        daemon.stop()


def inspector(env: Env, method: str, tool: str | None = None, **args: Any) -> Any:
    """What the Inspector CLI prints for one call, as JSON; each call spawns a bridge.
    ``args`` go as ``--tool-arg key=value``: text as it is, anything else as JSON text."""
    command = [str(INSPECTOR), "-e", f"RAGD_HOME={env.home}", "-e", "HF_HUB_OFFLINE=1",
               "--cli", str(BRIDGE), "--method", method]
    if tool is not None:
        command += ["--tool-name", tool]
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value)
        command += ["--tool-arg", f"{key}={text}"]
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    done = subprocess.run(command, env={**variables, "RAGD_HOME": str(env.home),
                                        "HF_HUB_OFFLINE": "1"},
                          capture_output=True, text=True, encoding="utf-8",
                          timeout=CALL_TIMEOUT_S)
    where = f"Inspector {env.version}, {method} {tool or ''}: {done.stderr[-2000:]}"
    assert done.returncode == 0, where
    start = done.stdout.find("{")  # the JSON the CLI prints, after anything a wrapper echoes
    assert start >= 0, (where, done.stdout[-2000:])
    return json.loads(done.stdout[start:])


def answer(result: Any, tool: str) -> Any:
    """A call's result, checked to be no tool error: the JSON of its text block."""
    text = result["content"][0]["text"]
    assert result.get("isError", False) is False, (tool, text)
    return json.loads(text)


def test_inspector_lists_and_calls_the_tools_of_every_reference(env: Env) -> None:
    listed = inspector(env, "tools/list")["tools"]
    names = {t["name"] for t in listed}
    offered, _ = select_tools(TOOLSETS)
    assert names == {t.name for t in offered}, names ^ {t.name for t in offered}
    assert {"rag_search", "semantic_search", "coderag_search", "coderag_backlog",
            "concept_sources", "search"} <= names

    # 000: top_k, an integer
    found = answer(inspector(env, "tools/call", "rag_search", query="even pacing", top_k=1),
                   "rag_search")
    assert len(found["results"]) == 1 and set(found["results"][0]) == set(RESULT_FIELDS)
    assert found["results"][0]["source_path"].endswith("Pacing.md")
    # 001: n_results, an integer
    similar = answer(inspector(env, "tools/call", "semantic_search", query="running pace",
                               n_results=2), "semantic_search")
    assert len(similar) == 2 and all(set(r) == FIELDS_001 for r in similar), similar
    # 002: types, an array; top_k, a number
    backlog = answer(inspector(env, "tools/call", "coderag_backlog", action="list",
                               types=["story", "bug"]), "coderag_backlog")
    assert {i["externalId"] for i in backlog["items"]} == {"T-7", "B-2"}, backlog
    assert all(set(i) >= FIELDS_002_BACKLOG for i in backlog["items"])
    code = answer(inspector(env, "tools/call", "coderag_search", query="upload with retry",
                            top_k=2), "coderag_search")
    assert 1 <= len(code["results"]) <= 2
    assert all(set(r) >= FIELDS_002_SEARCH for r in code["results"]), code
    # 003: concept, a string or an array: the 0.15 CLI sends the array as text
    per_concept = answer(inspector(env, "tools/call", "concept_sources",
                                   concept=["wild yeast", "dark matter"],
                                   include_metadata=False), "concept_sources")
    assert per_concept["concepts_searched"] == ["wild yeast", "dark matter"], per_concept
    assert [[s["title"] for s in sources] for sources in per_concept["results"]] == [
        ["baking-0"], ["astronomy-0"]], per_concept
    # 004: filters, an optional object (sent as text by the 0.15 CLI); query "42", which a
    # 1.x CLI sends as a number
    hits = answer(inspector(env, "tools/call", "search", query="42", mode="hybrid",
                            filters={"tags": "pacing"}), "search")
    assert hits and all(set(h) == FIELDS_004 for h in hits), hits
    assert {h["path"] for h in hits} == {"Running/Pacing.md"}, hits
