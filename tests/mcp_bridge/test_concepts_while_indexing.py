"""Concepts follow indexing per document (issue 37 item 2), against a real daemon and the real
MCP client: a book is analysed soon after its own vectors are in, while a bulk collection is
still read and embedded; a book indexed but not analysed yet is answered as pending, not as
"not found"; and status shows the analysis as work."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from concept_fixtures import book_text, write_epub
from daemon_proc import DaemonProc, start_module_daemon, wait_for
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from vault_fixtures import write_plain_notes

from ragd.daemon.cli.remote import format_status

pytestmark = pytest.mark.slow

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
BULK_FILES = 300  # ~600 chunks: half a minute of embedding here, far longer than a book


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DaemonProc, Path, Path]]:
    root = tmp_path_factory.mktemp("concepts-live")
    vault = root / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "Home.md").write_text("# Home\n\nThe start page.\n", encoding="utf-8")
    bulk = root / "bulk"
    write_plain_notes(bulk, BULK_FILES)
    d = start_module_daemon(root, vault, '[mcp]\ntoolsets = ["search", "concepts"]\n')
    try:
        d.wait_idle()
        yield d, vault, bulk
    finally:
        d.stop()


def call(home: Path, name: str, args: dict[str, Any]) -> types.CallToolResult:
    async def run() -> types.CallToolResult:
        variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
        params = StdioServerParameters(command=str(BRIDGE), env={
            **variables, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            return await s.call_tool(name, args)

    return anyio.run(run)


def value(result: types.CallToolResult) -> Any:
    assert isinstance(result.content[0], types.TextContent)
    return json.loads(result.content[0].text)


def bulk_waiting(d: DaemonProc) -> int:
    """Chunks of the bulk collection still without vectors, or its files not read yet."""
    st = d.call("status")
    bulk = next((c for c in st["collections"] if c["name"] == "bulk"), None)
    if bulk is None or bulk["source_count"] < BULK_FILES:
        return BULK_FILES
    return int(bulk["unembedded_chunks"])


def test_a_book_is_analysed_while_the_rest_still_index(
        env: tuple[DaemonProc, Path, Path]) -> None:
    d, vault, bulk = env
    assert d.call("index", {"collection": "bulk", "path": str(bulk), "wait": False})["queued"]
    wait_for(lambda: d.call("status")["current"]["collection"] == "bulk", 30,
             "the bulk collection to start")
    write_epub(vault / "Lighthouse Keepers.epub", "Lighthouse Keepers", book_text(7))

    # Its own vectors in (a saved file's chunks go first), then its concepts.
    wait_for(lambda: d.call("search", {"query": "Lighthouse Keepers", "mode": "keyword",
                                       "top_k": 1})["results"], 30, "the book to be read")
    t_vectors = wait_for(
        lambda: all(r["metadata"]["similarity"] is not None for r in d.call(
            "search", {"query": "Lighthouse Keepers", "mode": "semantic", "top_k": 3,
                       "collection": "obsidian"})["results"]) and time.monotonic(),
        60, "the book's vectors")
    wait_for(lambda: d.call("concepts_status")["documents"] == 1, 90, "its concepts")
    took = time.monotonic() - t_vectors
    assert bulk_waiting(d) > 0, "the bulk collection finished first: the test proved nothing"
    print(f"\nconcepts {took:.1f} s after the book's vectors, while the bulk collection "
          f"still had {bulk_waiting(d):,} chunks or files to go")

    result = call(d.home, "extract_concepts", {"document_query": "Lighthouse Keepers"})
    assert not result.isError, result.content
    got = value(result)
    assert got["document"] == "Lighthouse Keepers" and got["total_concepts"] > 0, got
    assert result.meta is not None and result.meta["index_stale"] is True  # bulk goes on


def test_a_book_not_analysed_yet_is_pending_not_missing(
        env: tuple[DaemonProc, Path, Path]) -> None:
    d, vault, _ = env
    d.call("pause", {"embedding": True})
    try:
        write_epub(vault / "Salt Marsh Birds.epub", "Salt Marsh Birds", book_text(11))
        wait_for(lambda: d.call("search", {"query": "Salt Marsh Birds", "mode": "keyword",
                                           "top_k": 1})["results"], 30, "the book to be read")
        wait_for(lambda: d.call("concepts_status")["waiting"] >= 1, 30,
                 "the analysis to count it")
        result = call(d.home, "extract_concepts", {"document_query": "Salt Marsh Birds"})
        assert not result.isError, result.content
        got = value(result)
        assert got["pending"] is True and got["total_concepts"] == 0, got
        assert got["document"] == "Salt Marsh Birds" and "ask again" in got["message"]
        assert result.meta is not None and result.meta["pending"] is True
        assert result.meta["indexing"]["concepts_waiting"] >= 1
        missing = call(d.home, "extract_concepts", {"document_query": "No Such Book Title"})
        assert missing.isError and "RECORD_NOT_FOUND" in missing.content[0].text  # type: ignore[union-attr]
        st = d.call("status")
        assert st["concepts"]["waiting"] >= 1
        assert "concepts: " in format_status(st)
    finally:
        d.call("resume")
    wait_for(lambda: d.call("concepts_status")["documents"] == 2, 300, "the second book")
    got = value(call(d.home, "extract_concepts", {"document_query": "Salt Marsh Birds"}))
    assert got["total_concepts"] > 0 and "pending" not in got
