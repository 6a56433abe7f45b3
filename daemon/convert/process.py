"""The daemon's side of the conversion worker: start it, feed it, time it, kill it.

One worker process, started on first use and closed after ``idle_s`` without work, so an idle
daemon holds neither the converter libraries nor their memory. A conversion that passes the
time limit gets the worker killed (``convert_timeout``); a worker that dies mid-conversion (a
native crash, the memory limit) yields ``convert_crashed`` or ``convert_memory``. Either way the
next conversion starts a fresh worker.

No child outlives the daemon (decision 0024):

- A stop cancels the conversion under way (:func:`stop_children`): the worker is killed at
  once and the caller gets :class:`ConversionCancelled`, so the writer is never held by it.
  The same runs at interpreter exit, whatever the reason.
- A worker leads its own process group (POSIX) and is killed as a group, so the programs it
  runs (ebook-convert, Tesseract) and theirs go with it. On Windows it runs in a Job object
  that kills it and its children when the daemon's handle closes, however the daemon ends.
- A worker watches its parent (``ragd.daemon.convert.lifeline``): on Linux the kernel kills it
  when the daemon dies; elsewhere it notices within half a second.
- Every child is started from one long-lived thread (:class:`_Spawner`), because Linux's
  death signal follows the *thread* that started a child, and reading ahead runs on pool
  threads that end with their sync.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from queue import SimpleQueue
from typing import Any, Protocol

from ragd.daemon.errors import ConverterBusy
from ragd.daemon.models import Skip

log = logging.getLogger(__name__)

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])
_REAP_S = 5.0  # how long a killed child may take to be reaped before we give up waiting


class ConversionCancelled(BaseException):
    """The daemon is stopping: the conversion under way was cancelled and its worker killed.

    A ``BaseException``, as asyncio's ``CancelledError`` is, so that the pipeline's "one bad
    file never stops a collection" (``except Exception``) does not record a cancelled
    conversion as that file's failure; the app turns it into ``Interrupted``.
    """


class ConversionWorker:
    """Converts bytes in a child process with a time and a memory limit. Thread-safe: one
    conversion at a time; with ``max_calls``, a call that finds that many already running or
    waiting is refused with ``ConverterBusy`` instead of queueing. ``cancel_error`` makes the
    error a cancelled conversion raises (``ConversionCancelled``; a request's converter says
    ``Interrupted``, which reaches its client as a clear error)."""

    def __init__(self, *, timeout_s: float = 120.0, memory_mb: int = 2048, idle_s: float = 60.0,
                 ocr: bool = True, max_calls: int | None = None, name: str = "conversion",
                 cancel_error: Callable[[], BaseException] = lambda: ConversionCancelled()
                 ) -> None:
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.idle_s = idle_s
        self.ocr = ocr
        self.max_calls = max_calls
        self.name = name
        self.calls = 0  # conversions sent to a worker (the doc store's cache misses)
        self.starts = 0  # worker processes started
        self._proc: _Child | None = None
        self._lock = threading.Lock()
        self._idle: threading.Timer | None = None
        self._cancelled = False
        self._cancel_error = cancel_error
        self._admitted = 0
        self._admit_lock = threading.Lock()
        _WORKERS.add(self)

    # -- lifecycle ---------------------------------------------------------------------------
    def _start(self) -> _Child:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH"))
                                            if p)
        cmd = [sys.executable, "-m", "ragd.daemon.convert.worker", "--memory-mb",
               str(self.memory_mb), "--parent-pid", str(os.getpid())]
        child = start_child(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            memory_mb=self.memory_mb)
        self.starts += 1
        log.debug("%s worker started (pid %d)", self.name, child.proc.pid)
        return child

    def close(self) -> None:
        """Stop the worker (killed with its children: it holds nothing worth a goodbye)."""
        with self._lock:
            self._stop_idle_timer()
            self._close_proc()

    def cancel(self) -> None:
        """Stop for good, now, even mid-conversion (the daemon is stopping): the conversion
        under way and every later one raise ``ConversionCancelled``. Never waits."""
        self._cancelled = True
        idle = self._idle
        if idle is not None:
            idle.cancel()
        child = self._proc  # read without the lock: a conversion holds it
        if child is not None:
            child.kill()

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def _close_proc(self) -> None:
        child, self._proc = self._proc, None
        if child is not None:
            child.kill()
            child.reap()

    def _stop_idle_timer(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    def _close_if_idle(self) -> None:
        if self._lock.acquire(blocking=False):
            try:
                self._close_proc()
            finally:
                self._lock.release()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """The worker's pid while one runs (tests, status)."""
        child = self._proc
        return child.pid if child is not None else None

    # -- one conversion ----------------------------------------------------------------------
    def convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip:
        """The worker's answer for ``data`` (``{"title", "markdown", "metadata"}``) or a Skip.
        Raises ``ConversionCancelled`` once :meth:`cancel` was called, ``ConverterBusy`` past
        ``max_calls``."""
        if self._cancelled:
            raise self._cancel_error()
        with self._admit_lock:
            if self.max_calls is not None and self._admitted >= self.max_calls:
                raise ConverterBusy(
                    f"the {self.name} converter is busy with {self._admitted} documents",
                    "try again when they are done (each takes at most the conversion time "
                    "limit, documents.timeout_s)")
            self._admitted += 1
        try:
            with self._lock:
                self._stop_idle_timer()
                try:
                    return self._convert(fmt, data)
                finally:
                    if self.idle_s > 0 and not self._cancelled:
                        self._idle = threading.Timer(self.idle_s, self._close_if_idle)
                        self._idle.daemon = True
                        self._idle.start()
        finally:
            with self._admit_lock:
                self._admitted -= 1

    def _convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip:
        if self._proc is None or self._proc.proc.poll() is not None:
            self._close_proc()
            self._proc = self._start()
        child = self._proc
        if self._cancelled:  # cancel() ran between our check and the start: it missed this one
            self._close_proc()
            raise self._cancel_error()
        proc = child.proc
        self.calls += 1
        header = json.dumps({"format": fmt, "size": len(data), "ocr": self.ocr}).encode()
        box: list[Any] = []
        thread = threading.Thread(target=_exchange, args=(proc, header + b"\n", data, box),
                                  daemon=True, name="ragd-convert-io")
        thread.start()
        thread.join(self.timeout_s)
        if self._cancelled:
            self._close_proc()
            thread.join(_REAP_S)
            raise self._cancel_error()
        if thread.is_alive():
            self._close_proc()
            thread.join()
            return Skip("convert_timeout", f"conversion took longer than {self.timeout_s:g} s "
                        "and was stopped")
        line = box[0] if box else b""
        if isinstance(line, bytes) and line:
            try:
                answer = json.loads(line)
            except ValueError:
                answer = None
            if isinstance(answer, dict):
                if answer.get("ok"):
                    return answer
                return Skip(str(answer.get("code") or "parse_error"),
                            str(answer.get("detail") or ""))
        return self._died(child)

    def _died(self, child: _Child) -> Skip:
        proc = child.proc
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            child.kill()
            code = proc.wait()
        self._close_proc()
        if code == -getattr(signal, "SIGKILL", 9):  # the kernel's OOM killer
            return Skip("convert_memory", "the converter ran out of memory and was stopped")
        what = _signal_name(-code) if code < 0 else f"exit status {code}"
        return Skip("convert_crashed", f"the converter process died ({what}) on this file")


