"""Find the running daemon, or start one detached and wait for it (CLI, MCP bridge, tray).

Light on purpose: the standard library, the paths module and the IPC client only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ragd.daemon.errors import DaemonStartFailed, DaemonUnavailable, RagdError
from ragd.daemon.ipc.client import Client
from ragd.daemon.ipc.discovery import daemon_alive, find_daemon, read_status, remove_status
from ragd.daemon.settings.paths import Paths, resolve_paths

START_TIMEOUT_S = 30.0
RACE_GRACE_S = 5.0
# `ragd stop` returns within 5 s (decision 0024): the daemon exits by itself within 3.5 s of
# the request; one still there at this deadline is killed (its next start replays the rest).
STOP_TIMEOUT_S = 4.5
_ASK_TIMEOUT_S = 2.0  # for the shutdown request itself


def daemon_command(extra: Sequence[str] = ()) -> list[str]:
    """How to run `ragd daemon` with this interpreter (works without the console script)."""
    return [sys.executable, "-m", "ragd.daemon.cli.main", "daemon", *extra]


EXIT_ALREADY_RUNNING = 3  # ragd.daemon.cli.main's: another daemon holds the RAGD_HOME
START_ERRORS_MAX = 8192  # what is read back of a failed start's own words


def start_errors(paths: Paths) -> Path:
    """Where a daemon started by a client writes its standard error: what it says when it
    cannot start (a bad config) is read back from there."""
    return paths.state_dir / "daemon-start.err"


def spawn_daemon(paths: Paths, extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """Start the daemon detached from this process (its own session, no terminal); its
    standard error goes to :func:`start_errors`."""
    paths.state_dir.mkdir(parents=True, exist_ok=True)
    errors = open(start_errors(paths), "wb")  # noqa: SIM115 - the child holds it
    kwargs: dict[str, object] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL,
                                 "stderr": errors, "close_fds": True}
    if os.name == "nt":
        kwargs["creationflags"] = (subprocess.DETACHED_PROCESS  # type: ignore[attr-defined]
                                   | subprocess.CREATE_NEW_PROCESS_GROUP)  # type: ignore[attr-defined]
    else:
        kwargs["start_new_session"] = True
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    try:
        return subprocess.Popen(daemon_command(extra), env=env, **kwargs)  # type: ignore[call-overload]
    finally:
        errors.close()


def start_failure(paths: Paths, code: int | None) -> DaemonStartFailed | None:
    """Why a daemon this client started exited at start-up, in its own words (the ``error:``
    and ``hint:`` lines its command prints), or None when it only found another daemon
    running (that one is waited for) or said nothing."""
    if code in (None, 0, EXIT_ALREADY_RUNNING):
        return None
    try:
        with open(start_errors(paths), "rb") as fh:
            text = fh.read(START_ERRORS_MAX).decode("utf-8", "replace")
    except OSError:
        return None
    said = {k: v.strip() for k, _, v in (line.partition(": ") for line in text.splitlines())
            if k in ("error", "hint") and v.strip()}
    if "error" not in said:
        return None
    return DaemonStartFailed(f"the ragd daemon exited at start-up: {said['error']}",
                             said.get("hint") or f"read {paths.log_file}")


def connect(paths: Paths | None = None, *, start: bool = False, client_name: str = "ragd-cli",
            timeout: float = START_TIMEOUT_S, call_timeout: float = 60.0) -> Client:
    """A connected client; with ``start``, launch a daemon when none answers."""
    paths = paths or resolve_paths()
    address = find_daemon(paths)
    if address is not None:
        try:
            return Client(address, timeout=call_timeout, client_name=client_name)
        except DaemonUnavailable:
            if not start:
                raise
    elif not start:
        raise DaemonUnavailable("the ragd daemon is not running",
                                "start it with `ragd start` (or `ragd daemon` in a terminal)")
    proc = spawn_daemon(paths)
    deadline = time.monotonic() + timeout
    exited_at: float | None = None
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None and exited_at is None:
            exited_at = time.monotonic()
            failure = start_failure(paths, proc.returncode)
            if failure is not None:
                raise failure
        # Ours may have lost a start race to another client's daemon (it exits on the
        # instance lock): give the winner a moment to answer before calling it a failure.
        if exited_at is not None and time.monotonic() - exited_at > RACE_GRACE_S \
                and find_daemon(paths) is None:
            raise DaemonUnavailable(
                f"the ragd daemon exited at start-up (code {proc.returncode})",
                f"run `ragd daemon` in a terminal to see why, or read {paths.log_file}")
        address = find_daemon(paths)
        if address is not None:
            try:
                return Client(address, timeout=call_timeout, client_name=client_name)
            except DaemonUnavailable as exc:
                last = exc
        time.sleep(0.05)
    raise DaemonUnavailable(f"the ragd daemon did not answer within {timeout:.0f} s ({last})",
                            f"see {paths.log_file}, or run `ragd daemon` in a terminal")


def running_pid(paths: Paths) -> int | None:
    status = read_status(paths)
    return int(status["pid"]) if status and find_daemon(paths) else None


def stop_daemon(paths: Paths, timeout: float = STOP_TIMEOUT_S) -> tuple[int | None, str]:
    """Stop the running daemon within ``timeout``: ask it to (``shutdown``; SIGTERM if it
    does not answer), wait for its process to end, and kill it past the deadline. Returns
    (pid, how), how being "stopped", "killed" or "not running"."""
    deadline = time.monotonic() + timeout
    address = find_daemon(paths)
    if address is None:
        return None, "not running"
    status = read_status(paths)
    pid: int | None = int(status["pid"]) if status and daemon_alive(status) else None
    try:
        with Client(address, timeout=_ASK_TIMEOUT_S, client_name="ragd-cli") as client:
            pid = int(client.server_info.get("pid") or pid or 0) or None
            client.call("shutdown", timeout=_ASK_TIMEOUT_S)
    except RagdError:
        if pid is None:
            raise
        _signal(pid, kill=False)  # a daemon that cannot answer may still handle SIGTERM
    if pid is None:
        return None, "stopped"
    while time.monotonic() < deadline:
        if not daemon_alive({"pid": pid}):
            return pid, "stopped"
        time.sleep(0.05)
    _signal(pid, kill=True)
    end = time.monotonic() + 0.5
    while daemon_alive({"pid": pid}) and time.monotonic() < end:
        time.sleep(0.02)
    remove_status(paths, pid=pid)
    return pid, "killed"


def _signal(pid: int, *, kill: bool) -> None:
    """SIGTERM (or SIGKILL) on POSIX; on Windows, where no signal can be caught, terminate
    the process (its Job objects then end its workers)."""
    if os.name == "nt":
        if not kill:
            return  # nothing gentle to send: the deadline decides
        sig = signal.SIGTERM  # TerminateProcess
    else:
        sig = signal.SIGKILL if kill else signal.SIGTERM
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
