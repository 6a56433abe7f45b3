"""How clients find the daemon, and how a second daemon learns that one already runs.

The daemon writes a status file (pid, socket, version, protocol, start time) into the private
runtime dir once it listens. Clients read it and check that the pid still belongs to a ragd
process: after a crash or a reboot the file can name a dead pid, or a pid the system has since
given to something else. The single-instance lock is the authority; the file is a hint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ragd.daemon.errors import AlreadyRunning
from ragd.daemon.ipc.address import socket_answers
from ragd.daemon.ipc.pipes import remember_token
from ragd.daemon.settings.paths import Paths

log = logging.getLogger(__name__)

LOCK_NAME = "daemon.lock"
_CMDLINE_MARKERS = ("ragd", "daemon")
_PID_OFFSET = 16  # the pid is written past the locked byte (Windows locks are mandatory)


def write_status(paths: Paths, *, pid: int, socket: str, version: str, protocol: int,
                 started_at: float | str, token: str | None = None,
                 window: str | None = None) -> Path:
    """Atomically replace the status file (mode 0600) and return its path. ``token``: what
    a hello must carry (the Windows pipe, decision 0032); ``window``: the URL that opens
    ragd's window, with this start's token (decision 0053)."""
    paths.ensure()
    target = paths.status_file
    body = json.dumps({"pid": pid, "socket": socket, "version": version,
                       "protocol": protocol, "started_at": started_at,
                       **({"token": token} if token else {}),
                       **({"window": window} if window else {})}, indent=2)
    fd, tmp = tempfile.mkstemp(prefix=".daemon-", suffix=".json", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:  # mkstemp made it 0600
            fh.write(body + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def read_status(paths: Paths) -> dict[str, Any] | None:
    """The status file's content, or None if it is missing or unreadable."""
    try:
        text = paths.status_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", paths.status_file, exc)
        return None
    try:
        status = json.loads(text)
    except ValueError:
        log.warning("ignoring a corrupt status file %s", paths.status_file)
        return None
    if not isinstance(status, dict) or not _is_pid(status.get("pid")):
        log.warning("ignoring a status file without a pid: %s", paths.status_file)
        return None
    return status


def remove_status(paths: Paths, *, pid: int | None = None) -> None:
    """Delete the status file; with ``pid``, only if it still names that process."""
    if pid is not None:
        status = read_status(paths)
        if status is not None and status.get("pid") != pid:
            return  # a newer daemon owns it now
    with contextlib.suppress(FileNotFoundError):
        paths.status_file.unlink()


def _is_pid(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _pid_exists(pid: int) -> bool:
    if sys.platform == "win32":
        return _windows_pid_exists(pid)
    try:
        os.kill(pid, 0)  # signal 0: existence and permission check only
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True


def _windows_pid_exists(pid: int) -> bool:
    # os.kill(pid, 0) would TerminateProcess on Windows: ask the kernel instead.
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    process_query_limited_information = 0x1000
    still_active = 259
    handle = kernel32.OpenProcess(process_query_limited_information, False, pid)
    if not handle:
        return False
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return False
        return code.value == still_active
    finally:
        kernel32.CloseHandle(handle)


def _cmdline(pid: int) -> str | None:
    """The process's command line where /proc exists, else None."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except FileNotFoundError:
        return ""  # exited meanwhile
    except OSError:
        return None
    return raw.replace(b"\0", b" ").decode("utf-8", errors="replace")


def daemon_alive(status: dict[str, Any] | None) -> bool:
    """Whether the status names a running ragd process (stale files name dead or reused pids)."""
    if not status or not _is_pid(status.get("pid")):
        return False
    pid = status["pid"]
    if not _pid_exists(pid):
        return False
    cmdline = _cmdline(pid)
    if cmdline is None:
        return True  # no /proc (macOS, Windows): the pid is all we can check cheaply
    # A zombie has an empty command line: dead for our purpose.
    return any(marker in cmdline for marker in _CMDLINE_MARKERS)


def find_daemon(paths: Paths) -> str | None:
    """The address of the running daemon, or None when none runs for these paths.

    Without a usable status file, a socket that answers still counts: a daemon whose status
    file was deleted must not make clients start a second one.
    """
    status = read_status(paths)
    if status is not None:
        address = status.get("socket")
        if daemon_alive(status) and isinstance(address, str) and address:
            token = status.get("token")
            remember_token(address, token if isinstance(token, str) else None)
            return address
        log.debug("stale status file %s (pid %s)", paths.status_file, status.get("pid"))
        return None
    address = paths.socket_path
    if not paths.is_windows and os.path.exists(address) and socket_answers(address, timeout=0.5):
        return address
    return None


class InstanceLock:
    """The held single-instance lock; released by :meth:`release` or process exit."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        # The file stays: unlinking a lock file lets two processes lock two different inodes.
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        if sys.platform == "win32":
            import msvcrt

            with contextlib.suppress(OSError):
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # type: ignore[attr-defined]
        os.close(fd)  # closing also drops a flock

    def __enter__(self) -> InstanceLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, 0, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)  # type: ignore[attr-defined]
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def try_lock_file(path: Path) -> InstanceLock | None:
    """Hold an exclusive lock on ``path`` (created 0600), or None if another process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
    try:
        locked = _try_lock(fd)
    except BaseException:
        os.close(fd)
        raise
    if not locked:
        os.close(fd)
        return None
    return InstanceLock(path, fd)


def _holder_pid(fd: int, paths: Paths) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        os.lseek(fd, _PID_OFFSET, os.SEEK_SET)
        text = os.read(fd, 32).decode("ascii").strip()
        if text:
            return int(text)
    status = read_status(paths)
    return status.get("pid") if status else None


def acquire_instance_lock(paths: Paths) -> InstanceLock:
    """Take the per-RAGD_HOME daemon lock, or raise :class:`AlreadyRunning`.

    The operating system releases the lock when the holder dies, so a crashed daemon never
    blocks the next one (unlike a pid file).
    """
    paths.ensure()
    path = paths.runtime_dir / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o600)
    try:
        if not _try_lock(fd):
            pid = _holder_pid(fd, paths)
            raise AlreadyRunning(
                "a ragd daemon is already running for this RAGD_HOME "
                f"(pid {pid if pid is not None else 'unknown'})",
                hint="use `ragd status`, or `ragd stop` first")
        os.lseek(fd, _PID_OFFSET, os.SEEK_SET)
        os.write(fd, f"{os.getpid():<20}\n".encode("ascii"))
        os.ftruncate(fd, _PID_OFFSET + 21)
    except BaseException:
        os.close(fd)
        raise
    return InstanceLock(path, fd)
