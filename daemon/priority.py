"""Background work at low CPU and I/O priority, however the daemon was started (decision 0044).

Only the systemd unit used to set ``Nice=10`` and ``IOSchedulingClass=idle`` (for the whole
process, searches too): a daemon started by ``ragd daemon``, the tray, a LaunchAgent, the
Windows Run key or the MCP bridge ran its indexing at the user's own priority. So the code
lowers what is background work itself, and the unit no longer lowers the rest:

- **Worker processes** (document conversion, extraction) call :func:`lower_this_process` first
  thing: every thread of the process, and every program it runs (Tesseract, ebook-convert),
  gets the low priority.
- **Background threads** of the daemon (embedding, concepts) call :func:`lower_this_thread` when
  they start. Threads they start inherit it on Linux (nice and I/O priority are per thread
  there, copied at thread creation), which is why the embedder's thread pool is created from a
  lowered thread (:func:`run_lowered`).
- **The writer** serves saves and bulk jobs in turn, so it switches with :func:`bulk_mode`,
  which is reversible. A thread that raised its nice value cannot lower it again without
  privileges on Linux (``RLIMIT_NICE`` is 0 by default), so on Linux bulk mode is the I/O
  idle class and ``SCHED_BATCH``, both of which a thread may take back.
- Request threads are never touched.

Each system's branch is a pure function of the system calls it is given, so every branch is
tested on any machine; :func:`lower_this_process` and friends pick the real calls. Nothing here
raises: a call the system refuses is reported in :class:`Lowered` and logged.
"""

from __future__ import annotations

import functools
import logging
import os
import platform as _platform
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

LOW_NICE = 10  # what the systemd unit used to set for the whole daemon (Nice=10)

# Linux: ioprio_set(2). The I/O class sits above IOPRIO_CLASS_SHIFT bits of data (the level).
IOPRIO_WHO_PROCESS = 1  # "process" means a thread id too
IOPRIO_CLASS_SHIFT = 13
IOPRIO_CLASS_NONE, IOPRIO_CLASS_BE, IOPRIO_CLASS_IDLE = 0, 2, 3
IOPRIO_IDLE = IOPRIO_CLASS_IDLE << IOPRIO_CLASS_SHIFT
IOPRIO_DEFAULT = IOPRIO_CLASS_NONE << IOPRIO_CLASS_SHIFT  # derived from the nice value
# (ioprio_set, ioprio_get) by machine; the generic table serves arm64, riscv64, loongarch64.
IOPRIO_SYSCALLS: dict[str, tuple[int, int]] = {
    "x86_64": (251, 252), "amd64": (251, 252), "i386": (289, 290), "i686": (289, 290),
    "aarch64": (30, 31), "arm64": (30, 31), "riscv64": (30, 31), "loongarch64": (30, 31),
    "armv7l": (314, 315), "armv6l": (314, 315), "ppc64le": (273, 274), "ppc64": (273, 274),
    "s390x": (282, 283),
}
SCHED_OTHER, SCHED_BATCH = 0, 3

# macOS: <sys/resource.h> and setiopolicy_np(3).
PRIO_DARWIN_THREAD = 3
PRIO_DARWIN_BG = 0x1000
IOPOL_TYPE_DISK = 0
IOPOL_SCOPE_PROCESS = 0
IOPOL_THROTTLE = 3

# Windows: SetPriorityClass and SetThreadPriority.
BELOW_NORMAL_PRIORITY_CLASS = 0x00004000
PROCESS_MODE_BACKGROUND_BEGIN = 0x00100000
THREAD_MODE_BACKGROUND_BEGIN = 0x00010000
THREAD_MODE_BACKGROUND_END = 0x00020000


@dataclass(frozen=True)
class Lowered:
    """What a call changed: ``cpu`` and ``io`` name the setting now in force (None: left as
    it was), ``errors`` what the system refused."""

    cpu: str | None = None
    io: str | None = None
    errors: tuple[str, ...] = ()

    def __str__(self) -> str:
        done = ", ".join(x for x in (self.cpu, self.io) if x) or "unchanged"
        return done + (f" (refused: {'; '.join(self.errors)})" if self.errors else "")


def _attempt(errors: list[str], what: str, fn: Callable[[], Any]) -> bool:
    try:
        fn()
    except (OSError, AttributeError, ValueError) as exc:
        errors.append(f"{what}: {exc}")
        return False
    return True


# -- Linux -------------------------------------------------------------------------------------
def linux_lower(tids: Iterable[int], *, getpriority: Callable[[int, int], int],
                setpriority: Callable[[int, int, int], None],
                ioprio_set: Callable[[int, int, int], None]) -> Lowered:
    """Nice ``LOW_NICE`` (never less nice than now) and the idle I/O class for each thread
    id: on Linux both are per thread, and threads started later copy their creator's."""
    errors: list[str] = []
    cpu = io = True
    for tid in tids:
        try:
            current = getpriority(os.PRIO_PROCESS, tid)
        except OSError:  # the thread ended meanwhile
            continue
        nice = max(current, LOW_NICE)
        if nice != current:
            cpu &= _attempt(errors, f"nice {nice} for {tid}",
                            functools.partial(setpriority, os.PRIO_PROCESS, tid, nice))
        io &= _attempt(errors, f"I/O idle for {tid}",
                       functools.partial(ioprio_set, IOPRIO_WHO_PROCESS, tid, IOPRIO_IDLE))
    return Lowered(f"nice {LOW_NICE}" if cpu else None, "I/O idle" if io else None,
                   tuple(errors))


