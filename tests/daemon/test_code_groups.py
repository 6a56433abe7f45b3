"""Code groups against a real daemon (decision 0030): a repository built with git, its symbols
found by name and description with their lines, its commits by author and date, a new commit
searchable within 2 s, a force-pushed commit gone, a repository added by rag_index."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import daemon_proc
import pytest
import shared_data
from code_fixtures import build_repo, commit_all, git
from daemon_proc import DaemonProc, wait_for

from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="git and signals")]


@dataclass
class Env:
    root: Path
    home: Path
    repo: Path
    shas: dict[str, str]
    daemon: DaemonProc

    def search(self, query: str, **kw: Any) -> list[dict[str, Any]]:
        params = {"query": query, "collection": "work", "top_k": 10, **kw}
        return list(self.daemon.call("search", params)["results"])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("code")
    repo = root / "uploader"
    shas = build_repo(repo)
    home = root / "home"
    config = resolve_paths({"RAGD_HOME": str(home)}).config_file
    config.parent.mkdir(parents=True)
    backlog = root / "backlog"
    backlog.mkdir()
    (backlog / "retry.md").write_text("---\nid: T-7\ntype: story\nstate: Active\n"
                                      "tags: [uploads]\ncode: [src/upload.py]\n---\n"
                                      "# Retry uploads on flaky networks\n", encoding="utf-8")
    (backlog / "bug.md").write_text("---\nid: B-2\ntype: bug\nstate: Resolved\n---\n"
                                    "# Session cache leaks\n", encoding="utf-8")
    config.write_text(f"[obsidian]\nenabled = false\n\n[code]\n"
                      f"groups = {{ work = [{json.dumps(str(repo))}] }}\n"
                      f"backlog = {json.dumps(str(backlog))}\n"
                      "history_months = 600\n", encoding="utf-8")
    daemon = DaemonProc(home, None, root / "daemon.log").start()
    daemon_proc.STARTED.remove(daemon)  # stopped at the end of the module, not of a test
    try:
        daemon.wait_idle()
        yield Env(root, home, repo, shas, daemon)
    finally:
        daemon.stop()


def test_symbols_by_name_and_description_with_their_lines(env: Env) -> None:
    hits = env.search("upload_with_retry", source_type="code", mode="keyword")
    top = hits[0]["metadata"]
    assert (top["symbol_name"], top["symbol_type"], top["start_line"], top["end_line"]) == \
        ("upload_with_retry", "function", 7, 14)
    assert top["language"] == "python" and top["file_path"] == "src/upload.py"
    assert hits[0]["source_path"] == str(env.repo / "src" / "upload.py")
    described = env.search("where do we try a network transfer again after a failure",
                           source_type="code")
    assert described[0]["metadata"]["symbol_name"] == "upload_with_retry", \
        [h["metadata"].get("symbol_name") for h in described]
    ts = env.search("SessionCache remember", source_type="code", mode="keyword")
    assert ts[0]["metadata"]["file_path"] == "web/sessions.ts"  # after the rename
    assert {h["metadata"]["symbol_name"] for h in ts} >= {"SessionCache"}
    go = env.search("ParseQuota", mode="keyword")[0]["metadata"]
    assert (go["language"], go["start_line"]) == ("go", 4)


def test_gitignore_and_vendored_are_not_indexed(env: Env) -> None:
    assert not env.search("ignored_helper", mode="keyword")
    skipped = env.daemon.call("skipped", {"collection": "work"})
    codes = {(r["path"], r["skip_code"]) for r in skipped}
    assert ("uploader/node_modules", "vendored") in codes


def test_commits_by_author_and_date(env: Env) -> None:
    bob = env.search("sessions browser cache", source_type="commit", author="bob",
                     mode="keyword")
    assert bob and all(h["metadata"]["author_name"] == "Bob Stone" for h in bob)
    meta = bob[0]["metadata"]
    assert meta["commit_sha"] == env.shas["web"] and meta["commit_sha_short"] == \
        env.shas["web"][:8]
    assert meta["file_path"] == "web/session.ts" and meta["additions"] == 14
    assert meta["author_email"] == "bob@example.org"
    assert meta["author_date"].startswith("2026-10-05")
    dated = env.search("quotas rename session", source_type="commit", mode="keyword",
                       date_from="2026-11-01", date_to="2026-11-30")
    assert dated and {h["metadata"]["commit_sha"] for h in dated} == {env.shas["rename"]}
    # One result per commit, its files in metadata (issue 36).
    assert len(dated) == 1, dated
    renamed = [f for f in dated[0]["metadata"]["files"] if f["change"] == "renamed"]
    assert renamed and renamed[0]["old_path"] == "web/session.ts"
    assert not env.search("quotas rename session", source_type="commit", mode="keyword",
                          date_to="2026-10-31", author="ann")


def test_new_commit_searchable_within_2s_and_force_push_removes_it(env: Env) -> None:
    (env.repo / "src" / "quokka.py").write_text(
        "def quokka_checksum(data):\n    return sum(data)\n", encoding="utf-8")
    sha = commit_all(env.repo, "Add the quokka checksum")
    t0 = time.monotonic()
    wait_for(lambda: any(h["metadata"].get("commit_sha") == sha
                         for h in env.search("quokka checksum", source_type="commit",
                                             mode="keyword")), 10, "the new commit")
    took = time.monotonic() - t0
    assert took < 2.0, f"new commit searchable after {took:.2f} s"
    assert env.search("quokka_checksum", source_type="code", mode="keyword")
    # A force-push (the branch moved back and on): the dropped commit leaves the index.
    git(env.repo, "reset", "-q", "--hard", "HEAD~1")
    (env.repo / "NOTES.md").write_text("# Notes\n\nsomething else\n", encoding="utf-8")
    other = commit_all(env.repo, "Something else entirely", date="2026-11-20T08:00:00+00:00")

    def gone() -> bool:
        shas = {h["metadata"].get("commit_sha") for h in env.search(
            "quokka checksum something else entirely", source_type="commit", mode="keyword")}
        return sha not in shas and other in shas

    wait_for(gone, 10, "the force-pushed commit to be gone")
    assert not env.search("quokka_checksum", source_type="code", mode="keyword")


def test_rag_index_adds_a_repository_to_the_group(env: Env) -> None:
    other = env.root / "tools"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    (other / "lint.sh").write_text("#!/bin/sh\n# runs the zebra linter\nzebra_lint() {\n"
                                   "  echo lint\n}\n", encoding="utf-8")
    commit_all(other, "Add the zebra linter")
    out = env.daemon.call("index", {"collection": "work", "path": str(other)}, timeout=120)
    assert out["collection"] == "work" and out["indexed"] >= 2
    (hit,) = [h for h in env.search("zebra_lint", mode="keyword", source_type="code")]
    assert hit["metadata"]["repository"] == "tools" and hit["metadata"]["start_line"] == 3
    assert hit["metadata"]["language"] == "bash"
    info = env.daemon.call("collection_info", {"collection": "work"})
    assert info["type"] == "code" and set(info["source_types"]) >= {"code", "commit"}


# -- reference 002's tools through the real MCP client (the same daemon) ---------------------

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
REFERENCE = shared_data.REFERENCE


def reference_tools() -> dict[str, dict[str, tuple[str, bool, Any]]]:
    """tool -> parameter -> (type, required, default), read from reference 002's tables."""
    found = sorted(REFERENCE.glob("002_*")) if REFERENCE.is_dir() else []
    if not found:
        pytest.skip(f"reference 002 not found under {REFERENCE}")
    out: dict[str, dict[str, tuple[str, bool, Any]]] = {}
    tool = None
    for line in found[0].read_text(encoding="utf-8").splitlines():
        if line.startswith("## coderag_"):
            tool = line[3:].strip()
            out[tool] = {}
        elif tool and line.startswith("| `") and "### Output" not in line:
            cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
            if len(cells) < 5:
                continue
            name, kind, required, default = (c.strip("`") for c in cells[:4])
            out[tool][name] = (kind, required == "Yes", default)
        elif line.startswith("### Output"):
            tool = tool if tool is None else tool  # the input table is over
            if tool:
                out.setdefault(tool, {})
                tool = None
    return out


