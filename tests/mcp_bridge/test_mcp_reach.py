"""What an MCP client may read, bounded replies, no internal errors (issue 28, items 3-5).

The real MCP client (the SDK's ClientSession over stdio) against `ragd-mcp` and one real daemon
per module, configured with a vault, an allowed folder and a corrupt Calibre library. Each row
of the issue's table covered here is a test: the user sees a code, the daemon's peak RSS
(VmHWM, read from /proc) stays under 1 GB, and a note saved while the case runs is searchable
within 2 s.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
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
from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.stdio import stdio_client
from vault_fixtures import write_vault

from ragd.daemon.errors import InvalidArgument, PathRefused, RagdError
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.settings.paths import resolve_paths
from ragd.mcp_bridge.tools import TOOLS

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="/proc, FIFOs and links")]

BRIDGE = Path(sys.executable).parent / "ragd-mcp"
RAGD = str(Path(sys.executable).with_name("ragd"))
KEY = "plantedkeyquokka"  # in ~/.aws and ~/.ssh: never converted, indexed nor found
GIB = 1 << 30
REPLY_CHARS = 200_000


@dataclass
class Env:
    root: Path
    home: Path
    vault: Path
    allowed: Path
    user: Path
    calibre: Path
    daemon: DaemonProc

    def ipc(self, client_name: str = "ragd-mcp") -> Client:
        address = find_daemon(resolve_paths({"RAGD_HOME": str(self.home)}))
        assert address, "daemon not running"
        return Client(address, timeout=120, client_name=client_name)

    def peak_rss(self) -> int:
        assert self.daemon.proc is not None
        with open(f"/proc/{self.daemon.proc.pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")


def _toml(value: Any) -> str:
    return json.dumps(value)  # a JSON string or list of strings is TOML


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    root = tmp_path_factory.mktemp("reach")
    vault = write_vault(root / "vault")
    (vault / "Papers").mkdir()
    (vault / "Papers" / "Field guide.pdf").write_bytes(pdf_bytes())
    allowed, user, calibre = root / "allowed", root / "user", root / "calibre"
    for folder in (allowed, user / ".aws", user / ".ssh", calibre):
        folder.mkdir(parents=True)
    (allowed / "notes.txt").write_text("Allowed notes about herons.\n", encoding="utf-8")
    (user / ".aws" / "credentials.txt").write_text(f"aws_secret={KEY}\n", encoding="utf-8")
    (user / ".ssh" / "id_rsa.txt").write_text(f"{KEY} ssh key\n", encoding="utf-8")
    (user / "notes.txt").write_text("private notes\n", encoding="utf-8")
    (calibre / "metadata.db").write_bytes(b"not a database " * 500)
    home = root / "home"
    config = resolve_paths({"RAGD_HOME": str(home)}).config_file
    config.parent.mkdir(parents=True)
    config.write_text(f"[convert]\nallow = {_toml([str(allowed)])}\n\n"
                      f"[calibre]\nlibraries = {_toml([str(calibre)])}\n", encoding="utf-8")
    daemon = DaemonProc(home, vault, root / "daemon.log").start()
    daemon_proc.STARTED.remove(daemon)  # stopped at the end of the module, not of a test
    try:
        daemon.wait_idle()
        yield Env(root, home, vault, allowed, user, calibre, daemon)
    finally:
        daemon.stop()


@pytest.fixture
def errlog(tmp_path: Path) -> Iterator[TextIO]:
    path = tmp_path / "bridge.log"
    with open(path, "w+", encoding="utf-8") as log:
        yield log
    text = path.read_text(encoding="utf-8")
    print(text)
    assert "Traceback" not in text


@asynccontextmanager
async def bridge(env: Env, errlog: TextIO) -> AsyncIterator[ClientSession]:
    variables = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    params = StdioServerParameters(command=str(BRIDGE), env={
        **variables, "RAGD_HOME": str(env.home), "HF_HUB_OFFLINE": "1"})
    async with stdio_client(params, errlog=errlog) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def call_all(env: Env, errlog: TextIO, calls: list[tuple[str, dict[str, Any]]]
             ) -> list[types.CallToolResult]:
    async def run() -> list[types.CallToolResult]:
        async with bridge(env, errlog) as session:
            return [await session.call_tool(name, args) for name, args in calls]

    return anyio.run(run)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def refusal(result: types.CallToolResult, code: str, *words: str) -> str:
    """The text of a tool error that names its parameter, its code and the fix."""
    message = text(result)
    assert result.isError, message
    assert f"({code})" in message and "Fix:" in message, message
    assert "internal error" not in message.lower(), message
    for word in words:
        assert word in message, message
    return message


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.isError, text(result)
    assert isinstance(result.structuredContent, dict)
    return result.structuredContent


class NoteSaved:
    """While a case runs: save a note, and time how long it takes to be searchable."""

    def __init__(self, env: Env, word: str) -> None:
        self.env, self.word = env, word
        self.seconds: float | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        t0 = time.monotonic()
        (self.env.vault / f"Saved {self.word}.md").write_text(
            f"# Saved\n\nThe {self.word} was written while the case ran.\n", encoding="utf-8")
        with self.env.ipc("test") as client:
            while time.monotonic() - t0 < 30:
                hits = client.call("search", {"query": self.word, "mode": "keyword"})
                if hits["results"]:
                    self.seconds = time.monotonic() - t0
                    return
                time.sleep(0.05)

    def __enter__(self) -> NoteSaved:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._thread.join(40)


def check_the_rest(env: Env, note: NoteSaved) -> None:
    """What every row must show besides its code."""
    assert note.seconds is not None and note.seconds < 2.0, note.seconds
    assert env.peak_rss() < GIB, env.peak_rss()
    print(f"{note.word}: the saved note was searchable in {note.seconds:.2f} s; "
          f"daemon peak RSS {env.peak_rss() / 2**20:.0f} MB")


def listed(env: Env) -> set[str]:
    with env.ipc() as client:
        return {d["source_path"] for d in client.call("doc_store_info")}


# -- rag_convert's reach -------------------------------------------------------------------------
def test_row6_links_to_system_files_devices_and_pipes_get_a_code(env: Env,
                                                                  errlog: TextIO) -> None:
    a = env.allowed
    for name, target in [("passwd.txt", "/etc/passwd"), ("shadow.txt", "/etc/shadow"),
                         ("environ.txt", "/proc/self/environ"), ("zero.txt", "/dev/zero")]:
        (a / name).symlink_to(target)
    os.mkfifo(a / "fifo.txt")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(a / "sock.txt"))
    try:
        with NoteSaved(env, "row6heron") as note:
            results = call_all(env, errlog, [
                ("rag_convert", {"file_path": str(a / "passwd.txt")}),
                ("rag_convert", {"file_path": str(a / "shadow.txt")}),
                ("rag_convert", {"file_path": str(a / "environ.txt")}),
                ("rag_convert", {"file_path": str(a / "zero.txt")}),
                ("rag_convert", {"file_path": str(a / "fifo.txt")}),
                ("rag_convert", {"file_path": str(a / "sock.txt")}),
                ("rag_convert", {"file_path": "/proc/self/environ"}),
            ])
    finally:
        sock.close()
    passwd, shadow, environ, zero, fifo, sock_result, proc = results
    refusal(passwd, "outside_reach", "[convert] allow")
    refusal(shadow, "outside_reach", "[convert] allow")
    refusal(environ, "system_file", "/proc")
    refusal(zero, "system_file", "character device")
    refusal(fifo, "not_regular", "named pipe")
    refusal(sock_result, "not_regular", "socket")
    refusal(proc, "system_file")
    check_the_rest(env, note)

    # The command line reads what the user names, and still never /proc.
    run_env = {**os.environ, "RAGD_HOME": str(env.home), "HF_HUB_OFFLINE": "1"}
    cli = {name: subprocess.run([RAGD, "convert", str(a / name)], env=run_env, text=True,
                                capture_output=True, timeout=120, check=False)
           for name in ("passwd.txt", "environ.txt", "shadow.txt")}
    assert cli["passwd.txt"].returncode == 0 and "root:" in cli["passwd.txt"].stdout
    assert cli["environ.txt"].returncode != 0
    assert "system file" in cli["environ.txt"].stderr, cli["environ.txt"].stderr
    shadow_cli = cli["shadow.txt"]  # root reads it; anyone else is told it is unreadable
    assert shadow_cli.returncode == 0 or "cannot be read" in shadow_cli.stderr
    for proc_result in cli.values():
        assert "Traceback" not in proc_result.stderr
        assert "internal error" not in proc_result.stderr


def test_row7_outside_and_hidden_paths_are_refused_and_nothing_is_kept(
        env: Env, errlog: TextIO) -> None:
    a = env.allowed
    (a / "innocent.txt").symlink_to(env.user / ".aws" / "credentials.txt")
    (a / "mine.txt").symlink_to(env.user / "notes.txt")
    (a / "Keys").symlink_to(env.user / ".ssh", target_is_directory=True)
    pdf = env.vault / "Papers" / "Field guide.pdf"
    with NoteSaved(env, "row7heron") as note:
        results = call_all(env, errlog, [
            ("rag_convert", {"file_path": str(env.user / ".aws" / "credentials.txt")}),
            ("rag_convert", {"file_path": str(env.user / "notes.txt")}),
            ("rag_convert", {"file_path": str(a / "innocent.txt")}),
            ("rag_convert", {"file_path": str(a / "mine.txt")}),
            ("rag_convert", {"file_path": str(a / "Keys" / "id_rsa.txt")}),
            ("rag_convert", {"file_path": str(env.user / "missing.txt")}),
            ("rag_convert", {"file_path": str(pdf)}),
            ("rag_convert", {"file_path": str(a / "notes.txt")}),
            ("rag_doc_store_info", {}),
        ])
    aws, notes, innocent, mine, keys, missing, inside, allowed, docs = results
    refusal(aws, "hidden_path", ".aws")
    refusal(notes, "outside_reach", "[convert] allow", str(a))
    refusal(innocent, "hidden_path")
    refusal(mine, "outside_reach")
    refusal(keys, "hidden_path")
    refusal(missing, "outside_reach")  # outside: not even whether it exists
    for result in (aws, notes, innocent, mine, keys):
        assert KEY not in text(result) and "private notes" not in text(result)
    converted = ok(inside)
    assert converted["source_type"] == "pdf" and "## Page 2" in converted["markdown"]
    assert converted["truncated"] is False
    assert ok(allowed)["markdown"] == "Allowed notes about herons.\n"
    paths = {d["source_path"] for d in ok(docs)["result"]}
    assert str(pdf) in paths  # in a collection: kept
    assert not {p for p in paths if not p.startswith(str(env.vault))}, paths  # nothing else
    check_the_rest(env, note)


def test_row9_a_huge_document_answers_a_bounded_piece(env: Env, errlog: TextIO) -> None:
    big = env.allowed / "big.txt"
    big.write_text(("word " * 20 + "\n") * 700_000, encoding="utf-8")  # 70 MB
    with NoteSaved(env, "row9heron") as note:
        [result] = call_all(env, errlog, [("rag_convert", {"file_path": str(big)})])
    answer = ok(result)
    assert len(answer["markdown"]) <= REPLY_CHARS and answer["truncated"] is True
    assert answer["total_chars"] > REPLY_CHARS
    assert len(text(result).encode()) < 2 * REPLY_CHARS  # the whole tool answer
    assert str(big) not in listed(env)
    print(f"rag_convert of a 70 MB text: {len(text(result).encode()):,}-byte tool answer, "
          f"{len(answer['markdown']):,} of {answer['total_chars']:,} characters")
    check_the_rest(env, note)
    # The command line gets all of it, in bounded pieces.
    whole = subprocess.run([RAGD, "convert", str(big)], capture_output=True, timeout=300,
                           env={**os.environ, "RAGD_HOME": str(env.home)}, check=False)
    assert whole.returncode == 0, whole.stderr
    assert len(whole.stdout.decode()) == answer["total_chars"] + 1  # print's newline


# -- no internal errors from a path or a parameter ------------------------------------------------
def test_row10_nul_bytes_overlong_filters_and_proc_paths_get_a_code(env: Env,
                                                                    errlog: TextIO) -> None:
    with NoteSaved(env, "row10heron") as note:
        results = call_all(env, errlog, [
            ("rag_convert", {"file_path": str(env.allowed) + "/a\x00b.txt"}),
            ("rag_search", {"query": "heron", "author": "a" * 100_000}),
            ("rag_index", {"collection": "procone", "path": "/proc/1~"}),
            ("rag_index", {"collection": "proctwo", "path": "/proc/1/root"}),
        ])
    nul, author, proc_one, proc_root = results
    refusal(nul, "nul_in_path", "NUL")
    assert "`author`" in text(author) and "too long" in text(author) and author.isError
    for result in (proc_one, proc_root):
        assert result.isError and "internal error" not in text(result).lower()
        assert "`path`" in text(result), text(result)
    # The daemon refuses them itself, whoever asks: parameters by length (invalid params).
    with env.ipc() as client:
        with pytest.raises(PathRefused) as conv:
            client.call("convert", {"file_path": "/tmp/a\x00b.txt"})
        assert conv.value.code == "nul_in_path"
        with pytest.raises(p.InvalidParams) as long_author:
            client.call("search", {"query": "heron", "author": "a" * 100_000})
        assert long_author.value.param == "author"
        with pytest.raises(InvalidArgument) as proc:
            client.call("index", {"collection": "procone", "path": "/proc/1~"})
        assert "system folder" in proc.value.message
    check_the_rest(env, note)


def test_row11_proc_and_log_folders_are_not_projects(env: Env, errlog: TextIO) -> None:
    with NoteSaved(env, "row11heron") as note:
        results = call_all(env, errlog, [
            ("rag_index", {"collection": "cwd", "path": "/proc/self/cwd"}),
            ("rag_index", {"collection": "logs", "path": "/var/log"}),
            ("rag_index", {"collection": "runs", "path": "/run"}),
            ("rag_list_collections", {}),
        ])
    *refused_ones, listing = results
    for result in refused_ones:
        assert result.isError and "system folder" in text(result), text(result)
        assert "`path`" in text(result)
    names = {c["name"] for c in ok(listing)["result"]}
    assert not names & {"cwd", "logs", "runs"}
    check_the_rest(env, note)


def test_row17_a_corrupt_calibre_library_is_the_error_status_shows(env: Env,
                                                                   errlog: TextIO) -> None:
    with NoteSaved(env, "row17heron") as note:
        [result] = call_all(env, errlog, [("rag_index", {"collection": "calibre"})])
    message = text(result)
    assert result.isError and "(library_unreadable)" in message, message
    assert "file is not a database" in message and "internal error" not in message.lower()
    said = message.split("): ", 1)[1].split(". What to do")[0]
    with env.ipc("ragd-cli") as client:
        errors = [e["error"] for e in client.call("status")["errors"]]
    assert any(e.startswith(said) for e in errors), (errors, said)
    check_the_rest(env, note)


def test_row18_hidden_folders_are_not_indexed_and_their_keys_not_found(
        env: Env, errlog: TextIO) -> None:
    (env.root / "keys").symlink_to(env.user / ".ssh", target_is_directory=True)
    with NoteSaved(env, "row18heron") as note:
        results = call_all(env, errlog, [
            ("rag_index", {"collection": "ssh", "path": str(env.user / ".ssh")}),
            ("rag_index", {"collection": "aws", "path": str(env.user / ".aws")}),
            ("rag_index", {"collection": "keys", "path": str(env.root / "keys")}),
            ("rag_search", {"query": KEY}),
        ])
    *indexed, found = results
    for result in indexed:
        assert result.isError and "hidden folder" in text(result), text(result)
    assert "(hidden_path)" in text(indexed[2])  # the link: refused by what it resolves to
    hits = ok(found)["results"]  # semantic neighbours from the vault, never the key
    assert all(KEY not in h["content"] and str(env.user) not in h["source_path"] for h in hits)
    check_the_rest(env, note)


# -- 200 malformed tool calls ------------------------------------------------------------------------
WRONG_TYPES: list[Any] = [1, 2.5, True, [], {}, ["a"], {"a": 1}]
HUGE = ["x" * 100_001, "y" * 300_000, "z " * 60_000]
NUL = ["a\x00b", "\x00", "/tmp/\x00/x.pdf"]
PATHS = ["/proc/1~", "/proc/self/cwd", "/proc/self/environ", "/dev/zero", "/etc/shadow",
         "../../etc/passwd", "~", "~/.ssh", "/", "//", "\\\\?\\C:\\Windows", "C:\\Windows",
         "/var/log", "/sys/kernel", "/run", " ", "", "~/.gnupg/x.txt", "/proc/1/root/x.pdf",
         "file:///etc/passwd"]
ENUMS = ["nonsense", "system2", "ALL", "-1", "9" * 5000, "2024-13-45", "yesterday"]
NUMBERS: list[Any] = [0, -1, 101, 10**30, "ten", "9" * 5000, 1e300]


def malformed_calls() -> list[tuple[str, dict[str, Any]]]:
    """Every tool, every parameter, bad values of every kind, taken in turns: 200 calls."""
    valid = {"rag_search": {"query": "heron"}, "rag_collection_info": {"collection": "obsidian"},
             "rag_index": {"collection": "malformedproj"}, "rag_convert": {"file_path": "/nope.pdf"},
             "rag_list_collections": {}, "rag_doc_store_info": {}}
    per_tool: dict[str, list[dict[str, Any]]] = {}
    for spec in TOOLS:
        params = list(spec.input_schema["properties"])
        calls: list[dict[str, Any]] = [{}, {"bogus": 1}, {"bogus": "\x00" * 10}]
        for name in params:
            values = WRONG_TYPES + HUGE + NUL + (NUMBERS if name == "top_k" else PATHS
                                                  if name in ("path", "file_path") else ENUMS)
            calls += [{**valid[spec.name], name: value} for value in values]
            calls.append({k: v for k, v in valid[spec.name].items() if k != name})
        per_tool[spec.name] = calls
    out: list[tuple[str, dict[str, Any]]] = []
    while len(out) < 200:
        for name, calls in per_tool.items():
            if calls:
                out.append((name, calls.pop(0)))
    return out[:200]


def test_200_malformed_calls_across_every_tool_give_no_internal_error(
        env: Env, errlog: TextIO) -> None:
    calls = malformed_calls()
    assert {name for name, _ in calls} == {spec.name for spec in TOOLS}

    async def run() -> tuple[list[Any], dict[str, Any]]:
        outcomes: list[Any] = []
        async with bridge(env, errlog) as session:
            for name, args in calls:
                try:
                    outcomes.append(await session.call_tool(name, args))
                except McpError as exc:  # a JSON-RPC error instead of a tool result
                    outcomes.append(exc.error)
            after = ok(await session.call_tool("rag_list_collections", {}))
        return outcomes, after

    t0 = time.monotonic()
    outcomes, after = anyio.run(run)
    seconds = time.monotonic() - t0
    internal = []
    for (name, args), outcome in zip(calls, outcomes, strict=True):
        if isinstance(outcome, types.ErrorData):
            if outcome.code == p.INTERNAL_ERROR:
                internal.append((name, str(args)[:80], outcome.message))
        elif outcome.isError and "internal error" in text(outcome).lower():
            internal.append((name, str(args)[:80], text(outcome)[:200]))
    assert not internal, internal
    assert sum(1 for o in outcomes if not isinstance(o, types.ErrorData) and o.isError) > 150
    assert {c["name"] for c in after["result"]} >= {"obsidian"}
    with env.ipc("ragd-cli") as client:  # the daemon still answers
        assert client.call("status")["state"] in ("idle", "indexing")
    print(f"200 malformed calls in {seconds:.1f} s")


def test_the_same_calls_straight_to_the_daemon_give_no_internal_error(env: Env) -> None:
    # Past the bridge's own checks: the daemon validates what any client sends.
    methods = {spec.name: spec.method for spec in TOOLS}
    internal = []
    with env.ipc() as client:
        for name, args in malformed_calls():
            try:
                client.call(methods[name], args, timeout=60)
            except RagdError as exc:
                if exc.code == "internal":
                    internal.append((name, str(args)[:80], exc.message))
        assert client.call("status", {"brief": True})["state"] in ("idle", "indexing")
    assert not internal, internal


def test_a_reply_error_is_rebuilt_with_its_code_by_any_client(env: Env) -> None:
    with env.ipc() as client, pytest.raises(RagdError) as info:
        client.call("convert", {"file_path": str(env.user / ".aws" / "credentials.txt")})
    assert info.value.code == "hidden_path"