def linux_bulk_mode(tid: int, on: bool, *,
                    set_scheduler: Callable[[int, int], None],
                    ioprio_set: Callable[[int, int, int], None]) -> Lowered:
    """The writer's switch: ``SCHED_BATCH`` and the idle I/O class for a bulk job,
    ``SCHED_OTHER`` and the default I/O priority for a save. Both directions are allowed to
    an unprivileged thread; a nice value once raised is not."""
    errors: list[str] = []
    policy, prio = (SCHED_BATCH, IOPRIO_IDLE) if on else (SCHED_OTHER, IOPRIO_DEFAULT)
    cpu = _attempt(errors, "scheduling policy", lambda: set_scheduler(tid, policy))
    io = _attempt(errors, "I/O priority", lambda: ioprio_set(IOPRIO_WHO_PROCESS, tid, prio))
    return Lowered(("SCHED_BATCH" if on else "SCHED_OTHER") if cpu else None,
                   ("I/O idle" if on else "I/O default") if io else None, tuple(errors))


def _linux_ioprio_calls(machine: str | None = None) -> tuple[int, int] | None:
    return IOPRIO_SYSCALLS.get((machine or _platform.machine()).lower())


def _linux_syscall(number: int, *args: int) -> int:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    result = int(libc.syscall(number, *args))
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def linux_ioprio_set(which: int, who: int, prio: int) -> None:
    """ioprio_set(2) through libc's syscall(); OSError when the machine's number is unknown
    or the kernel refuses."""
    calls = _linux_ioprio_calls()
    if calls is None:
        raise OSError(f"no ioprio_set number known for {_platform.machine()}")
    _linux_syscall(calls[0], which, who, prio)


def linux_ioprio_get(tid: int) -> int:
    """The I/O priority of a thread (class << 13 | level): for tests and ``ragd doctor``."""
    calls = _linux_ioprio_calls()
    if calls is None:
        raise OSError(f"no ioprio_get number known for {_platform.machine()}")
    return _linux_syscall(calls[1], IOPRIO_WHO_PROCESS, tid)


def linux_thread_ids() -> list[int]:
    """Every thread of this process."""
    try:
        return sorted(int(t) for t in os.listdir("/proc/self/task"))
    except OSError:
        return [threading.get_native_id()]


def linux_thread_nice(tid: int, pid: int | str = "self") -> int:
    """A thread's nice value as the kernel reports it (/proc/<pid>/task/<tid>/stat)."""
    with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as fh:
        stat = fh.read()
    # Field 19 (nice); the command name (field 2) may hold spaces, so count after its ')'.
    return int(stat.rpartition(")")[2].split()[16])


# -- macOS -------------------------------------------------------------------------------------
def darwin_lower_process(*, getpriority: Callable[[int, int], int],
                         setpriority: Callable[[int, int, int], None],
                         setiopolicy: Callable[[int, int, int], int]) -> Lowered:
    """Nice ``LOW_NICE`` for the whole process (setpriority is per process on macOS) and
    throttled disk I/O (``setiopolicy_np``), both inherited by the programs it runs."""
    errors: list[str] = []
    cpu = True
    current = getpriority(os.PRIO_PROCESS, 0)
    if current < LOW_NICE:
        cpu = _attempt(errors, "nice", lambda: setpriority(os.PRIO_PROCESS, 0, LOW_NICE))

    def throttle() -> None:
        if setiopolicy(IOPOL_TYPE_DISK, IOPOL_SCOPE_PROCESS, IOPOL_THROTTLE) != 0:
            raise OSError("setiopolicy_np refused")

    io = _attempt(errors, "I/O throttle", throttle)
    return Lowered(f"nice {LOW_NICE}" if cpu else None, "I/O throttled" if io else None,
                   tuple(errors))


def darwin_thread(on: bool, *, setpriority: Callable[[int, int, int], None]) -> Lowered:
    """The calling thread into (or out of) the background band, ``PRIO_DARWIN_BG``: low CPU
    priority and throttled I/O, reversible by the thread itself."""
    errors: list[str] = []
    ok = _attempt(errors, "PRIO_DARWIN_BG",
                  lambda: setpriority(PRIO_DARWIN_THREAD, 0, PRIO_DARWIN_BG if on else 0))
    what = "background band" if on else "normal band"
    return Lowered(what if ok else None, what if ok else None, tuple(errors))


