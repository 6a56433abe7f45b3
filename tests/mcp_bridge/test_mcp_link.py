"""DaemonLink's pool and recovery, with stand-in clients (no daemon, no sockets)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import wait_for

from ragd.daemon.errors import DaemonUnavailable, InvalidArgument
from ragd.daemon.settings.paths import resolve_paths
from ragd.mcp_bridge import link as link_module
from ragd.mcp_bridge.link import CallTimedOut, DaemonLink


class FakeClient:
    def __init__(self, behaviour: Callable[[FakeClient, str], Any]) -> None:
        self.behaviour = behaviour
        self.closed = False
        self.address = "/tmp/fake.sock"
        self.calls: list[str] = []

    def call(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        self.calls.append(method)
        return self.behaviour(self, method)

    def close(self) -> None:
        self.closed = True


def answers(client: FakeClient, method: str) -> Any:
    return {"method": method}


def dies(client: FakeClient, method: str) -> Any:
    client.closed = True  # what Client does when the daemon goes away
    raise DaemonUnavailable("the daemon closed the connection", "check `ragd status`")


def times_out(client: FakeClient, method: str) -> Any:
    raise DaemonUnavailable(f"the daemon did not answer {method} within 1 s", "busy?")


def rejects(client: FakeClient, method: str) -> Any:
    raise InvalidArgument("top_k", "too big", "smaller")


class Opened(list[FakeClient]):
    """Every client the link opened; each new one behaves as the next item of ``plan`` says."""

    def __init__(self) -> None:
        super().__init__()
        self.plan: list[Callable[[FakeClient, str], Any]] = []


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Opened:
    made = Opened()

    def fake_connect(paths: Any, **kwargs: Any) -> FakeClient:
        assert kwargs["start"] is True  # the bridge always starts a daemon when none answers
        client = FakeClient(made.plan.pop(0) if made.plan else answers)
        made.append(client)
        return client

    monkeypatch.setattr(link_module, "connect", fake_connect)
    return made


def new_link(tmp_path: Path) -> DaemonLink:
    return DaemonLink(resolve_paths({"RAGD_HOME": str(tmp_path)}))


def test_connections_are_reused_after_answers_and_daemon_errors(
        opened: Opened, tmp_path: Path) -> None:
    link = new_link(tmp_path)
    assert link.call("status", {}, 1) == {"method": "status"}
    assert link.call("search", {}, 1) == {"method": "search"}
    assert len(opened) == 1 and opened[0].calls == ["status", "search"]
    opened[0].behaviour = rejects
    with pytest.raises(InvalidArgument):
        link.call("search", {}, 1)
    assert len(opened) == 1 and not opened[0].closed  # a bad argument is no broken line


def test_a_dead_daemon_is_replaced_and_the_call_retried_once(
        opened: Opened, tmp_path: Path) -> None:
    link = new_link(tmp_path)
    link.call("status", {}, 1)
    opened[0].behaviour = dies
    assert link.call("search", {}, 1) == {"method": "search"}
    assert len(opened) == 2 and opened[0].closed and not opened[1].closed

    opened[1].behaviour = dies
    opened.plan.append(dies)
    with pytest.raises(DaemonUnavailable) as caught:
        link.call("search", {}, 1)
    assert "closed the connection" in caught.value.message and len(opened) == 3


def test_a_timeout_is_not_retried_and_its_connection_not_reused(
        opened: Opened, tmp_path: Path) -> None:
    link = new_link(tmp_path)
    link.call("status", {}, 1)
    opened[0].behaviour = times_out
    with pytest.raises(CallTimedOut) as caught:
        link.call("search", {}, 1)
    assert caught.value.method == "search" and opened[0].closed and len(opened) == 1
    link.call("status", {}, 1)
    assert len(opened) == 2


def test_concurrent_calls_get_connections_of_their_own(
        opened: Opened, tmp_path: Path) -> None:
    link = new_link(tmp_path)
    gate, inside = threading.Event(), threading.Event()

    def slow(client: FakeClient, method: str) -> Any:
        inside.set()
        assert gate.wait(10)
        return "indexed"

    opened.plan.append(slow)
    worker = threading.Thread(target=link.call, args=("index", {}, 10))
    worker.start()
    assert inside.wait(10)
    assert link.call("search", {}, 1) == {"method": "search"}  # not stuck behind the index
    gate.set()
    worker.join(10)
    assert len(opened) == 2


def test_close_wakes_calls_in_flight(opened: Opened, tmp_path: Path) -> None:
    link = new_link(tmp_path)
    released = threading.Event()

    def blocks(client: FakeClient, method: str) -> Any:
        released.wait(10)
        if client.closed:
            dies(client, method)
        return "late"

    opened.plan.append(blocks)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            link.call("index", {}, 10)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=run)
    worker.start()
    wait_for(lambda: opened and opened[0].calls, 10, "the call to reach the daemon")
    link.close()
    assert opened[0].closed
    released.set()
    worker.join(10)
    assert len(errors) == 1 and isinstance(errors[0], DaemonUnavailable)
    assert len(opened) == 1  # no reconnect while closing


def test_warm_up_failure_is_logged_and_shared_with_a_waiting_call(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    attempts: list[float] = []
    started, release = threading.Event(), threading.Event()

    def failing_connect(paths: Any, **kwargs: Any) -> Any:
        attempts.append(kwargs["timeout"])
        started.set()
        release.wait(10)
        raise DaemonUnavailable("the ragd daemon exited at start-up (code 1)", "read the log")

    monkeypatch.setattr(link_module, "connect", failing_connect)
    monkeypatch.setattr(link_module, "RACE_WAIT_S", 0.2)
    link = new_link(tmp_path)
    with caplog.at_level(logging.WARNING):
        warm = link.start_warm_up()
        assert started.wait(10)
        errors: list[BaseException] = []
        caller = threading.Thread(target=lambda: errors.append(
            pytest.raises(DaemonUnavailable, link.call, "search", {}, 1).value))
        caller.start()
        release.set()
        warm.join(10)
        caller.join(10)
    assert "exited at start-up" in caplog.text
    assert len(attempts) == 1  # the waiting call got the same answer, not a second start
    assert "exited at start-up" in str(errors[0])
    with pytest.raises(DaemonUnavailable):
        link.call("search", {}, 1)  # a later call tries again
    assert len(attempts) == 2
