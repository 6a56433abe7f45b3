"""Honest answers while vectors are pending (issue 37 item 1), through the real MCP client,
`ragd-mcp` and a real daemon whose embedding is paused (`ragd pause --embedding`).

Notes saved meanwhile are read and keyword-indexed; semantic searches (001's
`semantic_search`, 004's `search(mode="semantic")`, `rag_search`) find them by their words
and say that work is pending (`_meta.index_stale`, `indexing`), and the stats say how many
chunks wait. After `resume` the same calls answer from the vectors, with no signal.
"""

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
from daemon_proc import DaemonProc, start_module_daemon, wait_for
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ragd.mcp_bridge.tools import ADMIN_ANSWER_S

pytestmark = pytest.mark.slow

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
SAVED = {
    "Garden/Compost.md": "# Compost\n\nThe zqxcompost heap turns kitchen scraps and leaves "
                         "into dark soil for the vegetable beds within a few months.\n",
    "Garden/Beds.md": "# Beds\n\nRaised zqxbeds hold the tomatoes and beans; [[Compost]] "
                      "feeds them every spring.\n",
}


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonProc]:
    """A daemon on a one-note vault, idle, then with its embedding paused and two notes
    saved: they are keyword-searchable and their vectors wait."""
    root = tmp_path_factory.mktemp("pending")
    vault = root / "vault"
    (vault / ".obsidian").mkdir(parents=True)
    (vault / "Home.md").write_text("# Home\n\nThe start page of this vault.\n",
                                   encoding="utf-8")
    d = start_module_daemon(root, vault,
                            '[mcp]\ntoolsets = ["search", "index", "omni", "vault"]\n')
    try:
        d.wait_idle()
        assert d.call("pause", {"embedding": True})["embedding_paused"]
        for rel, text in SAVED.items():
            (vault / rel).parent.mkdir(parents=True, exist_ok=True)
            (vault / rel).write_text(text, encoding="utf-8")
        wait_for(lambda: len(d.call("search", {"query": "zqxcompost zqxbeds",
                                               "mode": "keyword"})["results"]) == 2,
                 30, "the saved notes to be keyword-searchable")
        yield d
    finally:
        d.stop()


CALLS: list[tuple[str, dict[str, Any]]] = [
    ("semantic_search", {"query": "zqxcompost heap of kitchen scraps", "n_results": 3}),
    ("search", {"query": "zqxcompost heap of kitchen scraps", "mode": "semantic", "limit": 3}),
    ("rag_search", {"query": "zqxcompost heap of kitchen scraps", "top_k": 3}),
    ("suggest_links", {"note_path": "Garden/Beds.md", "min_similarity": 0.0}),
    ("stats", {}),
    ("embeddings_status", {}),
]


