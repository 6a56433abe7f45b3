"""A real IpcServer on a temp socket, run on its own event loop in a background thread.

The dispatcher here is a small stand-in for the daemon's (echo, a gated slow call, errors,
subscriptions): these are unit tests of the transport, not of the daemon's methods.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from ragd.daemon.errors import InvalidArgument, NotFound
from ragd.daemon.ipc import protocol as p
from ragd.daemon.ipc.server import Connection, IpcServer
from ragd.daemon.settings.paths import Paths, resolve_paths

MAX_FRAME = 64 * 1024
WAIT = 10.0  # the deadline for anything a test waits on


class Dispatcher:
    """status echoes; pause blocks until the test opens the gate; others raise or subscribe."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.slow_started = threading.Event()
        self.subscribers: list[Connection] = []
        self.calls = 0

    async def __call__(self, method: str, params: dict[str, Any], conn: Connection) -> Any:
        self.calls += 1
        if method == "status":
            return {"echo": params, "conn": conn.id}
        if method == "search":
            return {"query": params["query"], "top_k": params["top_k"], "tags": params["tags"]}
        if method == "pause":
            self.slow_started.set()
            await self.gate.wait()
            return {"slow": True}
        if method == "index":  # a large reply, to hang up in the middle of
            return {"blob": "x" * (int(params["path"] or "0"))}
        if method == "list_collections":
            raise InvalidArgument("collection", "no such collection", "list them first")
        if method == "collection_info":
            raise NotFound(f"no collection {params['collection']!r}", "see list_collections")
        if method == "skipped":
            raise ValueError("boom: /secret/path")
        if method == "shutdown":
            return {"not json": object()}
        if method == "resume":
            raise p.MethodNotFound("resume is not implemented by this daemon")
        if method == "subscribe":
            self.subscribers.append(conn)
            conn.on_close.append(self.subscribers.remove)
            return {"subscribed": True}
        raise AssertionError(f"unexpected method {method}")


class ServerThread:
    """Runs the server's loop in a thread; ``run`` executes a coroutine there."""

    def __init__(self, dispatcher: Dispatcher, paths: Paths, **options: Any) -> None:
        self.dispatcher = dispatcher
        self.paths = paths
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        options.setdefault("max_frame_bytes", MAX_FRAME)
        self.server = IpcServer(dispatcher, version="9.9.9-test", **options)
        self.address: str = self.run(self.server.start(paths))

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = WAIT) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def call_soon(self, fn: Callable[[], Any]) -> None:
        self.loop.call_soon_threadsafe(fn)

    def open_gate(self) -> None:
        if not self.loop.is_closed():
            self.call_soon(self.dispatcher.gate.set)

    def connection_count(self) -> int:
        async def count() -> int:
            return len(self.server.connections)

        return self.run(count())

    def notify_all(self, method: str, params: dict[str, Any], times: int = 1) -> list[bool]:
        """Send ``times`` events to every subscriber; whether each was sent or dropped."""
        async def send() -> list[bool]:
            return [await c.notify(method, params)
                    for _ in range(times) for c in list(self.dispatcher.subscribers)]

        return self.run(send())

    def stop(self) -> None:
        if self.loop.is_closed():
            return
        try:
            self.run(self.server.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(WAIT)
            self.loop.close()


def wait_until(condition: Callable[[], bool], timeout: float = WAIT, what: str = "") -> None:
    """Poll ``condition`` until it holds or the deadline passes."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or condition}")
        time.sleep(0.005)


class RawConnection:
    """A bare socket speaking (or not) the protocol, for the malformed-input tests."""

    def __init__(self, address: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT)
        self.sock.connect(address)
        self.buffer = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> dict[str, Any]:
        while b"\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("server closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def request(self, method: str, params: Any = None, rid: Any = 1) -> dict[str, Any]:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(json.dumps(msg).encode() + b"\n")
        return self.recv_id(rid)

    def recv_id(self, rid: Any) -> dict[str, Any]:
        """The reply with this id, skipping others (earlier garbage gets null-id errors)."""
        while True:
            msg = self.recv()
            if msg.get("id") == rid:
                return msg

    def hello(self) -> dict[str, Any]:
        reply = self.request("hello", {"client": "raw-test", "protocol": p.PROTOCOL_VERSION},
                             rid="hello")
        assert "result" in reply, reply
        return reply["result"]

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def dispatcher() -> Dispatcher:
    return Dispatcher()


@pytest.fixture
def paths() -> Paths:
    return resolve_paths()


@pytest.fixture
def make_server(dispatcher: Dispatcher, paths: Paths) -> Iterator[Callable[..., ServerThread]]:
    """Starts servers (options go to IpcServer); each is stopped at the end if still running."""
    started: list[ServerThread] = []

    def make(**options: Any) -> ServerThread:
        started.append(ServerThread(dispatcher, paths, **options))
        return started[-1]

    yield make
    for st in started:
        st.open_gate()
        st.stop()


@pytest.fixture
def server(make_server: Callable[..., ServerThread]) -> ServerThread:
    return make_server()


@pytest.fixture
def raw(server: ServerThread) -> Iterator[RawConnection]:
    conn = RawConnection(server.address)
    yield conn
    conn.close()


@pytest.fixture
def connect_raw(server: ServerThread) -> Iterator[Callable[[], RawConnection]]:
    """Opens more raw connections to the server; all closed at the end."""
    opened: list[RawConnection] = []

    def connect() -> RawConnection:
        opened.append(RawConnection(server.address))
        return opened[-1]

    yield connect
    for conn in opened:
        conn.close()


@pytest.fixture(name="wait_until")
def wait_until_fixture() -> Callable[..., None]:
    """``wait_until(condition, what=...)``: poll with a deadline, never a bare sleep."""
    return wait_until
