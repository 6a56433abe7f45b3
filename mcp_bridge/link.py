"""The bridge's connections to the daemon: started on demand, re-opened after a crash.

Each call borrows a connection of its own (a blocking :class:`Client` serialises its calls, and
rag_index may hold one for minutes), so a search never waits behind an index. When a connection
turns out to be dead, every idle one is dropped too (they all led to the same daemon) and the
call is tried once more on a fresh connection, which starts a new daemon if none answers.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from ragd.daemon.errors import DaemonStartFailed, DaemonUnavailable
from ragd.daemon.settings.paths import Paths, resolve_paths

if TYPE_CHECKING:
    from ragd.daemon.ipc.client import Client

log = logging.getLogger(__name__)

CLIENT_NAME = "ragd-mcp"
START_TIMEOUT_S = 30.0  # how long a call waits for a daemon it started to listen
MAX_IDLE = 4
# When two clients start a daemon at the same moment, the loser exits at once; the winner may
# need a little longer to listen.
RACE_WAIT_S = 5.0


# The launcher and the IPC client are imported on first use, off the handshake's path.
def connect(paths: Paths, **kwargs: Any) -> Client:
    """ragd.daemon.runtime.launch.connect: the running daemon, or a new one started detached."""
    from ragd.daemon.runtime.launch import connect as launch_connect

    return launch_connect(paths, **kwargs)


def _find_daemon(paths: Paths) -> str | None:
    from ragd.daemon.ipc.discovery import find_daemon

    return find_daemon(paths)


class CallTimedOut(DaemonUnavailable):
    """The daemon is there but did not answer in time (it may still be working on it)."""

    def __init__(self, method: str, timeout: float, hint: str) -> None:
        super().__init__(f"the daemon did not finish {method} within {timeout:g} s", hint)
        self.method = method
        self.timeout = timeout


class DaemonLink:
    """Calls into the daemon for one bridge process; safe to use from several threads."""

    def __init__(self, paths: Paths | None = None, *,
                 start_timeout: float = START_TIMEOUT_S) -> None:
        self._paths = paths
        self.start_timeout = start_timeout
        self._idle: list[Client] = []
        self._busy: set[Client] = set()
        self._idle_lock = threading.Lock()
        self._open_lock = threading.Lock()  # one start at a time: the others wait for it
        self.address: str | None = None
        self._closing = False
        self._finished = 0  # start attempts finished, to share one failure with waiting calls
        self._failure: DaemonUnavailable | None = None
        self.seen_ready = False  # a status said the daemon was past start-up at least once

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            self._paths = resolve_paths()
        return self._paths

    def warm_up(self) -> None:
        """Make sure a daemon runs (starting one if needed), so the first call is fast."""
        try:
            self._release(self._open())
        except Exception as exc:  # logged now; the next tool call reports it properly
            log.warning("could not reach or start the ragd daemon yet: %s", exc)

    def start_warm_up(self) -> threading.Thread:
        thread = threading.Thread(target=self.warm_up, name="ragd-mcp-warm-up", daemon=True)
        thread.start()
        return thread

    def call(self, method: str, params: dict[str, Any], timeout: float) -> Any:
        """Call ``method``; raises the daemon's errors, or DaemonUnavailable with a hint."""
        for attempt in (1, 2):
            client = self._acquire()
            try:
                result = client.call(method, params, timeout=timeout)
            except DaemonUnavailable as exc:
                broken = client.closed  # a timeout leaves it open, a lost daemon closes it
                self._discard(client)  # after a timeout a late reply may still come: never reuse
                if not broken:
                    raise CallTimedOut(method, timeout, exc.hint) from None
                self._drop_idle()
                if attempt == 1 and not self._closing:
                    log.warning("lost the daemon during %s; reconnecting", method)
                    continue
                raise
            except BaseException:
                # A daemon-side error (bad argument, unknown collection): the line is fine.
                self._release(client)
                raise
            self._release(client)
            return result
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close every connection, waking calls still waiting (the bridge is exiting)."""
        self._closing = True
        with self._idle_lock:
            busy, self._busy = self._busy, set()
        for client in busy:
            client.close()
        self._drop_idle()

    # -- the pool ------------------------------------------------------------------------------
    def _acquire(self) -> Client:
        client = None
        with self._idle_lock:
            while self._idle and client is None:
                candidate = self._idle.pop()
                client = None if candidate.closed else candidate
        if client is None:
            client = self._open()
        with self._idle_lock:
            self._busy.add(client)
        return client

    def _release(self, client: Client) -> None:
        with self._idle_lock:
            self._busy.discard(client)
            if not client.closed and not self._closing and len(self._idle) < MAX_IDLE:
                self._idle.append(client)
                return
        client.close()

    def _discard(self, client: Client) -> None:
        with self._idle_lock:
            self._busy.discard(client)
        client.close()

    def _drop_idle(self) -> None:
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for client in idle:
            client.close()

    def _open(self) -> Client:
        seen = self._finished
        with self._open_lock:
            failure = self._failure
            if failure is not None and self._finished != seen:
                # A start failed while this call waited for it: the same answer, not another
                # wait of many seconds.
                raise DaemonUnavailable(failure.message, failure.hint)
            t0 = time.monotonic()
            try:
                try:
                    client = connect(self.paths, start=True, client_name=CLIENT_NAME,
                                     timeout=self.start_timeout)
                except DaemonUnavailable as exc:
                    if isinstance(exc, DaemonStartFailed) \
                            or time.monotonic() - t0 >= self.start_timeout / 2:
                        raise  # it said why, or had its time: waiting would delay the error
                    client = self._await_other_start(exc)
            except DaemonUnavailable as exc:
                self._failure = exc
                raise
            finally:
                self._finished += 1
            self._failure = None
            self.address = client.address
            return client

    def _await_other_start(self, failure: DaemonUnavailable) -> Client:
        """Another client may have won the race to start the daemon: wait for it a little."""
        from ragd.daemon.ipc.client import Client

        deadline = time.monotonic() + RACE_WAIT_S
        while time.monotonic() < deadline:
            address = _find_daemon(self.paths)
            if address is not None:
                try:
                    return Client(address, client_name=CLIENT_NAME)
                except DaemonUnavailable:
                    pass
            time.sleep(0.1)
        raise failure
