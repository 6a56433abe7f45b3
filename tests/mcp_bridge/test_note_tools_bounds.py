"""The note writes' bounds through a real MCP client and one real daemon (decision 0045): a note
too large to load whole is refused and left byte-identical, an absent ``old_text`` is answered
within 2 s in a 100,000-line note, names no common file system holds are refused with a code,
new notes get the umask's mode, reference 004's attachments are read, written and renamed with
their links, and bad numbers are clean parameter errors.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import anyio
import daemon_proc
import mcp.types as types
import pytest
from daemon_proc import DaemonProc
from document_fixtures import pdf_bytes
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from ragd.daemon.settings.paths import resolve_paths

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform == "win32", reason="POSIX daemon socket")]

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
TOOLSETS = ["search", "notes", "omni", "vault"]
PHOTO = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes(range(256)) * 4 + b"\xff\xd9"
NOTES = {
    "Home.md": "# Home\n\nThe start of the vault. [[Linker]]\n",
    "Linker.md": "# Linker\n\nThe trip: ![[photo.jpg]] and [[assets/photo.jpg|the photo]] and "
                 "![a photo](assets/photo.jpg) and [[Home]].\n",
    "Other.md": "# Other\n\nNothing here points at the photo. [[Home]]\n",
}


@dataclass
class Env:
    root: Path
    vault: Path
    home: Path
    daemon: DaemonProc


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, shared_models: Path) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("bounds")
    vault = root / "vault"
    for rel, body in NOTES.items():
        (vault / rel).parent.mkdir(parents=True, exist_ok=True)
        (vault / rel).write_text(body, encoding="utf-8")
    (vault / "assets").mkdir()
    (vault / "assets" / "photo.jpg").write_bytes(PHOTO)
    (vault / "docs").mkdir()
    (vault / "docs" / "guide.pdf").write_bytes(pdf_bytes(["The quokkapdf lives on page one."]))
    home = root / "home"
    (home / "data").mkdir(parents=True, mode=0o700)  # the model's graph made once a session
    (home / "data" / "models").symlink_to(shared_models, target_is_directory=True)
    config = resolve_paths({"RAGD_HOME": str(home)}).config_file
    config.parent.mkdir(parents=True)
    # The large notes below stay out of the index (over 1 MB): indexing them would only add
    # minutes of embedding; the write tools load up to 20 MB whatever the indexer skips.
    config.write_text(f"[mcp]\ntoolsets = {json.dumps(TOOLSETS)}\nwrites = true\n"
                      "[index]\nmax_file_mb = 1\n", encoding="utf-8")
    e = Env(root, vault, home, DaemonProc(home, vault, root / "daemon.log"))
    e.daemon.start()
    daemon_proc.STARTED.remove(e.daemon)  # stopped at the end of the module
    try:
        e.daemon.wait_idle()
        yield e
    finally:
        e.daemon.stop()


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    path = tmp_path / "bridge.log"
    with open(path, "w+", encoding="utf-8") as log:
        yield log
    assert "Traceback" not in path.read_text(encoding="utf-8")


def bridge_env(env: Env) -> dict[str, str]:
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    return {**variables, "RAGD_HOME": str(env.home), "HF_HUB_OFFLINE": "1"}


@asynccontextmanager
async def client(env: Env, errlog: TextIO) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=str(BRIDGE), env=bridge_env(env))
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def calls(env: Env, errlog: TextIO, todo: list[tuple[str, dict[str, Any]]]
          ) -> list[tuple[types.CallToolResult, float]]:
    """Each call's result and its seconds, in order, through one MCP session."""
    async def run() -> list[tuple[types.CallToolResult, float]]:
        out = []
        async with client(env, errlog) as session:
            for name, args in todo:
                t0 = time.monotonic()
                result = await session.call_tool(name, args)
                out.append((result, time.monotonic() - t0))
        return out

    return anyio.run(run)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def ok(result: types.CallToolResult) -> Any:
    assert not result.isError, text(result)
    return json.loads(text(result))


