"""Two MCP clients writing the same notes at once (decision 0045): every write is one step per
path, so each race ends with exactly one winner, a clear refusal for the other call, no text
lost and no duplicate.

Two real `ragd-mcp` bridges (two MCP client sessions, as a desktop client and a coding agent
would have) talk to one real daemon. Each round fires one call from each client at the same
instant (an anyio task group) and then checks the vault on disk.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio
import daemon_proc
import mcp.types as types
import pytest
from daemon_proc import DaemonProc
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX daemon socket")]

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
ROUNDS = 50
TOOLSETS = ["search", "notes", "vault"]
# Notes of 400 KB: reading, hashing and writing one takes long enough (milliseconds) for the
# two clients' calls to overlap inside the daemon. Over [index] max_file_mb, they are not
# chunked and embedded, which would only slow the test.
PAD = "lorem ipsum dolor sit amet " * 15_000


@dataclass
class Vault:
    root: Path
    home: Path
    daemon: DaemonProc


@pytest.fixture(scope="module")
def vault(tmp_path_factory: pytest.TempPathFactory, shared_models: Path) -> Iterator[Vault]:
    root = tmp_path_factory.mktemp("races")
    folder = root / "vault"
    (folder / "Race").mkdir(parents=True)
    (folder / "Home.md").write_text("# Home\n\nWhere the races start.\n", encoding="utf-8")
    home = root / "home"
    (home / "data").mkdir(parents=True, mode=0o700)  # the model's graph made once a session
    (home / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    config = resolve_paths({"RAGD_HOME": str(home)}).config_file
    config.parent.mkdir(parents=True)
    config.write_text(f"[mcp]\ntoolsets = {json.dumps(TOOLSETS)}\nwrites = true\n"
                      "[index]\nmax_file_mb = 0.2\n", encoding="utf-8")
    v = Vault(folder, home, DaemonProc(home, folder, root / "daemon.log"))
    v.daemon.start()
    daemon_proc.STARTED.remove(v.daemon)  # stopped at the end of the module
    try:
        v.daemon.wait_idle()
        yield v
    finally:
        v.daemon.stop()


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    path = tmp_path / "bridges.log"
    with open(path, "w+", encoding="utf-8") as log:
        yield log
    assert "Traceback" not in path.read_text(encoding="utf-8")


@asynccontextmanager
async def two_clients(v: Vault, errlog: TextIO) -> AsyncIterator[tuple[ClientSession, ...]]:
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    params = StdioServerParameters(command=str(BRIDGE), env={
        **variables, "RAGD_HOME": str(v.home), "HF_HUB_OFFLINE": "1"})
    async with AsyncExitStack() as stack:
        sessions = []
        for _ in range(2):
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            sessions.append(session)
        yield tuple(sessions)


def message(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def code_of(result: types.CallToolResult) -> str:
    """'ok', or the refusal's code as the tool error names it: "... (exists): ..."."""
    text = message(result)
    if not result.isError:
        return "ok"
    assert "internal error" not in text.lower(), text
    return text.partition("(")[2].partition(")")[0] or text


def etag(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Tally:
    """What the rounds of one race ended with."""

    outcomes: Counter[tuple[str, str]] = field(default_factory=Counter)
    winners: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def add(self, a: types.CallToolResult, b: types.CallToolResult) -> str:
        """The round's winner ('A' or 'B'); fails unless exactly one call succeeded."""
        codes = (code_of(a), code_of(b))
        self.outcomes[codes] += 1
        assert sorted(c == "ok" for c in codes) == [False, True], (codes, message(a),
                                                                   message(b))
        winner = "A" if codes[0] == "ok" else "B"
        self.winners[winner] += 1
        return winner


Call = tuple[ClientSession, str, dict[str, Any]]  # who calls which tool with what


async def both(first: Call, second: Call) -> tuple[types.CallToolResult, types.CallToolResult]:
    """Make two calls at the same instant; their results in order."""
    out: list[Any] = [None, None]

    async def run(i: int, call: Call) -> None:
        session, tool, args = call
        out[i] = await session.call_tool(tool, args)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, 0, first)
        tg.start_soon(run, 1, second)
    return out[0], out[1]


async def same_new_path(a: ClientSession, b: ClientSession, root: Path) -> Tally:
    tally = Tally()
    for i in range(ROUNDS):
        rel = f"Race/new-{i}.md"
        texts = {w: f"# New {i}\n\nWritten whole by client {w}. {PAD}\n" for w in "AB"}
        ra, rb = await both(
            (a, "rag_write_note", {"path": rel, "content": texts["A"]}),
            (b, "rag_write_note", {"path": rel, "content": texts["B"]}))
        winner = tally.add(ra, rb)
        assert {code_of(ra), code_of(rb)} == {"ok", "exists"}
        assert (root / rel).read_text(encoding="utf-8") == texts[winner]
    return tally