def _exchange(proc: subprocess.Popen[bytes], header: bytes, data: bytes, box: list[Any]) -> None:
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(header)
        proc.stdin.write(data)
        proc.stdin.flush()
        box.append(proc.stdout.readline())
    except (OSError, ValueError) as exc:
        box.append(exc)


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


# -- children: started from one thread, killed as a tree, never left behind ------------------
class _Child:
    """A child process the daemon started, with what it takes to kill it and its own
    children: its process group (POSIX) or its Job object (Windows)."""

    def __init__(self, proc: subprocess.Popen[bytes], job: int | None = None) -> None:
        self.proc = proc
        self.job = job
        self._closed = False
        _CHILDREN.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def kill(self) -> None:
        """Kill it and everything it started. Safe to call twice, from any thread."""
        proc = self.proc
        if self.job is not None:
            _windows_terminate_job(self.job)
        if proc.returncode is None and hasattr(os, "killpg"):
            # Not reaped yet, so its pid (and group id) cannot have been reused.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
                return
            except ProcessLookupError:
                return
            except OSError:
                pass
        with contextlib.suppress(OSError):
            proc.kill()

    def reap(self) -> None:
        """Wait for the killed process, close its pipes and its job handle."""
        proc = self.proc
        try:
            proc.wait(timeout=_REAP_S)
        except subprocess.TimeoutExpired:
            log.warning("child %d did not exit after being killed", proc.pid)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()
        if self.job is not None and not self._closed:
            self._closed = True
            _windows_close(self.job)
        _CHILDREN.discard(self)


