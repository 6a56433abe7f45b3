"""The IPC server over a real socket: handshake, concurrency, and every kind of bad input.

Each robustness test keeps a second, already-connected client and checks it is still served.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import resource
import socket
import stat
import struct
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ragd.daemon.errors import (
    AlreadyRunning,
    ConfigError,
    DaemonUnavailable,
    InvalidArgument,
    NotFound,
    RagdError,
)
from ragd.daemon.ipc import async_client as async_client_module
from ragd.daemon.ipc import client as client_module
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.address import validate_pipe_name
from ragd.daemon.ipc.async_client import AsyncClient
from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.server import IpcServer
from ragd.daemon.settings.paths import Paths

WAIT = 10.0


async def _no_dispatch(method: str, params: dict, conn: object) -> None:
    raise AssertionError("not called")


def _frame(rid: object, method: str, params: object = None) -> bytes:
    return p.encode({"jsonrpc": "2.0", "id": rid, "method": method,
                     **({"params": params} if params is not None else {})})


# -- handshake -------------------------------------------------------------------------------


def test_sync_client_says_hello_and_calls(server) -> None:
    with Client(server.address, client_name="test-cli") as client:
        info = client.server_info
        assert info["daemon_version"] == "9.9.9-test"
        assert info["protocol"] == p.PROTOCOL_VERSION
        assert info["capabilities"] == list(p.METHODS)
        assert info["pid"] == os.getpid()
        assert client.call("status", {"x": 1})["echo"] == {"x": 1}
        # Params arrive validated and complete.
        assert client.call("search", {"query": "q"}) == {"query": "q", "top_k": 10, "tags": []}


def test_async_client_carries_many_concurrent_calls_on_one_connection(server) -> None:
    async def main() -> list:
        async with await AsyncClient.connect(server.address) as client:
            assert client.server_info["protocol"] == p.PROTOCOL_VERSION
            return await asyncio.gather(*(client.call("status", {"i": i}) for i in range(200)))

    results = asyncio.run(main())
    assert [r["echo"]["i"] for r in results] == list(range(200))
    assert len({r["conn"] for r in results}) == 1


def test_protocol_mismatch_is_refused_with_a_restart_hint(raw) -> None:
    reply = raw.request("hello", {"client": "old-bridge", "protocol": 99})
    assert reply["error"]["code"] == p.PROTOCOL_MISMATCH
    assert reply["error"]["message"] == "protocol mismatch: client speaks 99, daemon speaks 1"
    assert reply["error"]["data"]["hint"] == "restart the daemon: `ragd stop && ragd start`"
    assert raw.request("status", rid=2)["error"]["message"] == "call hello first"


def test_clients_raise_protocol_mismatch(server, monkeypatch: pytest.MonkeyPatch) -> None:
    from ragd.daemon.errors import ProtocolMismatch

    for module in (client_module, async_client_module):
        monkeypatch.setattr(module, "_hello_params",
                            lambda name: {"client": name, "protocol": 99})
    with pytest.raises(ProtocolMismatch) as caught:
        Client(server.address)
    assert caught.value.hint == p.RESTART_HINT
    with pytest.raises(ProtocolMismatch):
        asyncio.run(AsyncClient.connect(server.address))


def test_hello_without_required_fields_is_invalid_params(raw) -> None:
    reply = raw.request("hello", {"protocol": 1})
    assert reply["error"]["code"] == p.INVALID_PARAMS
    assert reply["error"]["data"]["param"] == "client"


def test_calls_before_hello_are_refused(raw) -> None:
    reply = raw.request("status", rid=3)
    assert reply == {"jsonrpc": "2.0", "id": 3,
                     "error": {"code": p.INVALID_REQUEST, "message": "call hello first"}}
    raw.hello()
    assert "result" in raw.request("status", rid=4)


def test_pipelined_hello_and_call_are_both_answered(raw) -> None:
    raw.send(_frame("h", "hello", {"client": "fast", "protocol": 1}) + _frame(2, "status", {}))
    assert "result" in raw.recv_id("h")
    assert "result" in raw.recv_id(2)


# -- concurrency -----------------------------------------------------------------------------


def test_twenty_clients_are_served_while_a_slow_request_runs(server, dispatcher) -> None:
    slow_result: dict = {}
    slow_client = Client(server.address)
    slow = threading.Thread(target=lambda: slow_result.update(r=slow_client.call("pause")))
    slow.start()
    assert dispatcher.slow_started.wait(WAIT)

    def one(i: int) -> dict:
        with Client(server.address, timeout=WAIT) as client:
            return client.call("status", {"i": i})

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(one, range(20), timeout=WAIT))
    assert [r["echo"]["i"] for r in results] == list(range(20))
    assert slow.is_alive()  # still blocked: nobody waited behind it

    server.open_gate()
    slow.join(WAIT)
    assert slow_result["r"] == {"slow": True}
    slow_client.close()


def test_a_slow_request_does_not_hold_up_its_own_connection(server, dispatcher) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(server.address) as client:
            slow = asyncio.ensure_future(client.call("pause"))
            assert await asyncio.to_thread(dispatcher.slow_started.wait, WAIT)
            assert (await client.call("status", {"a": 1}))["echo"] == {"a": 1}
            assert not slow.done()
            server.open_gate()
            assert await asyncio.wait_for(slow, WAIT) == {"slow": True}

    asyncio.run(main())


# -- robustness ------------------------------------------------------------------------------

GARBAGE = {
    "random bytes": (random.Random(7).randbytes(8192) + b"\n", None),
    "invalid utf-8": (b'{"jsonrpc":"2.0","id":1,"method":"st\xff\xfeatus"}\n', p.PARSE_ERROR),
    "malformed json": (b'{"jsonrpc": "2.0", "id": 1, "method":\n', p.PARSE_ERROR),
    "nul bytes": (b"\x00\x00\x00\n", p.PARSE_ERROR),
    "NaN": (b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"x":NaN}}\n', p.PARSE_ERROR),
    "deep nesting": (b"[" * 60_000 + b"\n", p.PARSE_ERROR),
    "huge integer": (b'{"jsonrpc":"2.0","method":"status","id":' + b"9" * 5000 + b"}\n",
                     p.PARSE_ERROR),
    "a number": (b"42\n", p.INVALID_REQUEST),
    "a string": (b'"status"\n', p.INVALID_REQUEST),
    "null": (b"null\n", p.INVALID_REQUEST),
    "batch": (b'[{"jsonrpc":"2.0","id":1,"method":"status"}]\n', p.INVALID_REQUEST),
    "empty batch": (b"[]\n", p.INVALID_REQUEST),
    "missing method": (b'{"jsonrpc":"2.0","id":1}\n', p.INVALID_REQUEST),
    "numeric method": (b'{"jsonrpc":"2.0","id":1,"method":5}\n', p.INVALID_REQUEST),
    "object id": (b'{"jsonrpc":"2.0","id":{},"method":"status"}\n', p.INVALID_REQUEST),
    "no jsonrpc member": (b'{"id":1,"method":"status"}\n', p.INVALID_REQUEST),
    "params a string": (b'{"jsonrpc":"2.0","id":1,"method":"status","params":"x"}\n',
                        p.INVALID_REQUEST),
    "params an array": (b'{"jsonrpc":"2.0","id":1,"method":"status","params":[1]}\n',
                        p.INVALID_PARAMS),
    "unknown method": (b'{"jsonrpc":"2.0","id":1,"method":"drop_everything"}\n',
                       p.METHOD_NOT_FOUND),
    "wrong param type": (b'{"jsonrpc":"2.0","id":1,"method":"search","params":{"query":3}}\n',
                         p.INVALID_PARAMS),
}


@pytest.mark.parametrize("case", list(GARBAGE))
def test_garbage_gets_an_error_and_harms_nobody(server, connect_raw, case: str) -> None:
    payload, code = GARBAGE[case]
    with Client(server.address) as bystander:
        bad = connect_raw()
        bad.hello()
        bad.send(payload)
        if code is not None:
            reply = bad.recv()
            assert reply["error"]["code"] == code, reply
            assert "result" not in reply
        # The same connection keeps working, and so does everyone else's.
        assert bad.request("status", {"after": case}, rid="after")["result"]["echo"] == {
            "after": case}
        assert bystander.call("status", {"case": case})["echo"] == {"case": case}


def test_client_notifications_get_no_reply(raw, dispatcher, wait_until) -> None:
    raw.hello()
    raw.send(p.encode(p.request(None, "status", {"n": 1}))
             + p.encode(p.request(None, "skipped"))  # raises inside: still silent
             + p.encode(p.request(None, "no_such_method")))
    wait_until(lambda: dispatcher.calls >= 2, what="the notifications to run")
    raw.send(_frame(2, "status", {"n": 2}))
    assert raw.recv()["id"] == 2  # the very next frame


def test_a_100_mb_line_is_refused_without_being_buffered(server, connect_raw) -> None:
    limit = server.server.max_frame_bytes
    with Client(server.address) as bystander:
        big = connect_raw()
        big.hello()
        peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        chunk = b"x" * (1 << 20)  # the same 1 MiB sent 100 times
        big.send(b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"pad":"')
        for i in range(100):
            big.send(chunk)
            if i == 50:
                assert bystander.call("status", {"mid": True})["echo"] == {"mid": True}
        big.send(b'"}}\n')
        reply = big.recv()
        assert reply["id"] is None
        assert reply["error"]["code"] == p.FRAME_TOO_LARGE
        assert reply["error"]["message"] == f"frame too large (limit {limit} bytes)"
        assert big.request("status", {"after": 1}, rid=2)["result"]["echo"] == {"after": 1}
        assert bystander.call("status", {"end": 1})["echo"] == {"end": 1}
    growth_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before
    assert growth_kib < 32 * 1024, f"peak memory grew by {growth_kib} KiB"


def test_half_a_frame_then_hang_up(server, connect_raw, wait_until) -> None:
    with Client(server.address) as bystander:
        before = server.connection_count()
        half = connect_raw()
        half.hello()
        assert server.connection_count() == before + 1
        half.send(b'{"jsonrpc":"2.0","id":5,"method":"sta')
        half.close()
        wait_until(lambda: server.connection_count() == before, what="the connection to close")
        assert bystander.call("status", {"ok": 1})["echo"] == {"ok": 1}


def test_clients_hanging_up_mid_response(server, dispatcher, connect_raw, wait_until) -> None:
    with Client(server.address) as bystander:
        before = server.connection_count()
        for _ in range(3):  # an 8 MB reply, of which the client reads 1 KB and resets
            conn = connect_raw()
            conn.hello()
            conn.send(_frame(9, "index", {"path": str(8 << 20)}))
            assert conn.sock.recv(1024)
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
        # and one that leaves before its slow answer exists
        conn = connect_raw()
        conn.hello()
        conn.send(_frame(10, "pause"))
        assert dispatcher.slow_started.wait(WAIT)
        conn.close()
        wait_until(lambda: server.connection_count() == before, what="connections to close")
        server.open_gate()
        assert bystander.call("status", {"ok": 1})["echo"] == {"ok": 1}
    with Client(server.address) as newcomer:
        assert newcomer.call("status", {"new": 1})["echo"] == {"new": 1}


def test_a_flood_of_pipelined_requests_is_answered(server, raw) -> None:
    raw.hello()
    raw.send(b"".join(_frame(i, "status", {"i": i}) for i in range(500)))
    ids = {raw.recv()["id"] for _ in range(500)}
    assert ids == set(range(500))


# -- errors from dispatch --------------------------------------------------------------------


def test_dispatch_errors_reach_the_client_as_the_same_kind(server, caplog) -> None:
    caplog.set_level(logging.INFO, logger="ragd.daemon.ipc.server")
    with Client(server.address) as client:
        with pytest.raises(InvalidArgument) as invalid:
            client.call("list_collections")
        assert (invalid.value.param, invalid.value.hint) == ("collection", "list them first")
        with pytest.raises(NotFound):
            client.call("collection_info", {"collection": "nope"})
        with pytest.raises(p.InvalidParams) as params:
            client.call("search", {"query": "q", "top_k": "ten"})
        assert params.value.param == "top_k"
        with pytest.raises(p.MethodNotFound):
            client.call("resume")
        with pytest.raises(p.MethodNotFound):
            client.call("no_such_method")
        with pytest.raises(RagdError) as internal:
            client.call("skipped")
        with pytest.raises(RagdError) as unencodable:
            client.call("shutdown")
        assert client.call("status", {"still": "here"})["echo"] == {"still": "here"}
    for exc in (internal.value, unencodable.value):
        assert exc.code == "internal"
        assert "reference" in exc.message
    assert "boom" not in str(internal.value) and "secret" not in str(internal.value)
    reference = internal.value.message.split("reference ")[1].rstrip(")")
    logged = [r for r in caplog.records if reference in r.getMessage()]
    assert logged and logged[0].exc_info is not None  # the traceback went to the log only


# -- the socket ------------------------------------------------------------------------------


def test_socket_is_private(server, paths: Paths) -> None:
    info = os.stat(server.address)
    assert stat.S_ISSOCK(info.st_mode)
    assert stat.S_IMODE(info.st_mode) == 0o600
    assert stat.S_IMODE(os.stat(paths.runtime_dir).st_mode) == 0o700
    assert server.address == paths.socket_path


def test_a_stale_socket_file_is_replaced(make_server, paths: Paths) -> None:
    paths.ensure()
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(paths.socket_path)  # what a killed daemon leaves behind: a file nobody answers
    dead.close()
    server = make_server()
    with Client(server.address) as client:
        assert client.call("status", {"a": 1})["echo"] == {"a": 1}


def test_close_disconnects_everyone_and_removes_the_socket(make_server, dispatcher) -> None:
    server = make_server()
    address = server.address
    idle = Client(address)
    outcome: dict = {}

    def slow_call() -> None:
        with Client(address) as client:
            try:
                client.call("pause")
            except RagdError as exc:
                outcome["error"] = exc

    waiting = threading.Thread(target=slow_call)
    waiting.start()
    assert dispatcher.slow_started.wait(WAIT)
    server.stop()
    waiting.join(WAIT)
    assert isinstance(outcome["error"], DaemonUnavailable)  # cancelled, not left hanging
    assert not os.path.exists(address)
    with pytest.raises(DaemonUnavailable):
        idle.call("status")
    with pytest.raises(DaemonUnavailable) as caught:
        Client(address)
    assert "ragd start" in caught.value.hint


def test_a_live_socket_is_never_stolen(server) -> None:
    second = IpcServer(_no_dispatch, max_frame_bytes=4096, version="x")
    with pytest.raises(AlreadyRunning):
        asyncio.run(second.start_unix(server.address))
    with Client(server.address) as client:
        assert client.call("status", {"a": 1})["echo"] == {"a": 1}


def test_a_regular_file_at_the_socket_path_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "ragd.sock"
    path.write_text("not a socket", encoding="utf-8")
    server = IpcServer(_no_dispatch, max_frame_bytes=4096, version="x")
    with pytest.raises(ConfigError):
        asyncio.run(server.start_unix(str(path)))
    assert path.read_text(encoding="utf-8") == "not a socket"


# -- Windows named pipes (what can be checked here) ------------------------------------------


@pytest.mark.parametrize("name", [r"\\.\pipe\ragd-ann-1a2b3c4d", r"\\.\PIPE\x"])
def test_valid_pipe_names(name: str) -> None:
    assert validate_pipe_name(name) == name


@pytest.mark.parametrize("name", [
    "ragd", r"\\.\pipe" + "\\", r"\\.\pipe\a\b", r"\\server\pipe\x", "/tmp/ragd.sock",
    "\\\\.\\pipe\\" + "a" * 300, "\\\\.\\pipe\\a\0b",
])
def test_invalid_pipe_names(name: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        validate_pipe_name(name)
    assert caught.value.param == "pipe"


@pytest.mark.skipif(sys.platform == "win32", reason="checks the refusal off Windows")
def test_start_pipe_is_refused_off_windows() -> None:
    server = IpcServer(_no_dispatch, max_frame_bytes=4096, version="x")
    with pytest.raises(ConfigError, match="only on Windows"):
        asyncio.run(server.start_pipe(r"\\.\pipe\ragd-test"))


def test_start_picks_the_transport_from_paths(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, str]] = []
    server = IpcServer(_no_dispatch, max_frame_bytes=4096, version="x")

    async def fake_pipe(name: str) -> None:
        calls.append(("pipe", name))

    async def fake_unix(path: str) -> None:
        calls.append(("unix", path))

    monkeypatch.setattr(server, "start_pipe", fake_pipe)
    monkeypatch.setattr(server, "start_unix", fake_unix)

    def paths_for(platform: str) -> Paths:
        root = tmp_path / platform
        return Paths(root / "c", root / "d", root / "s", root / "r", platform=platform,
                     user="Ann Lee")

    windows, linux = paths_for("win32"), paths_for("linux")
    # The pipe's name has a random part, new at each start (decision 0032).
    pipe = asyncio.run(server.start(windows))
    assert pipe.startswith(windows.socket_path + "-")
    assert asyncio.run(server.start(linux)) == linux.socket_path
    assert calls == [("pipe", pipe), ("unix", linux.socket_path)]
    assert validate_pipe_name(windows.socket_path).startswith("\\\\.\\pipe\\ragd-Ann_Lee-")
