"""Stopping on time: `ragd stop` returns within 5 s whatever the daemon is doing (decision 0024).

A stop request (``ragd stop``, the tray's Quit, SIGTERM, SIGINT) cancels the conversion under
way and kills every child process at once (``ragd.daemon.convert.process.stop_children``); the
writer then has ``GRACE_S`` to commit what it read and close the stores. Whatever still runs
``DEADLINE_S`` after the request (a long embedding slice, a FAISS write at a million vectors,
a thread stuck in native code), the process exits: every index write is idempotent and
replayed from the journal at the next start (decision 0001), so exiting mid-write loses
nothing the next start does not redo. The exit code stays 0 for a requested stop, so a
service manager (``Restart=on-failure``) does not start it again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable

from ragd.daemon.convert.process import live_children, stop_children

log = logging.getLogger(__name__)

GRACE_S = 2.5  # the writer's time to finish after a stop request
DEADLINE_S = 3.5  # past this, the process exits whatever still runs


class StopDeadline:
    """Exits the process ``deadline_s`` after :meth:`start` unless it ended before."""

    def __init__(self, on_exit: Callable[[], None], deadline_s: float = DEADLINE_S) -> None:
        """``on_exit`` runs just before the forced exit (remove the status file)."""
        self.on_exit = on_exit
        self.deadline_s = deadline_s
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Cancel the children now and arm the deadline (once; later calls do nothing)."""
        stop_children()
        with self._lock:
            if self._timer is not None:
                return
            self._timer = threading.Timer(self.deadline_s, self.expire)
            self._timer.daemon = True
            self._timer.name = "ragd-stop-deadline"
            self._timer.start()

    def cancel(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()

    def expire(self, code: int = 0) -> None:
        """Exit now: children killed, status file removed, logs flushed."""
        threads = sorted(t.name for t in threading.enumerate()
                         if t.is_alive() and t is not threading.current_thread())
        log.warning("still busy %.1f s after the stop request (threads: %s); exiting now: "
                    "the next start replays what was not written", self.deadline_s,
                    ", ".join(threads))
        force_exit(self.on_exit, code)


def force_exit(on_exit: Callable[[], None], code: int = 0) -> None:
    """Kill the children, run ``on_exit``, flush the logs and leave without waiting for any
    thread (``os._exit``)."""
    stop_children()
    try:
        on_exit()
    except Exception:
        log.exception("cleaning up before exiting")
    if live_children():
        log.warning("children still unreaped at exit: %s", live_children())
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(code)