def _default(text: str) -> Any:
    if text in ("--", ""):
        return None
    return json.loads(text.strip("`"))


def call_tools(env: Env, calls: list[tuple[str, dict[str, Any]]]) -> tuple[Any, list[Any]]:
    import os

    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    params = StdioServerParameters(command=str(BRIDGE), env={
        **variables, "RAGD_HOME": str(env.home), "HF_HUB_OFFLINE": "1"})

    async def run() -> tuple[Any, list[Any]]:
        with open(env.root / "bridge.log", "a", encoding="utf-8") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                listed = await session.list_tools()
                return listed, [await session.call_tool(n, a) for n, a in calls]

    return anyio.run(run)


def test_every_reference_tool_through_the_mcp_client(env: Env) -> None:
    reference = reference_tools()
    assert set(reference) == {"coderag_search", "coderag_context", "coderag_explain",
                              "coderag_status", "coderag_backlog", "coderag_docs"}
    calls = [
        ("coderag_search", {"query": "retry an upload", "language": "py", "top_k": 3}),
        ("coderag_search", {"query": "session cache", "chunk_type": "class"}),
        ("coderag_context", {"file_path": "src/upload.py", "max_tokens": 120}),
        ("coderag_context", {"file_path": "src/upload.py"}),
        ("coderag_explain", {"name": "upload_with_retry", "detail_level": "brief"}),
        ("coderag_explain", {"name": "Uploader"}),
        ("coderag_status", {}),
        ("coderag_docs", {"query": "how are uploads retried"}),
        ("coderag_backlog", {"action": "search", "query": "retry uploads", "types": ["story"]}),
        ("coderag_backlog", {"action": "get", "id": "T-7"}),
        ("coderag_backlog", {"action": "list", "states": ["Resolved"]}),
        ("coderag_search", {"query": "", "file_path": "../etc"}),
        ("coderag_explain", {}),
        ("coderag_search", {"query": "x", "top_k": 500}),
        ("coderag_context", {"file_path": "src/no_such_file.py"}),
    ]
    listed, results = call_tools(env, calls)
    tools = {t.name: t for t in listed.tools}
    for name, params in reference.items():
        schema = tools[name].inputSchema
        assert set(schema["properties"]) == set(params), name
        assert set(schema.get("required", [])) == {p for p, (_, req, _) in params.items()
                                                   if req}, name
        for pname, (kind, _, default) in params.items():
            prop = schema["properties"][pname]
            assert prop.get("default") == _default(default), (name, pname)
            base = prop.get("type")
            if kind.endswith("[]"):
                assert base == "array", (name, pname)
                enum = re.findall(r'"([^"]+)"', kind)
                assert prop["items"].get("enum", []) == enum, (name, pname)
            elif kind.startswith('"'):  # an enum
                assert prop["enum"] == re.findall(r'"([^"]+)"', kind), (name, pname)
            else:
                assert base == kind, (name, pname)
    texts = [r.content[0].text for r in results]
    assert all(t.startswith("{") for t in texts), texts
    out = [json.loads(t) for t in texts]
    errors = [r.isError for r in results]
    assert errors == [False] * 11 + [True] * 4, [o for o in out if "error" in o]
    assert "no indexed file 'src/no_such_file.py'" in out[14]["message"]  # issue 37
    first = out[0]["results"][0]
    assert set(first) == {"file_path", "chunk_type", "name", "content", "nl_summary", "score"}
    assert first["name"] == "upload_with_retry" and "def upload_with_retry" in first["content"]
    assert all(r["chunk_type"] == "class" for r in out[1]["results"]) and out[1]["results"]
    small, full = out[2], out[3]
    assert set(small) == {"context", "token_count", "truncated", "primary_chunks",
                          "related_chunks"}
    assert small["token_count"] <= 120 and small["truncated"]
    assert full["token_count"] <= 8000 and "<primary_results>" in full["context"]
    assert full["primary_chunks"] > small["primary_chunks"]
    brief = out[4]["explanation"]
    assert brief["detail_level"] == "brief" and "code" not in brief["chunks"][0]
    assert "exponential backoff" in brief["chunks"][0]["nl_summary"]
    detailed = out[5]["explanation"]
    assert out[5]["chunks_found"] >= 1 and "class Uploader" in detailed["chunks"][0]["code"]
    assert {"upload_with_retry", "Uploader.send_batch"} <= set(detailed["related_symbols"])
    assert out[6]["health"] == "ok" and "python" in out[6]["languages"]
    assert out[6]["total_chunks"] > 0 and set(out[6]) == {
        "total_chunks", "last_indexed", "model", "languages", "health"}
    assert "Retries" in [r["heading"] for r in out[7]["results"][:2]]
    assert out[7]["results"][0]["source"] == "markdown"
    assert [i["id"] for i in out[8]["items"]] == ["T-7"]
    assert out[9]["item"]["linkedCodePaths"] == ["src/upload.py"]
    assert [i["id"] for i in out[10]["items"]] == ["B-2"]
    for err in out[11:]:
        assert err["error"] == "Invalid input" and err["message"] and err["details"]