def call_all(home: Path, calls: list[tuple[str, dict[str, Any]]] = CALLS,
             took: list[float] | None = None) -> list[types.CallToolResult]:
    """Each call through one bridge session; none may fail. ``took`` gets each call's
    seconds."""
    async def run() -> list[types.CallToolResult]:
        variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
        params = StdioServerParameters(command=str(BRIDGE), env={
            **variables, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1"})
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            out = []
            for name, args in calls:
                t0 = time.monotonic()
                out.append(await s.call_tool(name, args))
                if took is not None:
                    took.append(time.monotonic() - t0)
            return out

    results = anyio.run(run)
    for (name, _), r in zip(calls, results, strict=True):
        assert not r.isError, (name, r.content)
    return results


def timed(home: Path, name: str, args: dict[str, Any]) -> tuple[Any, float]:
    """A tool's answer, and the seconds it took (after a first call reached the daemon)."""
    took: list[float] = []
    result = call_all(home, [("stats", {}), (name, args)], took)[1]
    return value(result), took[1]


def value(result: types.CallToolResult) -> Any:
    assert isinstance(result.content[0], types.TextContent)
    return json.loads(result.content[0].text)


def compost_first(semantic: Any, vsearch: Any, rag: Any) -> None:
    assert semantic[0]["file_path"] == "Garden/Compost.md", semantic
    assert vsearch[0]["path"] == "Garden/Compost.md", vsearch
    assert rag["results"][0]["source_path"].endswith("Compost.md"), rag


def test_pending_vectors_give_keyword_backed_answers_and_say_so(paused: DaemonProc) -> None:
    semantic, vsearch, rag, suggest, stats, embeddings = call_all(paused.home)

    # Found by their words, and every answer says work is pending.
    compost_first(value(semantic), value(vsearch), value(rag))
    # Embedded for the search, not stored: a real cosine, while the note's vectors wait.
    assert value(semantic)[0]["similarity"] > 0.3
    for r in (semantic, vsearch, rag, suggest, stats, embeddings):
        assert r.meta is not None and r.meta["index_stale"] is True, r
        assert r.meta["indexing"]["unembedded_chunks"] >= 2
    assert value(rag)["indexing"]["active"] is True
    assert suggest.meta is not None and suggest.meta["pending"] is True
    assert value(stats)["semantic_search_available"] is False
    assert value(stats)["unembedded_chunks"] >= 2
    assert value(embeddings)["available"] is False
    assert value(embeddings)["unembedded_chunks"] == value(stats)["unembedded_chunks"]

    # explain says its vector is still to come.
    answer = paused.call("search", {"query": "zqxcompost heap", "mode": "semantic",
                                    "explain": True, "top_k": 3})
    top = answer["results"][0]["metadata"]
    assert top["explain"]["vectors_pending"] is True
    assert answer["results"][0]["title"] == "Compost"
    status = paused.call("status")
    assert status["embedding_paused"] is True and status["embedding"]["chunks"] >= 2


def test_admin_tools_answer_at_once_while_their_work_waits(paused: DaemonProc) -> None:
    """004's build_embeddings timed out after 120 s on a busy daemon (issue 37): admin tools
    answer within ADMIN_ANSWER_S with what is done and how to follow the rest."""
    built, took = timed(paused.home, "build_embeddings", {})
    assert took < ADMIN_ANSWER_S + 5, took
    assert built["queued"] is True and built["unembedded_chunks"] >= 2, built
    assert "ragd resume" in built["follow"]

    assert paused.call("pause")["paused"]  # the writer takes no job: nothing can finish
    try:
        indexed, took = timed(paused.home, "rag_index", {"collection": "obsidian"})
        assert took < ADMIN_ANSWER_S + 5, took
        assert indexed["queued"] is True and indexed["collection"] == "obsidian", indexed
        assert {"indexed", "skipped", "errors", "total_found"} <= set(indexed)
        assert "indexing.remaining" in indexed["follow"]
        reindexed, took = timed(paused.home, "reindex", {})
        assert took < ADMIN_ANSWER_S + 5, took
        assert reindexed == {"added": None, "modified": None, "deleted": None,
                             "unchanged": None, "queued": True,
                             "follow": reindexed["follow"]}, reindexed
    finally:
        paused.call("resume")
        paused.call("pause", {"embedding": True})  # as the fixture left it
    # Done within the bound: the reference's own answer, nothing more.
    reindexed, _ = timed(paused.home, "reindex", {})
    assert set(reindexed) == {"added", "modified", "deleted", "unchanged"}, reindexed
    assert reindexed["unchanged"] == 3


def test_after_embedding_the_same_calls_answer_from_vectors_with_no_signal(
        paused: DaemonProc) -> None:
    assert not paused.call("resume")["embedding_paused"]
    paused.wait_idle(timeout=120)
    semantic, vsearch, rag, suggest, stats, embeddings = call_all(paused.home)
    compost_first(value(semantic), value(vsearch), value(rag))
    assert value(semantic)[0]["similarity"] > 0.3
    for r in (semantic, vsearch, rag, suggest, stats, embeddings):
        assert r.meta is None, r
    assert value(rag)["indexing"] == {"active": False, "remaining": 0}
    assert value(stats)["semantic_search_available"] is True
    assert value(stats)["unembedded_chunks"] == 0
    assert value(embeddings)["available"] is True
    # Beds links to Compost already: the one other note is what is left to suggest.
    assert [s["file_path"] for s in value(suggest)] == ["Home.md"]
    answer = paused.call("search", {"query": "zqxcompost heap", "mode": "semantic",
                                    "explain": True, "top_k": 3})
    top = answer["results"][0]["metadata"]
    assert "vectors_pending" not in top["explain"]
    assert answer["results"][0]["title"] == "Compost"