class _Spawner:
    """Starts child processes from one thread that lives as long as the daemon.

    On Linux a worker asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``),
    and "parent" there is the *thread* that started it: a worker started from a read-ahead
    pool's thread would be killed mid-conversion when that pool ends with its sync.
    """

    def __init__(self) -> None:
        self._queue: SimpleQueue[tuple[Sequence[str], dict[str, Any],
                                       Future[subprocess.Popen[bytes]]]] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def popen(self, cmd: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        if threading.current_thread() is self._thread:
            return subprocess.Popen(cmd, **kwargs)
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="ragd-spawner",
                                                daemon=True)
                self._thread.start()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._queue.put((cmd, kwargs, future))
        return future.result()

    def _run(self) -> None:
        while True:
            cmd, kwargs, future = self._queue.get()
            try:
                future.set_result(subprocess.Popen(cmd, **kwargs))
            except BaseException as exc:  # handed to the caller, raised there
                future.set_exception(exc)


class Cancellable(Protocol):
    def cancel(self) -> None: ...


_SPAWNER = _Spawner()
_WORKERS: weakref.WeakSet[Cancellable] = weakref.WeakSet()


def register_cancellable(worker: Cancellable) -> None:
    """Have ``worker.cancel()`` called when the daemon stops (``stop_children``): the
    extraction pool registers itself so (decision 0041)."""
    _WORKERS.add(worker)
_CHILDREN: set[_Child] = set()  # alive or not yet reaped


def start_child(cmd: Sequence[str], *, memory_mb: int = 0, **kwargs: Any) -> _Child:
    """Start ``cmd`` as a child that will not outlive the daemon: in a process group of its
    own (POSIX; killed as one), from the spawner thread, in a kill-on-close Job object with
    a memory limit of ``memory_mb`` (Windows). The child sets its own death signal (Linux):
    the worker does so first thing (``ragd.daemon.convert.lifeline``)."""
    if os.name == "nt":
        kwargs.setdefault("creationflags", getattr(subprocess, "CREATE_NO_WINDOW", 0))
    else:
        # Its own group (a terminal's Ctrl-C is the daemon's to handle), killed as a whole.
        kwargs["start_new_session"] = True
    proc = _SPAWNER.popen(list(cmd), **kwargs)
    job = _windows_job(proc, memory_mb) if os.name == "nt" else None
    return _Child(proc, job)


def stop_children() -> None:
    """The daemon is going: cancel every conversion under way and kill every child it
    started, with their own children. Never waits; safe to call again."""
    for worker in list(_WORKERS):
        worker.cancel()
    for child in list(_CHILDREN):
        child.kill()


def live_children() -> list[int]:
    """Pids of the children started here and not reaped yet (tests, logs)."""
    return [c.proc.pid for c in list(_CHILDREN) if c.proc.returncode is None]


atexit.register(stop_children)


# -- Windows: a Job object per child ----------------------------------------------------------
JOB_OBJECT_LIMIT_PROCESS_MEMORY = 0x00000100
JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x00002000
_JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9
_PROCESS_SET_QUOTA = 0x0100
_PROCESS_TERMINATE = 0x0001


