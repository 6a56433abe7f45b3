"""A child's lifeline to the daemon: when the daemon dies, its conversion worker dies too.

The daemon kills its workers on the way out (``ragd.daemon.convert.process``), but a daemon killed
outright (SIGKILL, a crash, the OOM killer) runs no code. So the worker watches its parent
itself, with what each system offers (decision 0024):

- **Linux**: the kernel sends the worker SIGKILL when its parent goes (``PR_SET_PDEATHSIG``).
  It works even while a converter holds the interpreter in native code, where no Python
  thread can run. "Parent" there is the thread that started the worker, which is why the
  daemon starts every child from one long-lived thread.
- **Every system**: a thread checks every ``POLL_S`` whether the parent is still there. On
  POSIX an orphan is adopted by another process (init, launchd, a subreaper), so its parent
  pid changes; on Windows the worker holds a handle to the daemon's process and asks whether
  it has exited (a pid may be reused there; a handle may not).

An orphaned worker kills its own process group on POSIX (it leads one: the programs it runs,
ebook-convert and Tesseract, go with it), then exits. Standard library only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

POLL_S = 0.5  # how soon an orphan notices, where the kernel does not tell it
PR_SET_PDEATHSIG = 1
_SYNCHRONIZE = 0x00100000
_WAIT_OBJECT_0 = 0
_owns_group = False  # this process is a worker leading its own process group


def owns_group() -> bool:
    """Whether this process is a daemon's worker leading a process group of its own: the
    programs it runs then share that group, which the daemon kills as a whole."""
    return _owns_group


def die_with_parent(parent_pid: int, *, platform: str = sys.platform,
                    on_orphan: Callable[[], None] | None = None) -> threading.Thread | None:
    """Make this process end when ``parent_pid`` does. Call it first thing in a child.

    Returns the watching thread (None when the parent was already gone and ``on_orphan``
    returned, which only a test's ``on_orphan`` does)."""
    global _owns_group
    on_orphan = on_orphan or exit_orphaned
    _owns_group = hasattr(os, "getpgrp") and os.getpgrp() == os.getpid()
    if platform.startswith("linux"):
        set_death_signal()
    alive = parent_check(parent_pid, platform)
    if not alive():  # gone before we could watch it
        on_orphan()
        return None
    thread = threading.Thread(target=watch, args=(alive, on_orphan), daemon=True,
                              name="ragd-lifeline")
    thread.start()
    return thread


def parent_check(parent_pid: int, platform: str, *,
                 getppid: Callable[[], int] = os.getppid,
                 open_process: Callable[[int], object | None] | None = None,
                 exited: Callable[[object], bool] | None = None) -> Callable[[], bool]:
    """A function that says whether the parent is still alive (pure: the system calls are
    arguments, so the Windows and macOS paths are tested anywhere)."""
    if platform == "win32":
        handle = (open_process or _open_windows_process)(parent_pid)
        if handle is None:  # no such process: it is gone already
            return lambda: False
        has_exited = exited or _windows_exited
        return lambda: not has_exited(handle)
    return lambda: getppid() == parent_pid


def watch(alive: Callable[[], bool], on_orphan: Callable[[], None], *,
          stop: threading.Event | None = None, poll_s: float = POLL_S) -> None:
    """Call ``on_orphan`` once ``alive()`` turns false; return then (or when ``stop`` is set)."""
    stop = stop or threading.Event()
    while not stop.wait(poll_s):
        if not alive():
            on_orphan()
            return


def exit_orphaned() -> None:
    """End this process and, on POSIX, the process group it leads (its own children)."""
    if hasattr(os, "killpg") and os.getpgrp() == os.getpid():
        with contextlib.suppress(OSError):
            os.killpg(os.getpid(), signal.SIGKILL)
    os._exit(1)


def end_rest_of_group() -> bool:
    """SIGTERM every other process of the group this worker leads (what a program it ran
    left behind), not the worker itself. Main thread only; False when not applicable."""
    if not _owns_group or threading.current_thread() is not threading.main_thread():
        return False
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a signal ignored when sent is
    try:                                                       # discarded, not left pending
        os.killpg(os.getpid(), signal.SIGTERM)
    except OSError:
        return False
    finally:
        signal.signal(signal.SIGTERM, previous)
    return True


def set_death_signal() -> bool:
    """Linux: ask the kernel for SIGKILL when the parent (thread) ends. False if unavailable.
    Also safe in a child between fork and exec (``preexec_fn``): one system call."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
        return int(prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        log.debug("prctl unavailable: the parent is watched by polling only")
        return False


def death_signal_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that sets the death signal in a child on Linux (None elsewhere)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    kill = int(signal.SIGKILL)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)

    return preexec


def _open_windows_process(pid: int) -> object | None:
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    kernel32.OpenProcess.restype = ctypes.c_void_p
    kernel32.OpenProcess.argtypes = [ctypes.c_uint32, ctypes.c_int, ctypes.c_uint32]
    handle = kernel32.OpenProcess(_SYNCHRONIZE, False, pid)
    return handle or None


def _windows_exited(handle: object) -> bool:
    import ctypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    kernel32.WaitForSingleObject.restype = ctypes.c_uint32
    kernel32.WaitForSingleObject.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    return int(kernel32.WaitForSingleObject(handle, 0)) == _WAIT_OBJECT_0
