"""Finding the daemon through its status file, and refusing a second daemon."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from ragd.daemon.errors import AlreadyRunning
from ragd.daemon.ipc import discovery
from ragd.daemon.ipc.discovery import (
    acquire_instance_lock,
    daemon_alive,
    find_daemon,
    read_status,
    remove_status,
    write_status,
)
from ragd.daemon.settings.paths import Paths, resolve_paths

# A process whose command line says it is ragd (as `ragd daemon` would), and one that does not.
RAGD_LIKE = [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()",
             "ragd-test-daemon"]


@pytest.fixture
def paths() -> Paths:
    return resolve_paths()


@pytest.fixture
def ragd_like() -> Iterator[subprocess.Popen]:
    proc = subprocess.Popen(RAGD_LIKE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"  # exec'd
    yield proc
    proc.kill()
    proc.communicate(timeout=10)  # reaps it and closes the pipes


def _write(paths: Paths, pid: int, address: str = "/nowhere/ragd.sock") -> None:
    write_status(paths, pid=pid, socket=address, version="0.1.0", protocol=1,
                 started_at=1_700_000_000.5)


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(10)  # reaped: the pid no longer exists
    return proc.pid


def test_status_round_trip_private_and_atomic(paths: Paths) -> None:
    _write(paths, 1234, "/run/ragd.sock")
    assert read_status(paths) == {"pid": 1234, "socket": "/run/ragd.sock", "version": "0.1.0",
                                  "protocol": 1, "started_at": 1_700_000_000.5}
    assert stat.S_IMODE(paths.status_file.stat().st_mode) == 0o600
    assert [f.name for f in paths.runtime_dir.iterdir() if f.name.startswith(".daemon-")] == []
    _write(paths, 5678)
    status = read_status(paths)
    assert status is not None and status["pid"] == 5678


@pytest.mark.parametrize("content", ["", "{not json", "[1, 2]", '{"pid": "12"}',
                                     '{"pid": true}', '{"socket": "/x"}'])
def test_unusable_status_files_read_as_none(paths: Paths, content: str) -> None:
    paths.ensure()
    paths.status_file.write_text(content, encoding="utf-8")
    assert read_status(paths) is None
    assert find_daemon(paths) is None


def test_remove_status_only_removes_its_own(paths: Paths) -> None:
    _write(paths, 1234)
    remove_status(paths, pid=999)  # an older daemon shutting down late
    assert read_status(paths) is not None
    remove_status(paths, pid=1234)
    assert read_status(paths) is None
    remove_status(paths)  # missing is fine


def test_live_ragd_process_is_alive(ragd_like: subprocess.Popen) -> None:
    assert daemon_alive({"pid": ragd_like.pid})


def test_dead_pid_is_stale() -> None:
    assert not daemon_alive({"pid": _dead_pid()})
    assert not daemon_alive({"pid": 0})
    assert not daemon_alive(None)


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to see command lines")
def test_pid_reused_by_another_program_is_stale() -> None:
    sleep = shutil.which("sleep")
    if sleep is None:
        pytest.skip("no sleep binary")
    proc = subprocess.Popen([sleep, "60"])
    try:
        # Until exec, the child's command line is still pytest's.
        deadline = time.monotonic() + 10
        while "sleep" not in (discovery._cmdline(proc.pid) or ""):
            assert time.monotonic() < deadline
            time.sleep(0.005)
        assert not daemon_alive({"pid": proc.pid})
    finally:
        proc.kill()
        proc.wait(10)


def test_find_daemon_ignores_a_stale_status_file(paths: Paths) -> None:
    _write(paths, _dead_pid(), "/tmp/ragd-gone.sock")
    assert find_daemon(paths) is None


def test_find_daemon_returns_the_live_daemons_socket(paths: Paths,
                                                     ragd_like: subprocess.Popen) -> None:
    _write(paths, ragd_like.pid, "/run/ragd-live.sock")
    assert find_daemon(paths) == "/run/ragd-live.sock"


def test_find_daemon_without_status_file_probes_the_socket(paths: Paths) -> None:
    assert find_daemon(paths) is None
    paths.ensure()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(paths.socket_path)
        listener.listen(1)
        assert find_daemon(paths) == paths.socket_path
    finally:
        listener.close()
        os.unlink(paths.socket_path)


def test_second_instance_lock_is_refused(paths: Paths) -> None:
    with acquire_instance_lock(paths) as lock:
        assert lock.held
        with pytest.raises(AlreadyRunning) as caught:
            acquire_instance_lock(paths)
        assert caught.value.message == (
            f"a ragd daemon is already running for this RAGD_HOME (pid {os.getpid()})")
        assert caught.value.hint == "use `ragd status`, or `ragd stop` first"
    assert not lock.held
    acquire_instance_lock(paths).release()  # free again once released


def test_lock_is_refused_to_another_process_and_freed_when_the_holder_dies(
        paths: Paths) -> None:
    code = ("import sys, time\n"
            "from ragd.daemon.settings.paths import resolve_paths\n"
            "from ragd.daemon.ipc.discovery import acquire_instance_lock\n"
            "lock = acquire_instance_lock(resolve_paths())\n"
            "print('locked', flush=True)\n"
            "sys.stdin.read()\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(AlreadyRunning, match=f"pid {holder.pid}"):
            acquire_instance_lock(paths)
    finally:
        holder.kill()  # no clean release: the OS drops the lock with the process
        holder.communicate(timeout=10)
    deadline = time.monotonic() + 10
    while True:
        try:
            acquire_instance_lock(paths).release()
            break
        except AlreadyRunning:
            assert time.monotonic() < deadline, "lock not released after the holder died"
            time.sleep(0.01)


def test_lock_file_is_private(paths: Paths) -> None:
    with acquire_instance_lock(paths) as lock:
        assert stat.S_IMODE(lock.path.stat().st_mode) == 0o600
        assert lock.path.parent == paths.runtime_dir
        assert stat.S_IMODE(paths.runtime_dir.stat().st_mode) == 0o700


def test_status_file_written_by_a_daemon_is_valid_json(paths: Paths) -> None:
    _write(paths, 42)
    assert json.loads(paths.status_file.read_text(encoding="utf-8"))["pid"] == 42
    assert discovery.LOCK_NAME == "daemon.lock"
