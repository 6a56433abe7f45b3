"""`ragd mcp --http`: the stdio server's tools over Streamable HTTP, behind a bearer token and
Host/Origin checks (decision 0052).

The rules (addresses, hosts, origins, tokens, the guard) are tested in-process; one module
daemon over a generated vault then serves a real `ragd-mcp --http` subprocess, reached with the
SDK's own Streamable HTTP client and with plain httpx for the refusals.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import keyring
import keyring.core
import pytest
from daemon_proc import DaemonProc, start_module_daemon, wait_for
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from starlette.types import Receive, Scope, Send
from vault_fixtures import write_vault

from ragd.daemon.errors import ConfigError, InvalidArgument
from ragd.daemon.settings import secrets
from ragd.mcp_bridge import http
from ragd.mcp_bridge.http import (
    Guard,
    allowed_host,
    allowed_origin,
    host_name,
    parse_bind,
    resolve_token,
    token_matches,
)

BIN = Path(sys.executable).parent
FAIL = "keyring.backends.fail.Keyring"
TOKEN = "test-token-0123456789abcdefghij"
LOOPBACK = parse_bind("127.0.0.1")
LAN = parse_bind("192.168.1.5")
EVERY = parse_bind("0.0.0.0")
NAMES = frozenset({"box", "box.local"})
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "0"}}}
POST_HEADERS = {"Content-Type": "application/json",
                "Accept": "application/json, text/event-stream"}


# -- the rules ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "expected"), [
    ("127.0.0.1", "127.0.0.1"), ("localhost", "127.0.0.1"), (" ::1 ", "::1"), ("[::1]", "::1"),
    ("0.0.0.0", "0.0.0.0"), ("192.168.1.5", "192.168.1.5")])
def test_bind_is_an_ip_address(text: str, expected: str) -> None:
    assert str(parse_bind(text)) == expected


@pytest.mark.parametrize("text", ["example.com", "", "127.0.0.1:8766", "999.1.1.1"])
def test_a_bind_that_is_not_an_ip_address_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="http.bind: .* is not an IP address"):
        parse_bind(text)


@pytest.mark.parametrize(("header", "expected"), [
    ("127.0.0.1:8766", "127.0.0.1"), ("LOCALHOST", "localhost"), ("localhost.:80", "localhost"),
    ("[::1]:8766", "::1"), ("[::1]", "::1"), ("evil.example:8766", "evil.example"),
    (None, None), ("", None), ("::1", None), ("[::1", None), ("[::1]x", None),
    ("host:port", None)])
def test_host_header_parsing(header: str | None, expected: str | None) -> None:
    assert host_name(header) == expected


@pytest.mark.parametrize(("host", "loopback", "lan", "every"), [
    ("localhost", True, True, True),
    ("127.0.0.1", True, True, True),
    ("::1", True, True, True),
    ("192.168.1.5", False, True, True),
    ("192.168.1.6", False, False, True),
    ("box.local", False, True, True),  # this machine's own name, once bound beyond loopback
    ("evil.example", False, False, False),  # a rebinding page's name: never
    ("127.0.0.1.nip.io", False, False, False),
    (None, False, False, False),
])
def test_which_hosts_each_bind_accepts(host: str | None, loopback: bool, lan: bool,
                                       every: bool) -> None:
    assert allowed_host(host, LOOPBACK, NAMES) is loopback
    assert allowed_host(host, LAN, NAMES) is lan
    assert allowed_host(host, EVERY, NAMES) is every


@pytest.mark.parametrize(("origin", "loopback", "lan"), [
    (None, True, True),  # not a browser
    ("http://127.0.0.1:8766", True, True),
    ("http://localhost:3000", True, True),
    ("https://[::1]", True, True),
    ("http://192.168.1.5:8766", False, True),
    ("http://evil.example", False, False),
    ("https://evil.example:8766", False, False),
    ("null", False, False),  # a sandboxed frame or a file
    ("file://", False, False),
    ("chrome-extension://abc", False, False),
    ("http://[::1", False, False),
])
def test_which_origins_each_bind_accepts(origin: str | None, loopback: bool, lan: bool) -> None:
    assert allowed_origin(origin, LOOPBACK, NAMES) is loopback
    assert allowed_origin(origin, LAN, NAMES) is lan


@pytest.mark.parametrize(("header", "ok"), [
    (f"Bearer {TOKEN}", True), (f"bearer {TOKEN}", True), (f"  Bearer   {TOKEN} ", True),
    (f"Bearer {TOKEN}x", False), (f"Bearer {TOKEN[:-1]}", False), ("Bearer", False),
    (f"Basic {TOKEN}", False), (TOKEN, False), (None, False), ("", False),
    ("Bearer ünïcode", False)])
def test_the_bearer_token_must_match(header: str | None, ok: bool) -> None:
    assert token_matches(header, TOKEN) is ok


# -- the guard, in-process ----------------------------------------------------------------------
def guarded_call(headers: dict[str, str], bind: str = "127.0.0.1",
                 url: str = "http://127.0.0.1:8766/mcp") -> tuple[httpx.Response, list[str]]:
    """A request through the Guard to an app that only records that it was reached."""
    reached: list[str] = []

    async def inner(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"served"})

    guard = Guard(inner, token=TOKEN, bind=parse_bind(bind), names=NAMES)

    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=guard)) as client:
            return await client.post(url, json=INITIALIZE, headers=headers)

    return anyio.run(run), reached


def assert_refused(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert not [h for h in response.headers if h.lower().startswith("access-control-")]
    assert "mcp-session-id" not in response.headers
    body: dict[str, Any] = response.json()
    assert body["error"] == code and body["message"] and body["hint"]
    return body


def test_the_guard_lets_a_right_request_through() -> None:
    response, reached = guarded_call({"Authorization": f"Bearer {TOKEN}"})
    assert (response.status_code, response.text, reached) == (200, "served", ["/mcp"])
    # A browser on this machine's own origin, with the token, is an MCP client too.
    response, reached = guarded_call({"Authorization": f"Bearer {TOKEN}",
                                      "Origin": "http://localhost:8766"})
    assert response.status_code == 200 and reached == ["/mcp"]


def test_the_guard_asks_for_the_token_and_says_where_it_is() -> None:
    response, reached = guarded_call({})
    body = assert_refused(response, 401, "unauthorized")
    assert reached == []
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert body["message"].startswith("no bearer token")
    for what_to_do in ("Authorization: Bearer", "ragd secret set mcp.http_token",
                       "ragd mcp --http --new-token", "ragd secret show mcp.http_token",
                       "RAGD_MCP_HTTP_TOKEN"):
        assert what_to_do in body["hint"]
    response, reached = guarded_call({"Authorization": "Bearer wrong"})
    assert assert_refused(response, 401, "unauthorized")["message"].startswith(
        "the bearer token is not this server's")
    assert reached == []


def test_the_guard_refuses_foreign_hosts_and_origins_even_with_the_token() -> None:
    token = {"Authorization": f"Bearer {TOKEN}"}
    response, reached = guarded_call({**token, "Host": "evil.example:8766"})
    assert "DNS rebinding" in assert_refused(response, 403, "forbidden_host")["hint"]
    response, reached2 = guarded_call({**token, "Origin": "http://evil.example"})
    assert_refused(response, 403, "forbidden_origin")
    # Bound to a LAN address, that address is accepted; still no other name.
    response, reached3 = guarded_call(token, bind="192.168.1.5", url="http://192.168.1.5/mcp")
    assert response.status_code == 200
    response, _ = guarded_call(token, bind="127.0.0.1", url="http://192.168.1.5/mcp")
    assert_refused(response, 403, "forbidden_host")
    assert reached == reached2 == [] and reached3 == ["/mcp"]


# -- the token ----------------------------------------------------------------------------------
@pytest.fixture
def no_keyring(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """keyring's fail backend: nothing reaches the user's keyring, whatever the machine has."""
    before = keyring.get_keyring()
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", FAIL)
    keyring.core.init_backend()
    yield
    keyring.set_keyring(before)


def test_the_env_token_wins_and_no_store_is_opened(no_keyring: None) -> None:
    token = resolve_token(EVERY, env={"RAGD_MCP_HTTP_TOKEN": f" {TOKEN} "})
    assert (token.value, token.created, token.lasting) == (TOKEN, False, True)
    assert "RAGD_MCP_HTTP_TOKEN" in token.where
    with pytest.raises(ConfigError, match="RAGD_MCP_HTTP_TOKEN is set"):
        resolve_token(LOOPBACK, new=True, env={"RAGD_MCP_HTTP_TOKEN": TOKEN})


def test_a_token_is_created_once_kept_and_replaced_on_request(
        no_keyring: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "secrets.json"
    env = {"RAGD_SECRETS_FILE": str(store)}
    first = resolve_token(LOOPBACK, env=env)
    assert first.created and first.lasting and len(first.value) >= 40
    assert str(store) in first.where
    assert (store.stat().st_mode & 0o777) == 0o600
    assert secrets.get_secret("mcp.http_token", env) == first.value
    again = resolve_token(EVERY, env=env)
    assert (again.value, again.created) == (first.value, False)
    new = resolve_token(LOOPBACK, new=True, env=env)
    assert new.created and new.value != first.value
    assert secrets.get_secret("mcp.http_token", env) == new.value
    # `ragd secret show` prints this token, and only this one.
    monkeypatch.setenv("RAGD_SECRETS_FILE", str(store))
    assert secrets.cmd_secret(_args("show", "mcp.http_token")) == 0
    assert capsys.readouterr().out == new.value + "\n"
    secrets.set_secret("embedding.api_key", "k")
    with pytest.raises(InvalidArgument, match="never shown"):
        secrets.cmd_secret(_args("show", "embedding.api_key"))


def _args(action: str, name: str) -> Any:
    import argparse

    return argparse.Namespace(action=action, name=name)


def test_with_no_store_loopback_gets_a_token_for_this_run_and_the_network_none(
        no_keyring: None) -> None:
    token = resolve_token(LOOPBACK, env={})
    assert token.created and not token.lasting and len(token.value) >= 40
    assert token.value in http.started_line(LOOPBACK, 8766, token, 3)  # the only way to learn it
    for bind in (EVERY, LAN):
        with pytest.raises(ConfigError, match="refusing to serve MCP over HTTP on") as caught:
            resolve_token(bind, env={})
        assert "RAGD_MCP_HTTP_TOKEN" in caught.value.hint


def test_the_started_line_says_where_and_how_to_authenticate() -> None:
    kept = http.Token("x" * 43, "the OS keyring (SecretService)", False, True)
    line = http.started_line(LOOPBACK, 8766, kept, 17)
    assert "http://127.0.0.1:8766/mcp" in line and "Authorization: Bearer <token>" in line
    assert "ragd secret show mcp.http_token" in line and "x" * 43 not in line
    assert "http://[::1]:9/mcp" in http.started_line(parse_bind("::1"), 9, kept, 1)


def test_the_socket_is_tcp_so_replies_are_not_held_back() -> None:
    """asyncio sets TCP_NODELAY only on a socket that says IPPROTO_TCP: without it each reply
    on a kept-alive connection waited out a delayed ACK (44 ms, measured)."""
    sock = http.open_socket(LOOPBACK, 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP and sock.getsockname()[1] > 0
        with pytest.raises(ConfigError, match="cannot listen on http://127.0.0.1:") as caught:
            http.open_socket(LOOPBACK, sock.getsockname()[1])
        assert "--port" in caught.value.hint
    finally:
        sock.close()
    with pytest.raises(ConfigError, match="http.port: 70000 is not a port"):
        http.open_socket(LOOPBACK, 70000)


def test_a_network_bind_without_a_lasting_token_is_refused_at_the_command_line(
        tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    env.update(RAGD_HOME=str(tmp_path / "home"), PYTHON_KEYRING_BACKEND=FAIL)
    out = subprocess.run([str(BIN / "ragd"), "mcp", "--http", "--bind", "0.0.0.0", "--port",
                          "0"], capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1, out.stderr
    assert "error: refusing to serve MCP over HTTP on 0.0.0.0" in out.stderr
    assert "hint: set RAGD_MCP_HTTP_TOKEN" in out.stderr
    assert "Traceback" not in out.stderr


def test_http_options_need_http() -> None:
    import argparse

    from ragd.mcp_bridge.server import cmd_mcp

    with pytest.raises(InvalidArgument, match="--port: only applies with --http"):
        cmd_mcp(argparse.Namespace(http=False, port=9000, bind=None, new_token=False))


PROBE = """
import json, sys
import ragd.mcp_bridge.http as h
import ragd.mcp_bridge.server as s
app = h.build_app(s.build_server(s.choose_tools(s.configured_toolsets()), s.DaemonLink()),
                  "t" * 20, h.parse_bind("127.0.0.1"))
