"""What the CLI says about a starting daemon, and the foreground daemon's ready line."""

from __future__ import annotations

from typing import Any

import pytest

from ragd.daemon.cli.remote import (
    STARTING_CALL_TIMEOUT_S,
    call_when_ready,
    format_status,
    ready_line,
    starting_notice,
)


def test_starting_notice_names_the_phase_and_the_seconds() -> None:
    st = {"state": "starting", "phase": "loading model", "starting_s": 3.4}
    assert starting_notice(st) == "ragd: the daemon is starting (loading the model, 3 s so far)..."
    assert starting_notice({"state": "starting", "phase": "opening index", "starting_s": 0.2}) \
        == "ragd: the daemon is starting (opening the index, 0 s so far)..."
    # An older daemon sends neither field.
    assert starting_notice({"state": "starting"}) == "ragd: the daemon is starting (starting)..."
    for state in ("idle", "indexing", "paused", "error"):
        assert starting_notice({"state": state, "phase": "catching up"}) is None


class FakeClient:
    """Stands in for ragd.daemon.ipc.client.Client: records calls, answers status as told."""

    timeout = 60.0

    def __init__(self, state: str) -> None:
        self.state = state
        self.calls: list[tuple[str, Any, Any]] = []

    def call(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        self.calls.append((method, params, timeout))
        if method == "status":
            return {"state": self.state, "phase": "loading model", "starting_s": 2.0}
        return {"results": []}


def test_a_request_that_waits_says_so_once(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient("starting")
    assert call_when_ready(client, "search", {"query": "x"}) == {"results": []}  # type: ignore[arg-type]
    assert capsys.readouterr().err == \
        "ragd: the daemon is starting (loading the model, 2 s so far)...\n"
    assert client.calls[0] == ("status", {"brief": True}, None)
    assert client.calls[1] == ("search", {"query": "x"}, STARTING_CALL_TIMEOUT_S)


def test_a_request_that_does_not_wait_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient("indexing")
    call_when_ready(client, "search", {"query": "x"}, timeout=5)  # type: ignore[arg-type]
    assert capsys.readouterr() == ("", "")
    assert client.calls[1] == ("search", {"query": "x"}, 5)


def test_ready_line() -> None:
    line = ready_line({"version": "0.1.0", "pid": 42, "socket": "/run/user/1/ragd/ragd.sock",
                       "seconds": 1.23, "fatal": None, "phase": None, "log": "/l/ragd.log"})
    assert line == ("ragd 0.1.0 ready in 1.2 s (pid 42), answering on "
                    "/run/user/1/ragd/ragd.sock; stop it with Ctrl-C or `ragd stop`")
    failed = ready_line({"version": "0.1.0", "pid": 42, "socket": "/s", "seconds": 0.5,
                         "fatal": "no model", "phase": "loading model", "log": "/l/ragd.log"})
    assert failed.startswith("ragd 0.1.0 could not start (loading model): no model;")
    assert "ready" not in failed and "/l/ragd.log" in failed and "`ragd stop`" in failed


def test_status_shows_the_start_up_phase() -> None:
    base = {"version": "0.1.0", "pid": 7, "paths": {"log": "/l"}}
    head = format_status({**base, "state": "starting", "phase": "loading model",
                          "starting_s": 4.0}).splitlines()[0]
    assert head == "ragd 0.1.0 (pid 7): starting (loading the model, 4 s so far)"
    head = format_status({**base, "state": "indexing", "phase": "catching up",
                          "indexing": {"active": True, "remaining": 12}}).splitlines()[0]
    assert head == "ragd 0.1.0 (pid 7): indexing (catching up), 12 sources remaining"
    head = format_status({**base, "state": "error", "phase": "opening index"}).splitlines()[0]
    assert head == "ragd 0.1.0 (pid 7): error (while opening the index)"
    assert format_status({**base, "state": "idle", "phase": None}).splitlines()[0] == \
        "ragd 0.1.0 (pid 7): idle"