def _darwin_setiopolicy(iotype: int, scope: int, policy: int) -> int:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.setiopolicy_np(iotype, scope, policy))


# -- Windows -----------------------------------------------------------------------------------
def windows_lower_process(*, set_priority_class: Callable[[int], bool]) -> Lowered:
    """The below-normal priority class (inherited by the programs the process starts), then
    background mode (very low I/O and memory priority for the process itself)."""
    cpu = bool(set_priority_class(BELOW_NORMAL_PRIORITY_CLASS))
    io = bool(set_priority_class(PROCESS_MODE_BACKGROUND_BEGIN))
    errors = tuple(e for e, ok in (("SetPriorityClass(BELOW_NORMAL) failed", cpu),
                                   ("PROCESS_MODE_BACKGROUND_BEGIN failed", io)) if not ok)
    return Lowered("below normal" if cpu else None, "background mode" if io else None, errors)


def windows_thread(on: bool, *, set_thread_priority: Callable[[int], bool]) -> Lowered:
    """The calling thread into (or out of) background mode: low CPU, I/O and memory priority,
    reversible by the thread itself."""
    ok = bool(set_thread_priority(THREAD_MODE_BACKGROUND_BEGIN if on
                                  else THREAD_MODE_BACKGROUND_END))
    what = "background mode" if on else "normal mode"
    return Lowered(what if ok else None, what if ok else None,
                   () if ok else ("SetThreadPriority failed",))


def _kernel32() -> Any:
    import ctypes

    return ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]


def _windows_set_priority_class(value: int) -> bool:
    k = _kernel32()
    return bool(k.SetPriorityClass(k.GetCurrentProcess(), value))


def _windows_set_thread_priority(value: int) -> bool:
    k = _kernel32()
    return bool(k.SetThreadPriority(k.GetCurrentThread(), value))


# -- what the daemon and its workers call ------------------------------------------------------
def lower(scope: Literal["process", "thread"], *, platform: str = sys.platform) -> Lowered:
    """Lower this process (every thread, and the programs it runs) or the calling thread
    for good. Never raises; what the system refused is in the answer (and logged)."""
    try:
        out = _lower(scope, platform)
    except Exception as exc:  # a missing symbol, an odd platform: never a reason to fail
        out = Lowered(errors=(f"{type(exc).__name__}: {exc}",))
    (log.info if out.errors else log.debug)("lowered this %s's priority: %s", scope, out)
    return out


def _lower(scope: str, platform: str) -> Lowered:
    if platform.startswith("linux"):
        tids = linux_thread_ids() if scope == "process" else [threading.get_native_id()]
        return linux_lower(tids, getpriority=os.getpriority, setpriority=os.setpriority,
                           ioprio_set=linux_ioprio_set)
    if platform == "darwin":
        if scope == "thread":
            return darwin_thread(True, setpriority=os.setpriority)
        return darwin_lower_process(getpriority=os.getpriority, setpriority=os.setpriority,
                                    setiopolicy=_darwin_setiopolicy)
    if platform == "win32":
        if scope == "thread":
            return windows_thread(True, set_thread_priority=_windows_set_thread_priority)
        return windows_lower_process(set_priority_class=_windows_set_priority_class)
    return Lowered(errors=(f"no priority support for {platform}",))


def lower_this_process() -> Lowered:
    """Call first thing in a worker process (conversion, extraction): low CPU and I/O
    priority for all of it and for every program it runs, whoever started the daemon."""
    return lower("process")


def lower_this_thread() -> Lowered:
    """Call first thing in a background thread of the daemon (embedding, concepts)."""
    return lower("thread")


def bulk_mode(on: bool, *, platform: str = sys.platform) -> Lowered:
    """The calling thread at background priority for bulk work (``on``), or back at normal
    priority for a save: reversible, unlike :func:`lower_this_thread`. Never raises."""
    try:
        if platform.startswith("linux"):
            out = linux_bulk_mode(
                threading.get_native_id(), on, ioprio_set=linux_ioprio_set,
                set_scheduler=lambda tid, policy: os.sched_setscheduler(
                    tid, policy, os.sched_param(0)))
        elif platform == "darwin":
            out = darwin_thread(on, setpriority=os.setpriority)
        elif platform == "win32":
            out = windows_thread(on, set_thread_priority=_windows_set_thread_priority)
        else:
            out = Lowered(errors=(f"no priority support for {platform}",))
    except Exception as exc:
        out = Lowered(errors=(f"{type(exc).__name__}: {exc}",))
    if out.errors:
        log.debug("bulk mode %s: %s", "on" if on else "off", out)
    return out


def run_lowered(fn: Callable[[], T], name: str = "ragd-lowered") -> T:
    """``fn()`` on a new thread at low priority, waited for. What ``fn`` creates keeps the
    priority on Linux: the embedder's thread pool, created when its model loads, is made
    here so that its threads are as low as the embedding thread that drives them."""
    box: dict[str, Any] = {}

    def run() -> None:
        lower_this_thread()
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised on the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