def refused(result: types.CallToolResult, param: str, code: str | None = None) -> str:
    """The refusal's text: a tool error naming ``param`` (and ``code``), never internal."""
    message = text(result)
    assert result.isError and f"`{param}`" in message, message
    assert code is None or f"({code})" in message, message
    assert "internal error" not in message.lower(), message
    return message


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# -- never shorter, bounded in time -------------------------------------------------------------
def test_a_note_too_large_to_load_whole_is_refused_and_left_byte_identical(
        env: Env, errlog: TextIO) -> None:
    big = env.vault / "Big" / "huge.md"
    big.parent.mkdir(exist_ok=True)
    line = "A long journal line that repeats until the note is 25 MB.\n"
    with open(big, "w", encoding="utf-8") as fh:
        fh.write("# Huge\n\nfindme once\n")
        fh.write(line * (25 * 2**20 // len(line)))
    before, tag = big.stat().st_size, sha(big)
    results = calls(env, errlog, [
        ("rag_edit_note", {"path": "Big/huge.md", "old_text": "findme", "new_text": "x"}),
        ("edit", {"path": "Big/huge.md", "old_text": "findme", "new_text": "x",
                  "if_match": tag}),
        ("rag_append_note", {"path": "Big/huge.md", "content": "one more line"})])
    for result, _ in results:
        message = refused(result, "path", "too_large")
        assert "20,971,520" in message  # the limit is said
    assert big.stat().st_size == before and sha(big) == tag


def test_an_absent_old_text_in_a_100000_line_note_is_answered_within_2_s(
        env: Env, errlog: TextIO) -> None:
    note = env.vault / "Big" / "lines.md"
    note.parent.mkdir(exist_ok=True)
    lines = [f"Line {i}: the harbour log notes wind {i % 97} and tide {i % 13}." for i in
             range(100_000)]
    note.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tag = sha(note)
    typo = "\n".join(lines[50_000:50_030]).replace("tide", "tyde", 1)  # 2 KB, one typo
    absent = "\n".join(f"Nothing like this {i} was ever logged in the harbour." for i in
                       range(900))  # 50 KB
    results = calls(env, errlog, [
        ("rag_edit_note", {"path": "Big/lines.md", "old_text": typo, "new_text": "x"}),
        ("rag_edit_note", {"path": "Big/lines.md", "old_text": absent, "new_text": "x"}),
        ("rag_edit_note", {"path": "Big/lines.md", "old_text": lines[77].upper(),
                           "new_text": "x"})])
    (near, t_near), (far, t_far), (case, t_case) = results
    assert "closest text is at line 50001" in refused(near, "old_text", "no_match")
    refused(far, "old_text", "no_match")
    assert "line 78 with other letter case" in refused(case, "old_text", "no_match")
    assert sha(note) == tag
    assert max(t_near, t_far, t_case) < 2.0, (t_near, t_far, t_case)
    print(f"100,000 lines: 2 KB near miss {t_near:.2f} s, 50 KB absent {t_far:.2f} s, "
          f"other case {t_case:.2f} s")


# -- names and modes ----------------------------------------------------------------------------
NAMES = [("rag_write_note", "path", "n" * 300 + ".md", "name_too_long"),
         ("rag_write_note", "path", "CON.md", "reserved_name"),
         ("rag_write_note", "path", "Folder/aux.md", "reserved_name"),
         ("rag_write_note", "path", "lpt1.backup.md", "reserved_name"),
         ("rag_write_note", "path", "name:colon.md", "bad_character"),
         ("rag_write_note", "path", "what?.md", "bad_character"),
         ("rag_write_note", "path", "bell\x07.md", "control_character"),
         ("rag_write_note", "path", "invoice\u202efdp.md", "format_character"),
         ("rag_write_note", "path", "left\u2066to\u2069right.md", "format_character"),
         ("rag_write_note", "path", "mark\u200f.md", "format_character"),
         ("rag_write_note", "path", "Folder./note.md", "trailing_dot_or_space"),
         ("rag_write_note", "path", "Folder /note.md", "trailing_dot_or_space"),
         ("rename", "new_path", "NUL.md", "reserved_name"),
         ("rename", "new_path", "a|b.md", "bad_character"),
         ("rename", "new_path", "x" * 260 + ".md", "name_too_long")]


def test_names_no_common_file_system_holds_are_refused_and_new_notes_get_the_umask_mode(
        env: Env, errlog: TextIO) -> None:
    before = sorted(p.relative_to(env.vault) for p in env.vault.rglob("*"))
    todo = [(tool, {"old_path": "Other.md", "new_path": name} if tool == "rename" else
             {"path": name, "content": "x"}) for tool, _, name, _ in NAMES]
    emoji = "Family \U0001f468\u200d\U0001f469\u200d\U0001f467.md"  # ZWJ: an emoji sequence
    todo += [("rag_write_note", {"path": "Modes/new.md", "content": "# New\n"}),
             ("rag_write_note", {"path": f"Modes/{emoji}", "content": "# Family\n"})]
    *bad, (made, _), (emoji_made, _) = calls(env, errlog, todo)
    for (_, param, _, code), (result, _) in zip(NAMES, bad, strict=True):
        refused(result, param, code)
    assert ok(made)["created"] and ok(emoji_made)["created"]
    after = sorted(p.relative_to(env.vault) for p in env.vault.rglob("*"))
    assert after == sorted([*before, Path("Modes"), Path("Modes/new.md"), Path(f"Modes/{emoji}")])
    mask = os.umask(0o022)
    os.umask(mask)  # the daemon inherited this test's umask
    mode = (env.vault / "Modes" / "new.md").stat().st_mode & 0o777
    assert mode == 0o666 & ~mask == (env.vault / "Home.md").stat().st_mode & 0o777


# -- reference 004's attachments ----------------------------------------------------------------
def test_attachments_are_read_written_and_renamed_with_their_links(env: Env,
                                                                   errlog: TextIO) -> None:
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 64).decode("ascii")
    results = calls(env, errlog, [
        ("read", {"path": "docs/guide.pdf"}),
        ("read", {"path": "assets/photo.jpg"}),
        ("write", {"path": "assets/new.png", "content": ""}),
        ("write", {"path": "assets/new.png", "content": "", "content_base64": png}),
        ("rename", {"old_path": "assets/photo.jpg", "new_path": "media/trip.jpg"}),
        ("rag_read_note", {"path": "media/trip.jpg"})])
    (pdf, _), (photo, _), (bare, _), (written, _), (moved, _), (again, _) = results
    pdf_answer, photo_answer = ok(pdf), ok(photo)
    assert "quokkapdf" in pdf_answer["content"] and pdf_answer["mime_type"] == "application/pdf"
    assert photo_answer["mime_type"] == "image/jpeg"
    assert base64.b64decode(photo_answer["content_base64"]) == PHOTO
    assert "is required" in refused(bare, "content_base64")
    assert not (env.vault / "assets" / "new.png.md").exists()
    assert ok(written) == {"path": "assets/new.png", "created": True}
    assert (env.vault / "assets" / "new.png").read_bytes() == base64.b64decode(png)
    assert ok(moved) == {"old_path": "assets/photo.jpg", "new_path": "media/trip.jpg"}
    assert (env.vault / "Linker.md").read_text(encoding="utf-8") == (
        "# Linker\n\nThe trip: ![[trip.jpg]] and [[media/trip.jpg|the photo]] and "
        "![a photo](media/trip.jpg) and [[Home]].\n")
    assert (env.vault / "Other.md").read_text(encoding="utf-8") == NOTES["Other.md"]
    assert base64.b64decode(ok(again)["content_base64"]) == PHOTO


# -- numbers ------------------------------------------------------------------------------------
def test_nan_and_a_huge_chunk_id_are_parameter_errors(env: Env) -> None:
    """Spoken line by line, as a client whose JSON encoder writes NaN (Python's json.dumps
    does; the SDK's client sends NaN as null, which the SDK's server also makes of it)."""
    proc = subprocess.Popen([str(BRIDGE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=bridge_env(env))
    assert proc.stdin is not None and proc.stdout is not None
    replies: dict[int, Any] = {}
    try:
        def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
            proc.stdin.flush()

        send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}})
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        for i, (name, args) in enumerate([
                ("rag_suggest_links", {"path": "Home.md", "min_similarity": float("nan")}),
                ("suggest_links", {"note_path": "Home.md", "min_similarity": float("inf")}),
                ("rag_note_context", {"chunk_id": 2**70})], start=2):
            send({"id": i, "method": "tools/call", "params": {"name": name, "arguments": args}})
        for line in iter(proc.stdout.readline, b""):  # log notifications come in between
            reply = json.loads(line)
            replies[reply.get("id", 0)] = reply
            if {2, 3, 4} <= set(replies):
                break
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    for i, param, why in [(2, "min_similarity", "finite"), (3, "min_similarity", "finite"),
                          (4, "chunk_id", "between")]:
        result = replies[i]["result"]
        message = result["content"][0]["text"]
        assert result["isError"] and f"`{param}`" in message and why in message, message
        assert "internal error" not in message.lower(), message
