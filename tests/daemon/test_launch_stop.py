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
