"""Which note tools a bridge offers (writes, tools_allow, tools_deny), their annotations, and
how their arguments map to the daemon's params (decision 0028). Pure: no daemon."""

from __future__ import annotations

import pytest

from ragd.daemon.errors import InvalidArgument
from ragd.daemon.settings.config import McpConfig
from ragd.mcp_bridge.server import choose_tools, mcp_tool
from ragd.mcp_bridge.tools import registered_tools, select_tools

ALL = ["search", "index", "notes", "omni", "vault"]


def names(specs: list) -> set[str]:  # type: ignore[type-arg]
    return {s.name for s in specs}


def test_write_tools_only_with_writes_and_allow_deny_filter_every_toolset() -> None:
    off, _ = select_tools(ALL)
    on, _ = select_tools(ALL, writes=True)
    writes = names(on) - names(off)
    assert writes == {"write_note", "append_to_note", "delete_note", "write", "edit",
                      "delete", "rename", "rag_write_note", "rag_edit_note",
                      "rag_append_note", "rag_rename_note", "rag_delete_note"}
    allowed, _ = select_tools(ALL, writes=True, allow=["read_note", "rag_search", "edit"])
    assert names(allowed) == {"read_note", "rag_search", "edit"}
    denied, _ = select_tools(ALL, writes=True, deny=["delete", "delete_note", "rag_index"])
    assert names(on) - names(denied) == {"delete", "delete_note", "rag_index"}
    config = McpConfig(toolsets=ALL, writes=False, tools_deny=["rag_convert"])
    assert "rag_convert" not in names(choose_tools(config.toolsets, config))
    assert not names(choose_tools(config.toolsets, config)) & writes
    assert select_tools(["notes", "bogus"])[1] == ["bogus"]


def test_every_tool_is_annotated_for_what_it_does() -> None:
    by_name = {s.name: mcp_tool(s).annotations for s in registered_tools()}
    assert len({s.name for s in registered_tools()}) == len(registered_tools())  # unique
    for name in ("read_note", "search", "rag_read_note", "rag_search", "stats"):
        assert by_name[name].readOnlyHint and not by_name[name].destructiveHint
    for name in ("delete", "delete_note", "write", "write_note", "rag_delete_note"):
        assert by_name[name].destructiveHint and not by_name[name].readOnlyHint
    assert not by_name["append_to_note"].idempotentHint
    assert by_name["edit"].idempotentHint and not by_name["edit"].destructiveHint


def test_arguments_are_checked_and_mapped_to_the_daemons_params() -> None:
    spec = {s.name: s for s in registered_tools()}
    assert spec["semantic_search"].parse({"query": "gold", "tags": "trading, gold"}) == {
        "query": "gold", "top_k": 5, "mode": "semantic", "tags": ["trading", "gold"]}
    assert spec["search"].parse({"query": "x", "filters": {"status": "draft"}}) == {
        "query": "x", "top_k": 10, "mode": "keyword", "filters": {"status": "draft"}}
    assert spec["suggest_links"].parse({"note_path": "a.md"}) == {
        "path": "a.md", "n": 5, "min_similarity": 0.5, "exclude_current": True, "tags": []}
    assert spec["rename"].parse({"old_path": "a.md", "new_path": "b.md",
                                 "if_match": "ab"})["if_match"] == "ab"
    for args, why in [({"query": 3}, "must be a string"), ({}, "is required"),
                      ({"query": "x", "n_results": 0}, "between 1 and 100"),
                      ({"query": "x", "bogus": 1}, "not a parameter"),
                      ({"query": "x\x00"}, "NUL")]:
        with pytest.raises(InvalidArgument, match=why):
            spec["semantic_search"].parse(args)
