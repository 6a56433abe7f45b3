"""Requests that wait for the writer never take the threads status and searches need, and
past a few of them the next one is answered `busy` with a retry hint (decision 0043). A real
daemon on a temp socket; its writer held by a pause."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_proc import DaemonProc, wait_for
from vault_fixtures import write_vault

from ragd.daemon.errors import RagdError, WriterBusy
from ragd.daemon.ipc.discovery import find_daemon
from ragd.daemon.runtime.writer_waits import BUSY_AFTER_S, RETRY_AFTER_S, WRITE_WAITERS
from ragd.daemon.settings.paths import resolve_paths

pytestmark = pytest.mark.slow

WRITES = 10  # concurrent requests that wait for the writer: more than its places
ANSWER_S = 2.0  # what status and a search may take meanwhile


@pytest.fixture
def daemon(ragd_home: Path, tmp_path: Path) -> Iterator[DaemonProc]:
    d = DaemonProc(ragd_home, write_vault(tmp_path / "vault"), tmp_path / "daemon.log").start()
    try:
        d.wait_idle()
        yield d
    finally:
        d.stop()


def waits(d: DaemonProc) -> dict[str, int]:
    return dict(d.call("status", timeout=10)["writer_waits"])


def timed(d: DaemonProc, method: str, params: dict[str, Any] | None = None) -> float:
    t0 = time.monotonic()
    d.call(method, params, timeout=10)
    return time.monotonic() - t0


def hung_up_write(home: Path) -> socket.socket:
    """A client that asks for an index with wait=true over a raw socket (close it to hang up)."""
    address = find_daemon(resolve_paths({"RAGD_HOME": str(home)}))
    assert address
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(address)
    frames = [{"jsonrpc": "2.0", "id": 1, "method": "hello",
               "params": {"client": "test", "protocol": 1}},
              {"jsonrpc": "2.0", "id": 2, "method": "index",
               "params": {"collection": "obsidian", "wait": True}}]
    sock.sendall(b"".join(json.dumps(f).encode() + b"\n" for f in frames))
    return sock


def test_waiting_writes_leave_status_and_search_alone_and_the_rest_are_busy(
        daemon: DaemonProc, ragd_home: Path) -> None:
    daemon.call("pause")  # the writer takes nothing: every index with wait=true waits
    outcomes: dict[int, Any] = {}

    def write(n: int) -> None:
        try:
            outcomes[n] = daemon.call("index", {"collection": "obsidian", "wait": True},
                                      timeout=120)
        except RagdError as exc:
            outcomes[n] = exc

    threads = [threading.Thread(target=write, args=(n,)) for n in range(WRITES)]
    for t in threads:
        t.start()
    wait_for(lambda: waits(daemon)["waiting"] == WRITE_WAITERS, 10, "the writes to wait")
    # Status and searches answer at once while the writes wait (they used to queue behind
    # them for a thread: `ragd status` timed out).
    assert timed(daemon, "status") < ANSWER_S
    assert timed(daemon, "status", {"brief": True}) < ANSWER_S
    assert timed(daemon, "search", {"query": "telescope", "top_k": 3}) < ANSWER_S
    # The writes past the places are told to come back, and nothing was done for them.
    busy = wait_for(lambda: [o for o in outcomes.values() if isinstance(o, RagdError)]
                    if len(outcomes) >= WRITES - WRITE_WAITERS else [],
                    BUSY_AFTER_S + 10, "the busy answers")
    assert len(busy) == WRITES - WRITE_WAITERS
    for exc in busy:
        assert isinstance(exc, WriterBusy) and exc.code == "busy", exc
        assert exc.retry_after_s == RETRY_AFTER_S
        assert "busy" in exc.message and "try again in 5 seconds" in exc.hint, exc
        assert "ragd resume" in exc.hint  # it is paused: the hint says how to go on
    assert waits(daemon) == {"waiting": WRITE_WAITERS, "places": WRITE_WAITERS,
                             "refused": WRITES - WRITE_WAITERS}
    assert timed(daemon, "search", {"query": "telescope", "top_k": 3}) < ANSWER_S
    daemon.call("resume")
    for t in threads:
        t.join(120)
    done = [o for o in outcomes.values() if isinstance(o, dict)]
    assert len(done) == WRITE_WAITERS and all(o["collection"] == "obsidian" for o in done)
    assert waits(daemon)["waiting"] == 0


def test_a_client_that_hangs_up_gives_its_place_back(daemon: DaemonProc,
                                                     ragd_home: Path) -> None:
    daemon.call("pause")
    socks = [hung_up_write(ragd_home) for _ in range(WRITE_WAITERS)]
    try:
        wait_for(lambda: waits(daemon)["waiting"] == WRITE_WAITERS, 10, "the writes to wait")
        for sock in socks[:2]:
            sock.close()
        wait_for(lambda: waits(daemon)["waiting"] == WRITE_WAITERS - 2, 5,
                 "the places of the clients that hung up")
        # Two more fit now, and nobody is refused.
        more = [hung_up_write(ragd_home) for _ in range(2)]
        socks += more
        wait_for(lambda: waits(daemon)["waiting"] == WRITE_WAITERS, 10, "the new writes")
        assert waits(daemon)["refused"] == 0
    finally:
        for sock in socks:
            sock.close()
        daemon.call("resume")
    # The job the clients asked for stayed queued and ran.
    daemon.wait_idle(60)
