"""`ragd stop`'s last resort (decision 0024): a daemon that acknowledges the request but never
goes (wedged in native code, deaf to SIGTERM) is killed at the deadline, so the command
still returns in time; with none running, it says so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from daemon_proc import wait_for

from ragd.daemon.ipc.discovery import find_daemon, read_status
from ragd.daemon.runtime.launch import stop_daemon
from ragd.daemon.settings.paths import resolve_paths

REPO = Path(__file__).resolve().parents[2]

# A stand-in daemon: answers hello and shutdown on the real IPC server, then never stops.
WEDGED = """
import asyncio, os, signal
from ragd.daemon.ipc import discovery
from ragd.daemon.ipc.protocol import PROTOCOL_VERSION
from ragd.daemon.ipc.server import IpcServer
from ragd.daemon.settings.paths import resolve_paths

async def dispatch(method, params, conn):
    return {"stopping": True}

async def main():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    paths = resolve_paths()
    server = IpcServer(dispatch, version="0-wedged", max_frame_bytes=1 << 20)
    address = await server.start(paths)
    discovery.write_status(paths, pid=os.getpid(), socket=address, version="0-wedged",
                           protocol=PROTOCOL_VERSION, started_at=0.0)
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_with_no_daemon_stop_says_so() -> None:
    assert stop_daemon(resolve_paths()) == (None, "not running")


@pytest.mark.skipif(os.name != "posix", reason="a POSIX socket and signals")
def test_a_daemon_that_never_goes_is_killed_at_the_deadline(ragd_home: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", WEDGED], env=env, stdout=subprocess.PIPE,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"ready"
        paths = resolve_paths()
        wait_for(lambda: find_daemon(paths), 10, "the stand-in daemon")
        t0 = time.monotonic()
        pid, how = stop_daemon(paths, timeout=1.0)
        took = time.monotonic() - t0
        assert (pid, how) == (proc.pid, "killed") and took < 2.0
        assert proc.wait(timeout=5) == -9
        assert read_status(paths) is None  # no stale status file left to find
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_start_that_fails_is_told_in_the_daemons_words_and_a_lost_race_is_not(
        ragd_home: Path) -> None:
    from ragd.daemon.errors import DaemonStartFailed
    from ragd.daemon.runtime.launch import (
        EXIT_ALREADY_RUNNING,
        connect,
        start_errors,
        start_failure,
    )

    paths = resolve_paths()
    config = paths.config_dir / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("[search]\nrrf_k = 0\n", encoding="utf-8")
    t0 = time.monotonic()
    with pytest.raises(DaemonStartFailed) as failed:
        connect(paths, start=True)
    assert time.monotonic() - t0 < 5  # no grace for another client's daemon: it said why
    assert "exited at start-up" in failed.value.message and "search.rrf_k" in failed.value.message
    assert "fix search.rrf_k" in failed.value.hint
    # Another daemon holding the home is a lost race, not a failure; silence says nothing.
    start_errors(paths).write_text("error: a ragd daemon is already running\n", encoding="utf-8")
    assert start_failure(paths, EXIT_ALREADY_RUNNING) is None
    assert start_failure(paths, 0) is None
    start_errors(paths).write_text("Traceback (most recent call last):\n", encoding="utf-8")
    assert start_failure(paths, 1) is None
    start_errors(paths).unlink()
    assert start_failure(paths, 1) is None


def test_the_daemon_exits_with_its_own_code_when_another_holds_the_home(ragd_home: Path
                                                                        ) -> None:
    from ragd.daemon.ipc.discovery import acquire_instance_lock
    from ragd.daemon.runtime.launch import EXIT_ALREADY_RUNNING

    lock = acquire_instance_lock(resolve_paths())
    try:
        proc = subprocess.run([sys.executable, "-m", "ragd.daemon.cli.main", "daemon"],
                              capture_output=True, text=True, timeout=60)
    finally:
        lock.release()
    assert proc.returncode == EXIT_ALREADY_RUNNING and "already running" in proc.stderr