async def write_and_edit_one_etag(a: ClientSession, b: ClientSession, root: Path) -> Tally:
    tally = Tally()
    note = root / "Race" / "both.md"
    note.write_text(f"# Both\n\ntok0 is where it starts.\n{PAD}\n", encoding="utf-8")
    for i in range(ROUNDS):
        before, tag = note.read_text(encoding="utf-8"), etag(note)
        whole = f"# Both\n\ntok{i + 1} written whole by A in round {i}.\n{PAD}\n"
        ra, rb = await both(
            (a, "rag_write_note", {"path": "Race/both.md", "content": whole,
                                   "if_match": tag}),
            (b, "rag_edit_note", {
                "path": "Race/both.md", "old_text": f"tok{i} ",
                "new_text": f"tok{i + 1} (B's edit of round {i}) ", "if_match": tag}))
        winner = tally.add(ra, rb)
        assert {code_of(ra), code_of(rb)} == {"ok", "etag_mismatch"}
        expected = whole if winner == "A" else before.replace(
            f"tok{i} ", f"tok{i + 1} (B's edit of round {i}) ")
        assert note.read_text(encoding="utf-8") == expected
    return tally


async def two_renames(a: ClientSession, b: ClientSession, root: Path) -> Tally:
    tally = Tally()
    body = f"# Moving\n\nThe same bytes, wherever the note goes.\n{PAD}\n"
    current = "Race/move-start.md"
    (root / current).write_text(body, encoding="utf-8")
    for i in range(ROUNDS):
        targets = {"A": f"Race/moveA-{i}.md", "B": f"Race/moveB-{i}.md"}
        ra, rb = await both(
            (a, "rag_rename_note", {"old_path": current, "new_path": targets["A"]}),
            (b, "rag_rename_note", {"old_path": current, "new_path": targets["B"]}))
        winner = tally.add(ra, rb)
        assert {code_of(ra), code_of(rb)} == {"ok", "not_found"}
        loser = "B" if winner == "A" else "A"
        assert not (root / current).exists() and not (root / targets[loser]).exists()
        assert (root / targets[winner]).read_text(encoding="utf-8") == body
        current = targets[winner]
    assert [p.name for p in (root / "Race").glob("move*")] == [Path(current).name]
    return tally


async def rename_while_editing(a: ClientSession, b: ClientSession, root: Path) -> Tally:
    tally = Tally()
    current = "Race/edited-start.md"
    (root / current).write_text(f"# Edited\n\ntok0 and the rest.\n{PAD}\n", encoding="utf-8")
    for i in range(ROUNDS):
        note = root / current
        before, tag = note.read_text(encoding="utf-8"), etag(note)
        moved = f"Race/edited-{i}.md"
        ra, rb = await both(
            (a, "rag_rename_note", {"old_path": current, "new_path": moved,
                                    "if_match": tag}),
            (b, "rag_edit_note", {
                "path": current, "old_text": f"tok{i} ", "new_text": f"tok{i + 1} ",
                "if_match": tag}))
        winner = tally.add(ra, rb)
        if winner == "A":
            assert code_of(rb) == "not_found"
            assert not note.exists() and (root / moved).read_text(encoding="utf-8") == before
            # The next round edits the old token under the moved name: put it back in step.
            current = moved
            (root / current).write_text(before.replace(f"tok{i} ", f"tok{i + 1} "),
                                        encoding="utf-8")
        else:
            assert code_of(ra) == "etag_mismatch" and not (root / moved).exists()
            assert note.read_text(encoding="utf-8") == before.replace(f"tok{i} ",
                                                                      f"tok{i + 1} ")
        assert len(list((root / "Race").glob("edited-*"))) == 1
    return tally


RACES = {"same new path": same_new_path, "write + edit, one etag": write_and_edit_one_etag,
         "two renames of one note": two_renames, "rename while the other edits":
         rename_while_editing}


def test_two_clients_racing_on_one_path_leave_one_winner_and_lose_no_text(
        vault: Vault, errlog: TextIO) -> None:
    async def run() -> dict[str, Tally]:
        out = {}
        async with two_clients(vault, errlog) as (a, b):
            for name, race in RACES.items():
                t0 = time.monotonic()
                out[name] = await race(a, b, vault.root)
                out[name].seconds = time.monotonic() - t0
        return out

    tallies = anyio.run(run)
    for name, tally in tallies.items():
        assert sum(tally.winners.values()) == ROUNDS
        print(f"{name}: {ROUNDS} rounds in {tally.seconds:.1f} s, winners "
              f"{dict(tally.winners)}, outcomes {dict(tally.outcomes)}")
    leftovers = [p.name for p in (vault.root / "Race").iterdir() if p.name.startswith(".")]
    assert not leftovers, leftovers  # no temporary file left behind