class _BasicLimits(ctypes.Structure):
    _fields_ = [("PerProcessUserTimeLimit", ctypes.c_int64),
                ("PerJobUserTimeLimit", ctypes.c_int64),
                ("LimitFlags", ctypes.c_uint32),
                ("MinimumWorkingSetSize", ctypes.c_size_t),
                ("MaximumWorkingSetSize", ctypes.c_size_t),
                ("ActiveProcessLimit", ctypes.c_uint32),
                ("Affinity", ctypes.c_size_t),
                ("PriorityClass", ctypes.c_uint32),
                ("SchedulingClass", ctypes.c_uint32)]


class _IoCounters(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "ReadOperationCount", "WriteOperationCount", "OtherOperationCount",
        "ReadTransferCount", "WriteTransferCount", "OtherTransferCount")]


class JobLimits(ctypes.Structure):
    """``JOBOBJECT_EXTENDED_LIMIT_INFORMATION`` (144 bytes on 64-bit Windows)."""

    _fields_ = [("BasicLimitInformation", _BasicLimits),
                ("IoInfo", _IoCounters),
                ("ProcessMemoryLimit", ctypes.c_size_t),
                ("JobMemoryLimit", ctypes.c_size_t),
                ("PeakProcessMemoryUsed", ctypes.c_size_t),
                ("PeakJobMemoryUsed", ctypes.c_size_t)]


def job_limits(memory_mb: int) -> JobLimits:
    """Kill the job's processes when its last handle closes (the daemon's, however it ends);
    cap each process's memory at ``memory_mb`` (what ``RLIMIT_AS`` does on POSIX)."""
    limits = JobLimits()
    flags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
    if memory_mb > 0:
        flags |= JOB_OBJECT_LIMIT_PROCESS_MEMORY
        limits.ProcessMemoryLimit = memory_mb * 1024 * 1024
    limits.BasicLimitInformation.LimitFlags = flags
    return limits


def _last_error() -> int:
    return int(getattr(ctypes, "get_last_error", lambda: 0)())


def _kernel32() -> Any:
    k = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    k.CreateJobObjectW.restype = ctypes.c_void_p
    k.CreateJobObjectW.argtypes = [ctypes.c_void_p, ctypes.c_wchar_p]
    k.SetInformationJobObject.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p,
                                          ctypes.c_uint32]
    k.OpenProcess.restype = ctypes.c_void_p
    k.OpenProcess.argtypes = [ctypes.c_uint32, ctypes.c_int, ctypes.c_uint32]
    k.AssignProcessToJobObject.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    k.TerminateJobObject.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    k.CloseHandle.argtypes = [ctypes.c_void_p]
    return k


def _windows_job(proc: subprocess.Popen[bytes], memory_mb: int) -> int | None:
    """A kill-on-close Job object holding ``proc``; None (logged) if Windows refuses, when
    the daemon still kills the worker on its way out and the worker still watches it."""
    k = _kernel32()
    job = k.CreateJobObjectW(None, None)
    if not job:
        log.warning("could not create a Job object (error %d)", _last_error())
        return None
    limits = job_limits(memory_mb)
    handle = k.OpenProcess(_PROCESS_SET_QUOTA | _PROCESS_TERMINATE, False, proc.pid)
    ok = bool(handle) and bool(k.SetInformationJobObject(
        job, _JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, ctypes.byref(limits),
        ctypes.sizeof(limits))) and bool(k.AssignProcessToJobObject(job, handle))
    if handle:
        k.CloseHandle(handle)
    if not ok:
        log.warning("could not put pid %d in a Job object (error %d)", proc.pid,
                    _last_error())
        k.CloseHandle(job)
        return None
    return int(job)


def _windows_terminate_job(job: int) -> None:
    _kernel32().TerminateJobObject(job, 1)


def _windows_close(job: int) -> None:
    _kernel32().CloseHandle(job)
