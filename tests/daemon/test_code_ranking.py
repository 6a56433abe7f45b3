"""Code search finds the implementation, whole and once (issue 36), against a real daemon and
the real MCP client: a description query ranks the method above its test, its example and its
doc section; the method comes back as itself (named with its class), once, with all its code
although it is embedded in several chunks; a query that asks for the test gets the test."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from code_fixtures import commit_all, git
from daemon_proc import DaemonProc, start_module_daemon
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="git")]

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
STEPS = "\n".join(f"        # step {n}: keep the running total of waited seconds\n"
                  f"        waited_{n} = min(self.cap, base * (2 ** {n}))" for n in range(30))
RETRY_PY = f'''"""Waiting between attempts of a flaky operation."""


class Backoff:
    """Delays for retrying an operation."""

    def __init__(self, base=0.5, cap=60.0):
        self.base = base
        self.cap = cap

    def delay_for(self, attempt):
        """How long to wait before the next attempt: the delay doubles each time and never
        exceeds the cap."""
        base = self.base
{STEPS}
        return min(self.cap, base * (2 ** attempt))
'''
TEST_PY = '''from backoff.retry import Backoff


def test_delay_doubles_each_time_and_stops_at_the_cap():
    """The delay before the next attempt doubles each time, up to the cap."""
    b = Backoff(base=1, cap=8)
    assert [b.delay_for(n) for n in range(5)] == [1, 2, 4, 8, 8]
'''
EXAMPLE_PY = '''from backoff.retry import Backoff

# How long to wait before each next attempt: the delay doubles, up to the cap.
for attempt in range(5):
    print(Backoff().delay_for(attempt))
'''
DOC_MD = ("# Retrying\n\n## Waiting between attempts\n\nThe delay before the next attempt "
          "doubles each time and never exceeds the cap.\n")
QUERY = "how long to wait before the next attempt, doubling each time up to a limit"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    root = tmp_path_factory.mktemp("code-ranking")
    repo = root / "backoff"
    for rel, text in {"src/backoff/retry.py": RETRY_PY, "tests/test_retry.py": TEST_PY,
                      "examples/retry_example.py": EXAMPLE_PY, "docs/retry.md": DOC_MD}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "Backoff between attempts")
    d = start_module_daemon(root, None, f"[obsidian]\nenabled = false\n\n[code]\ngroups = "
                            f"{{ lib = [{json.dumps(str(repo))}] }}\n"
                            '[mcp]\ntoolsets = ["search", "code"]\n')
    try:
        d.wait_idle()
        yield d
    finally:
        d.stop()


def coderag(home: Path, args: dict[str, Any]) -> dict[str, Any]:
    async def run() -> types.CallToolResult:
        variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
        params = StdioServerParameters(command=str(BRIDGE), env={
            **variables, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await s.call_tool("coderag_search", args)

    result = anyio.run(run)
    assert not result.isError and isinstance(result.content[0], types.TextContent)
    return dict(json.loads(result.content[0].text))


def test_the_method_first_whole_and_once(daemon: DaemonProc) -> None:
    chunks = daemon.call("search", {"query": "delay_for", "mode": "keyword", "top_k": 50,
                                    "collection": "lib"})
    named = [r for r in chunks["results"]
             if r["metadata"].get("symbol_name") == "Backoff.delay_for"]
    assert len(named) == 1  # one result per symbol, whatever its chunks
    found = coderag(daemon.home, {"query": QUERY, "top_k": 10})["results"]
    names = [(r["name"], r["file_path"]) for r in found]
    assert names[0] == ("Backoff.delay_for", "src/backoff/retry.py"), names
    assert found[0]["chunk_type"] == "method"
    assert len(names) == len(set(names)), names  # once
    code = found[0]["content"]
    assert code.startswith("    def delay_for(self, attempt):"), code[:80]
    assert "waited_29" in code and code.rstrip().endswith("(2 ** attempt))")  # whole
    assert code.count("waited_15 =") == 1  # the chunks' overlaps are not repeated

    rag = daemon.call("search", {"query": QUERY, "source_type": "code", "top_k": 10})
    metas = [r["metadata"] for r in rag["results"]]
    assert metas[0]["symbol_name"] == "Backoff.delay_for", [m["symbol_name"] for m in metas]
    assert rag["results"][0]["content"].count("waited_15 =") == 1
    roles = [m["file_path"].split("/")[0] for m in metas]
    first_other = min(roles.index(r) for r in ("tests", "examples", "docs") if r in roles)
    assert all(r == "src" for r in roles[:first_other])


def test_a_query_that_asks_for_the_test_gets_the_test(daemon: DaemonProc) -> None:
    found = coderag(daemon.home, {"query": "the test that checks the delay doubles up to "
                                           "the cap", "top_k": 5})["results"]
    assert found[0]["name"] == "test_delay_doubles_each_time_and_stops_at_the_cap", found
