"""The server in-process over the SDK's memory transport, with a stand-in for the daemon link.

Unit tests of the mapping (arguments -> IPC params, answers -> tool results, errors -> tool
errors); the real daemon and stdio are exercised in test_mcp_server.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp.types as types
import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from ragd.daemon.errors import DaemonUnavailable, InvalidArgument, NotFound, ProtocolMismatch
from ragd.mcp_bridge.link import CallTimedOut
from ragd.mcp_bridge.server import build_server, choose_tools, configured_toolsets, error_text
from ragd.mcp_bridge.tools import ADMIN_ANSWER_S, TOOLS

RESULT = {"title": "Levain care", "content": "Feed the levain", "collection": "obsidian",
          "source_type": "markdown", "source_path": "/v/Levain care.md",
          "source_uri": "obsidian://open?vault=v&file=Levain%20care", "score": 0.9,
          "metadata": {"tags": ["kitchen"], "heading_path": ["Levain care"], "chunk_id": 1},
          "rank": 1}
README = str(Path(__file__).resolve().parents[2] / "README.md")
CONVERTED = {"file_path": README, "title": "t", "source_type": "txt", "content_hash": "ab",
             "cached": True, "markdown": "# t\n", "metadata": {}}
DOC = {"source_path": "/d/a.pdf", "content_hash": "ab", "file_size": 3,
       "file_modified_at": None, "discovered_at": "2024-01-01T00:00:00+00:00"}
COLLECTION = {"name": "obsidian", "type": "system", "description": "the vault",
              "source_count": 8, "chunk_count": 8, "last_indexed": "2024-01-01T00:00:00+00:00",
              "created_at": "2024-01-01T00:00:00+00:00", "skipped_count": 0}


class FakeLink:
    """Answers each daemon method from a table; a callable answer may raise."""

    def __init__(self, answers: dict[str, Any]) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any], float]] = []
        self.address = None
        self.seen_ready = True  # a daemon past start-up: no status check before each call

    def call(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        self.calls.append((method, params, timeout))
        answer = self.answers[method]
        return answer(params) if callable(answer) else answer


def call_tools(link: FakeLink, calls: list[tuple[str, dict[str, Any]]],
               toolsets: tuple[str, ...] = ("search", "index")) -> tuple[
                   list[types.Tool], list[types.CallToolResult]]:
    server = build_server(choose_tools(toolsets), link)  # type: ignore[arg-type]

    async def run() -> tuple[list[types.Tool], list[types.CallToolResult]]:
        async with create_connected_server_and_client_session(server) as session:
            listed = (await session.list_tools()).tools
            return listed, [await session.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def raising(exc: Exception) -> Callable[[dict[str, Any]], Any]:
    def answer(params: dict[str, Any]) -> Any:
        raise exc

    return answer


def text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


def test_calls_map_to_daemon_methods_and_results_keep_the_reference_fields() -> None:
    link = FakeLink({
        "search": {"results": [RESULT], "indexing": {"active": True, "remaining": 3},
                   "timing_ms": 1.0},
        "list_collections": [COLLECTION],
        "collection_info": {**COLLECTION, "source_types": ["markdown"],
                            "sample_titles": ["Levain care"], "root": "/v", "skips": {}},
        "index": {"collection": "obsidian", "indexed": 0, "skipped": 0, "errors": 0,
                  "total_found": 8},
        "convert": {**CONVERTED, "chars": 20},
        "doc_store_info": [DOC],
    })
    listed, results = call_tools(link, [
        ("rag_search", {"query": "levain", "top_k": 3, "collection": "system"}),
        ("rag_convert", {"file_path": README}),
        ("rag_list_collections", {}),
        ("rag_collection_info", {"collection": "obsidian"}),
        ("rag_index", {"collection": "obsidian"}),
        ("rag_doc_store_info", {}),
    ])
    assert [t.name for t in listed] == [t.name for t in TOOLS]
    assert all(not r.isError for r in results)
    for spec, result in zip(TOOLS, results, strict=True):
        jsonschema.validate(result.structuredContent, spec.output_schema)
    search, converted, listing, info, index, docs = results
    assert converted.structuredContent == {**CONVERTED, "truncated": False, "total_chars": 4}
    assert docs.structuredContent == {"result": [DOC]}
    assert search.structuredContent == {
        "results": [{k: v for k, v in RESULT.items() if k != "rank"}],
        "indexing": {"active": True, "remaining": 3}}
    assert json.loads(text(search)) == search.structuredContent
    assert listing.structuredContent == {"result": [
        {k: v for k, v in COLLECTION.items() if k != "skipped_count"}]}
    assert json.loads(text(listing)) == listing.structuredContent["result"]
    assert info.structuredContent and "root" not in info.structuredContent
    assert index.structuredContent == {"collection": "obsidian", "indexed": 0, "skipped": 0,
                                       "errors": 0, "total_found": 8}
    assert [c[:2] for c in link.calls] == [
        ("search", {"query": "levain", "top_k": 3, "collection": "system"}),
        ("convert", {"file_path": README}),
        ("list_collections", {}), ("collection_info", {"collection": "obsidian"}),
        ("index", {"collection": "obsidian", "wait": True,
                   "answer_within_s": ADMIN_ANSWER_S}), ("doc_store_info", {})]


def test_bad_arguments_are_answered_without_calling_the_daemon() -> None:
    link = FakeLink({})
    _, results = call_tools(link, [("rag_search", {"query": "x", "top_k": 500}),
                                   ("rag_search", {"query": "x", "date_to": "yesterday"}),
                                   ("rag_index", {"collection": "p", "path": "/no/such/dir"})])
    assert link.calls == []
    for result, param in zip(results, ["top_k", "date_to", "path"], strict=True):
        assert result.isError
        assert f"`{param}`" in text(result) and "Fix:" in text(result)


@pytest.mark.parametrize(("exc", "words"), [
    (DaemonUnavailable("no ragd daemon is running", "start it with `ragd start`"),
     ["could not reach", "no ragd daemon is running", "What to do: Start it"]),
    (ProtocolMismatch("protocol mismatch", "restart the daemon"), ["different versions"]),
    (InvalidArgument("collection", "unknown collection 'nope'", "use obsidian"),
     ["Invalid argument `collection`", "unknown collection 'nope'", "Fix: Use obsidian"]),
    (CallTimedOut("search", 60, "busy"), ["timed out", "try again"]),
    (RuntimeError("boom\nTraceback (most recent call last)"), ["internal error", "reference"]),
])
def test_every_failure_is_a_tool_error_with_what_to_do(exc: Exception,
                                                       words: list[str]) -> None:
    _, [result] = call_tools(FakeLink({"search": raising(exc)}),
                             [("rag_search", {"query": "levain"})])
    assert result.isError and result.structuredContent is None
    for word in words:
        assert word in text(result)
    assert "Traceback" not in text(result) and "boom" not in text(result)


def test_unknown_collections_name_the_parameter_and_index_timeouts_explain() -> None:
    link = FakeLink({
        "collection_info": raising(NotFound("unknown collection 'nope'", "known: obsidian")),
        "index": raising(CallTimedOut("index", 3600, "")),
    })
    _, [info, index] = call_tools(link, [("rag_collection_info", {"collection": "nope"}),
                                         ("rag_index", {"collection": "obsidian"})])
    assert info.isError and "`collection`" in text(info) and "Known: obsidian" in text(info)
    assert index.isError and "still indexing in the background" in text(index)


def test_toolsets_restrict_what_is_listed_and_callable() -> None:
    listed, [result] = call_tools(FakeLink({}), [("rag_search", {"query": "x"})],
                                  toolsets=("index",))
    assert [t.name for t in listed] == ["rag_index"]
    assert result.isError and "Unknown tool 'rag_search'" in text(result)


def test_toolsets_come_from_the_config_file_and_the_environment(
        ragd_home: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    assert configured_toolsets() == ["search", "index", "notes"]
    assert not (ragd_home / "config" / "config.toml").exists()  # the bridge writes no config
    (ragd_home / "config").mkdir(parents=True, exist_ok=True)
    (ragd_home / "config" / "config.toml").write_text('[mcp]\ntoolsets = ["index"]\n',
                                                      encoding="utf-8")
    assert configured_toolsets() == ["index"]
    monkeypatch.setenv("RAGD_MCP_TOOLSETS", "search,nonsense")
    assert configured_toolsets() == ["search", "nonsense"]
    with caplog.at_level("WARNING"):
        assert [s.name for s in choose_tools(configured_toolsets())] == [
            "rag_search", "rag_convert", "rag_list_collections", "rag_collection_info",
            "rag_doc_store_info"]
    assert "nonsense" in caplog.text
    (ragd_home / "config" / "config.toml").write_text("[mcp\n", encoding="utf-8")
    assert configured_toolsets() == ["search", "index", "notes"]  # a broken file: defaults


def test_error_text_reads_as_sentences() -> None:
    exc = DaemonUnavailable("the daemon closed the connection", "check `ragd status`.")
    assert error_text("rag_search", exc) == (
        "rag_search could not reach ragd's background service (the daemon): the daemon "
        "closed the connection. What to do: Check `ragd status`.")