import uvicorn
print(json.dumps(sorted(sys.modules)))
"""


def test_the_http_bridge_imports_nothing_heavy(ragd_home: Path) -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                         check=True, timeout=120)
    heavy = ("torch", "faiss", "whoosh", "sentence_transformers", "numpy", "transformers",
             "tokenizers")
    loaded = json.loads(out.stdout)
    assert [m for m in loaded if m.split(".")[0] in heavy] == []
    assert not [m for m in loaded if m.startswith(("ragd.daemon.runtime.app", "ragd.daemon.search"))]


# -- a real server ------------------------------------------------------------------------------
@dataclass
class Served:
    home: Path
    url: str
    port: int
    log: Path
    daemon: DaemonProc


def bridge_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGD_")}
    return {**env, "RAGD_HOME": str(home), "HF_HUB_OFFLINE": "1",
            "RAGD_DAEMON_DEBOUNCE_MS": "150", "PYTHON_KEYRING_BACKEND": FAIL, **extra}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("mcp-http")
    daemon = start_module_daemon(root, write_vault(root / "vault"), "")
    log = root / "http.log"
    proc: subprocess.Popen[bytes] | None = None
    try:
        daemon.wait_idle()
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ragd.mcp_bridge.server", "--http", "--port", "0"],
                env=bridge_env(daemon.home, RAGD_MCP_HTTP_TOKEN=TOKEN), stdout=out,
                stderr=subprocess.STDOUT, start_new_session=True)

        def started() -> re.Match[str] | None:
            assert proc is not None and proc.poll() is None, log.read_text()
            return re.search(r"MCP over HTTP at (http://127\.0\.0\.1:(\d+)/mcp)",
                             log.read_text(encoding="utf-8"))

        found = wait_for(started, 30, "ragd-mcp --http to listen")
        yield Served(daemon.home, found[1], int(found[2]), log, daemon)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=15) in (0, 130)
        assert "Traceback" not in log.read_text(encoding="utf-8")
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        daemon.stop()
        print(log.read_text(encoding="utf-8") if log.exists() else "(no log)")


@pytest.mark.slow
def test_http_serves_the_stdio_servers_tools_and_finds_a_note(served: Served) -> None:
    async def over_http() -> tuple[str, list[str], dict[str, Any]]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(headers=headers, timeout=60) as client, \
                streamable_http_client(served.url, http_client=client) as (read, write, _), \
                ClientSession(read, write) as session:
            init = await session.initialize()
            tools = [t.name for t in (await session.list_tools()).tools]
            result = await session.call_tool("rag_search", {"query": "xylofrabic"})
            assert not result.isError, result.content
            assert result.structuredContent is not None
            return init.serverInfo.name, tools, result.structuredContent

    async def over_stdio() -> list[str]:
        params = StdioServerParameters(command=str(BIN / "ragd-mcp"),
                                       env=bridge_env(served.home))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

    name, tools, answer = anyio.run(over_http)
    assert name == "ragd"
    assert tools == anyio.run(over_stdio)  # the same tools, in the same order
    assert {"rag_search", "rag_index", "rag_read_note"} <= set(tools)
    assert answer["results"][0]["title"] == "Xylofrabic protocol"
    started = served.log.read_text(encoding="utf-8")
    assert "clients authenticate with the header `Authorization: Bearer <token>`" in started
    assert "RAGD_MCP_HTTP_TOKEN" in started and TOKEN not in started


@pytest.mark.slow
def test_http_refuses_without_the_token_or_from_elsewhere(served: Served) -> None:
    url = served.url
    token = {"Authorization": f"Bearer {TOKEN}"}
    port = served.port
    before = served.log.read_text(encoding="utf-8").count("refused POST /mcp")
    with httpx.Client(timeout=30) as client:
        def post(**headers: str) -> httpx.Response:
            return client.post(url, json=INITIALIZE, headers={**POST_HEADERS, **headers})

        body = assert_refused(post(), 401, "unauthorized")
        assert "ragd secret set mcp.http_token" in body["hint"]
        assert "ragd mcp --http --new-token" in body["hint"]
        assert_refused(post(Authorization="Bearer not-the-token"), 401, "unauthorized")
        assert_refused(post(Authorization=TOKEN), 401, "unauthorized")  # no scheme
        assert_refused(post(**token, Origin="http://evil.example"), 403, "forbidden_origin")
        assert_refused(post(**token, Host=f"evil.example:{port}"), 403, "forbidden_host")
        # Any other path and method are behind the same guard.
        assert_refused(client.get(f"http://127.0.0.1:{port}/.well-known/oauth-protected-"
                                  "resource"), 401, "unauthorized")

        # The same request, right, is served: the guard refused only what it should.
        ok = post(**token, Origin=f"http://localhost:{port}", Host=f"localhost:{port}")
        assert ok.status_code == 200, ok.text
        session = ok.headers["mcp-session-id"]
        assert '"serverInfo"' in ok.text and not [
            h for h in ok.headers if h.lower().startswith("access-control-")]
        gone = client.delete(url, headers={**token, "mcp-session-id": session})
        assert gone.status_code in (200, 204)
        # A refused request with a real session id reaches nothing either.
        assert_refused(client.delete(url, headers={"mcp-session-id": session}), 401,
                       "unauthorized")
    refused = served.log.read_text(encoding="utf-8").count("refused POST /mcp")
    assert refused - before == 5
