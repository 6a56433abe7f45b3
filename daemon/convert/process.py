"""The daemon's side of the conversion worker: start it, feed it, time it, kill it.

One worker process, started on first use and closed after ``idle_s`` without work, so an idle
daemon holds neither the converter libraries nor their memory. A conversion that passes the
time limit gets the worker killed (``convert_timeout``); a worker that dies mid-conversion (a
native crash, the memory limit) yields ``convert_crashed`` or ``convert_memory``. Either way the
next conversion starts a fresh worker.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from daemon.models import Skip

log = logging.getLogger(__name__)

_PROJECT_ROOT = str(Path(__file__).resolve().parents[2])


class ConversionWorker:
    """Converts bytes in a child process with a time and a memory limit. Thread-safe: one
    conversion at a time."""

    def __init__(self, *, timeout_s: float = 120.0, memory_mb: int = 2048, idle_s: float = 60.0,
                 ocr: bool = True) -> None:
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self.idle_s = idle_s
        self.ocr = ocr
        self.calls = 0  # conversions sent to a worker (the doc store's cache misses)
        self.starts = 0  # worker processes started
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()
        self._idle: threading.Timer | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def _start(self) -> subprocess.Popen[bytes]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PROJECT_ROOT, env.get("PYTHONPATH"))
                                            if p)
        cmd = [sys.executable, "-m", "daemon.convert.worker", "--memory-mb",
               str(self.memory_mb)]
        kwargs: dict[str, Any] = {}
        if os.name == "nt":
            kwargs["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)
        else:
            kwargs["start_new_session"] = True  # a terminal's Ctrl-C is the daemon's to handle
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                                **kwargs)
        self.starts += 1
        log.debug("conversion worker started (pid %d)", proc.pid)
        return proc

    def close(self) -> None:
        """Stop the worker (it exits when its stdin closes; killed if it does not)."""
        with self._lock:
            self._stop_idle_timer()
            self._close_proc()

    def _close_proc(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()

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
        return self._proc is not None and self._proc.poll() is None

    # -- one conversion ----------------------------------------------------------------------
    def convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip:
        """The worker's answer for ``data`` (``{"title", "markdown", "metadata"}``) or a Skip."""
        with self._lock:
            self._stop_idle_timer()
            try:
                return self._convert(fmt, data)
            finally:
                if self.idle_s > 0:
                    self._idle = threading.Timer(self.idle_s, self._close_if_idle)
                    self._idle.daemon = True
                    self._idle.start()

    def _convert(self, fmt: str, data: bytes) -> dict[str, Any] | Skip:
        if self._proc is None or self._proc.poll() is not None:
            self._close_proc()
            self._proc = self._start()
        proc = self._proc
        self.calls += 1
        header = json.dumps({"format": fmt, "size": len(data), "ocr": self.ocr}).encode()
        box: list[Any] = []
        thread = threading.Thread(target=_exchange, args=(proc, header + b"\n", data, box),
                                  daemon=True, name="ragd-convert-io")
        thread.start()
        thread.join(self.timeout_s)
        if thread.is_alive():
            proc.kill()
            thread.join()
            self._close_proc()
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
        return self._died(proc)

    def _died(self, proc: subprocess.Popen[bytes]) -> Skip:
        try:
            code = proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
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
