"""The thin clients: what they import, how they fail, events, timeouts and threads."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ragd.daemon.errors import DaemonUnavailable, InvalidArgument
from ragd.daemon.ipc.address import is_pipe_address
from ragd.daemon.ipc.async_client import AsyncClient
from ragd.daemon.ipc.client import Client

WAIT = 10.0
HEAVY = ("torch", "faiss", "whoosh", "sentence_transformers", "numpy", "mcp")


def _modules_after_import(module: str) -> set[str]:
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=60, env={**os.environ, "PYTHONWARNINGS": ""})
    return set(json.loads(out.stdout))


def test_importing_the_client_loads_nothing_heavy() -> None:
    loaded = _modules_after_import("ragd.daemon.ipc.client")
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY)
    assert heavy == []
    # Lighter still: validation models and asyncio are loaded only when used.
    assert "pydantic" not in loaded
    assert "asyncio" not in loaded
    loaded = _modules_after_import("ragd.daemon.ipc.async_client")
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
    assert "pydantic" not in loaded


def test_no_daemon_gives_daemon_unavailable_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnavailable) as caught:
        Client(str(tmp_path / "nothing.sock"))
    assert "ragd start" in caught.value.hint
    with pytest.raises(DaemonUnavailable):
        asyncio.run(AsyncClient.connect(str(tmp_path / "nothing.sock")))


def test_a_dead_socket_file_gives_daemon_unavailable(tmp_path: Path) -> None:
    import socket

    path = str(tmp_path / "dead.sock")
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(path)
    dead.close()
    with pytest.raises(DaemonUnavailable, match="no ragd daemon is listening"):
        Client(path)


def test_pipe_addresses_are_recognised() -> None:
    assert is_pipe_address(r"\\.\pipe\ragd-ann-12345678")
    assert not is_pipe_address("/run/user/1000/ragd/ragd.sock")
    if sys.platform != "win32":
        with pytest.raises(DaemonUnavailable):
            Client(r"\\.\pipe\ragd-nobody")


def test_a_timed_out_call_leaves_the_connection_usable(server) -> None:
    with Client(server.address) as client:
        with pytest.raises(DaemonUnavailable, match="did not answer pause"):
            client.call("pause", timeout=0.2)
        server.open_gate()
        # The late reply to pause arrives first and is dropped by its id.
        assert client.call("status", {"k": 1})["echo"] == {"k": 1}


def test_async_call_timeout(server) -> None:
    async def main() -> None:
        async with await AsyncClient.connect(server.address) as client:
            with pytest.raises(DaemonUnavailable, match="did not answer pause"):
                await client.call("pause", timeout=0.2)
            server.open_gate()
            assert (await client.call("status", {"k": 2}))["echo"] == {"k": 2}

    asyncio.run(main())


def test_sync_client_is_safe_to_share_between_threads(server) -> None:
    with Client(server.address) as client:
        def many(worker: int) -> bool:
            return all(client.call("status", {"w": worker, "i": i})["echo"] == {"w": worker,
                                                                                  "i": i}
                       for i in range(50))

        with ThreadPoolExecutor(8) as pool:
            assert all(pool.map(many, range(8), timeout=WAIT))


def test_requests_over_the_daemons_frame_limit_are_refused_locally(server) -> None:
    limit = server.server.max_frame_bytes
    with Client(server.address) as client:
        assert client.server_info["max_frame_bytes"] == limit
        with pytest.raises(InvalidArgument, match="over the daemon's limit"):
            client.call("status", {"pad": "x" * limit})
        assert client.call("status", {"a": 1})["echo"] == {"a": 1}


def test_sync_subscriber_receives_notifications(server, dispatcher, wait_until) -> None:
    with Client(server.address) as client:
        events = client.subscribe()
        assert server.notify_all("progress", {"n": 1}, times=1) == [True]
        server.notify_all("progress", {"n": 2})
        assert next(events) == {"n": 1}
        assert next(events) == {"n": 2}
        # Calls still work on a subscribed client; events in between are kept.
        server.notify_all("progress", {"n": 3})
        assert client.call("status", {"c": 1})["echo"] == {"c": 1}
        assert next(events) == {"n": 3}
    wait_until(lambda: dispatcher.subscribers == [], what="on_close to unsubscribe")


def test_sync_subscription_ends_when_the_daemon_goes(make_server) -> None:
    server = make_server()
    client = Client(server.address)
    events = client.subscribe()
    server.notify_all("progress", {"n": 1})
    server.stop()
    assert list(events) == [{"n": 1}]


def test_async_subscriber_receives_notifications_until_close(make_server) -> None:
    server = make_server()

    async def main() -> list[dict]:
        client = await AsyncClient.connect(server.address)
        assert await client.subscribe() == {"subscribed": True}
        await asyncio.to_thread(server.notify_all, "progress", {"n": 0}, 3)
        got = []
        async for event in client.events():
            got.append(event)
            if len(got) == 3:
                await asyncio.to_thread(server.stop)
        # The iterator ended because the daemon closed the connection.
        with pytest.raises(DaemonUnavailable):
            await client.call("status")
        await client.close()
        return got

    assert asyncio.run(main()) == [{"n": 0}] * 3


def test_a_slow_subscriber_loses_events_not_daemon_memory(server, dispatcher, connect_raw,
                                                          wait_until) -> None:
    server.server.notify_buffer_bytes = 64 * 1024
    with Client(server.address) as bystander:
        sub = connect_raw()
        sub.hello()
        assert sub.request("subscribe", {}, rid="s")["result"] == {"subscribed": True}
        # 20 MB of events that nobody reads: far more than the socket buffers hold.
        sent = server.notify_all("progress", {"blob": "y" * 10_000}, times=2000)
        assert sent[0] and not all(sent)
        conn = dispatcher.subscribers[0]
        assert conn.dropped_notifications == sent.count(False)

        async def buffered() -> int:
            return conn._writer.transport.get_write_buffer_size()

        assert server.run(buffered()) <= 64 * 1024 + 10_100
        assert bystander.call("status", {"ok": 1})["echo"] == {"ok": 1}
        # The subscriber is still connected: it reads what was kept, then gets answers.
        assert sub.request("status", {"late": 1}, rid="late")["result"]["echo"] == {"late": 1}

